# What a model-bound job asks the scheduler for: GPUs, CPU cores (cpus_per_task), host memory (mem_mb) and a
# time limit (runtime), from the specs of the models it uses and make plan's estimates, and the priority of
# the ER-Audit chain. None of them changes an output (scheduling only): never a tracked param.
import functools

from debate_audit.eraudit.common import grid
from debate_audit.models.memory import finetune_host_mb, host_mem_mb
from debate_audit.models.prepare import PREPARE_MEM_MB
from debate_audit.runtime.cluster import ClusterSettings
from debate_audit.tools.job_sizes import (
    JobTimes,
    job_cpus,
    job_minutes,
    job_parts,
    model_job_cpus,
)

# The ER-Audit chain (debates -> selection -> adjudication -> fine-tuning) is a run's longest path: its jobs
# go first, and CW-POR and the paraphrase pools fill the cores around them (scheduling only: no output changes).
ER_CHAIN_PRIORITY = 10


def generation_gpu(*names):
    """gpu of a job that only generates with the models `names`: the most GPUs one of them needs (a vLLM
    engine the job starts: its tensor_parallel_size; in-process: 1), none when every one of them is served
    by a server the job does not start (generation_backend server, source openai)."""
    local = [
        model_spec(n)
        for n in names
        if model_spec(n).source != "openai"
        and model_spec(n).generation_backend != "server"
    ]
    return max(
        (
            s.vllm.tensor_parallel_size if s.generation_backend == "vllm" else 1
            for s in local
        ),
        default=0,
    )


def model_gpu(*names):
    """gpu of a job that scores with the models `names` and may generate with them: one GPU where one
    of them scores in-process, none where each is an endpoint or scored by its server"""
    in_process = any(
        model_spec(n).source != "openai" and model_spec(n).scoring_backend == "local"
        for n in names
    )
    return max(int(in_process), generation_gpu(*names))


def finetune_processes(wc):
    """Processes (GPUs; on a CPU, cores) of one verifier_finetune job."""
    return grid.distributed_settings(config["verifier"], wc.architecture)["processes"]


# ---------------------------------------------- cores and time limits of model-bound jobs (tools/job_sizes.py)
# What a scheduler is asked for besides GPUs and memory (config `cluster`): `cpus_per_task`, which the SLURM
# plugin sends as --cpus-per-task and the local scheduler ignores (the rules' `threads` stay 1: one core, one
# OMP thread per model job on a CPU; a job on a GPU computes with its step's cpus_per_task instead,
# runtime/threads.py), and `runtime`, make plan's estimate of the job x margin x attempt.
CLUSTER = ClusterSettings.from_config(config)


@functools.cache
def job_times():
    """make plan's per-job estimates for this configuration (built on first use, when the DAG is)."""
    return JobTimes.from_config(config, {name: model_dir(name) for name in MODEL_SPECS})


def job_runtime(rule):
    """runtime (minutes) of a job of `rule`: its estimate x cluster.runtime.margin, at least min_minutes, x
    Snakemake's attempt (a job killed at its limit is retried with twice the time); a job over one of
    `parts` ranges of the work (wildcard `parts`, SPLIT_RULES) its share of the calls.
    """

    def runtime(wc, attempt):
        cell = dict(wc.items())
        parts = int(cell.pop("parts", 1))
        return job_minutes(CLUSTER, job_times().hours(rule, cell, parts), attempt)

    return runtime


def split_jobs(rule, wc):
    """How many jobs (ranges of the work) the job of `rule` with wildcards `wc` runs as (tools/job_sizes.py
    SPLIT_RULES: a fixed count from the config, else as many as fit cluster.runtime.max_minutes).
    """
    return job_parts(config, CLUSTER, rule, dict(wc.items()))


def model_cpus(*names, scores=True, generates=True):
    """cpus_per_task of a job using the models `names`: 3 + N where it generates through a vLLM engine over N
    GPUs, cluster.cpus.per_gpu where it computes in-process (it scores, or a model generates in-process).
    """
    specs = [model_spec(n) for n in dict.fromkeys(names)]
    return model_job_cpus(CLUSTER, specs, scores=scores, generates=generates)


def finetune_cpus(wc):
    """cpus_per_task of one verifier_finetune job: cluster.cpus.per_gpu for each of its processes
    (offload_per_gpu where the optimizer steps on the host)."""
    shards = grid.distributed_settings(config["verifier"], wc.architecture)
    return job_cpus(
        CLUSTER, compute_gpus=shards["processes"], offload=shards["cpu_offload"]
    )


# ---------------------------------------------- memory of model-bound jobs (models/memory.py)
def model_mem_mb(*names, training=False, scores=True, generates=True):
    """mem_mb of a job using the models `names` (repeats count once): memory.host_mem_mb of their specs and
    prepared directories; `scores` and `generates` as for model_cpus (a job that only scores starts no
    engine, and holds no engine's copy of the weights). Snakemake evaluates resources again when a job is
    about to start, so a submitted job gets the figure of its prepared models."""
    return host_mem_mb(
        [(model_spec(n), model_dir(n)) for n in dict.fromkeys(names)],
        training=training,
        scores=scores,
        generates=generates,
    )


def finetune_mem_mb(wc):
    """mem_mb of one verifier_finetune job: memory.finetune_host_mb, from what its processes hold (on a GPU
    the fp32 model each loads before sharding it, the offloaded shards and optimizer, the gathered weights it
    saves; LoRA only the bf16 base)."""
    return finetune_host_mb(
        model_spec(wc.architecture),
        model_dir(wc.architecture),
        lora=grid.uses_lora(config["verifier"], wc.architecture),
        **grid.distributed_settings(config["verifier"], wc.architecture),
    )
