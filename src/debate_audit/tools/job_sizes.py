"""What a model-bound job asks a scheduler for besides its GPUs and memory: CPU cores and a time limit. The
settings are config `cluster` (`ClusterSettings`, runtime/cluster.py, with where the engines keep their
caches); none of them changes a number, so none is a tracked param.

Cores. snakemake-executor-plugin-slurm asks SLURM for a job's `cpus_per_task` resource where it has one, else
for its `threads` (`--cpus-per-task`, for sbatch and for the job step's srun alike:
snakemake_executor_plugin_slurm_jobstep.get_cpu_setting). The model-bound rules keep `threads` at 1, which
Snakemake also exports as OMP_NUM_THREADS: on a CPU that keeps a job single-threaded and its numbers
reproducible (models/cpu_numerics.py), and lets `make run` put one model job on each core. What a job needs
on a GPU node goes into `cpus_per_task`, which the local scheduler ignores (`job_cpus`), and which a job on a
GPU computes with inside the SLURM step the plugin sizes by it (torch's threads; a fine-tune's torchrun
workers share them: runtime/threads.py):

- a vLLM engine over N GPUs is 2 + N busy processes (its API server, its engine core, one worker per GPU:
  vLLM's own sizing rule, at least 2 + N cores), and the job's own process sends it the prompts: 3 + N;
- in-process work on a GPU (scoring, in-process generation, each fine-tuning process) has the CPU tokenise,
  batch and copy for it: `cpus.per_gpu` cores per GPU (4; a fine-tuning process whose optimizer step runs on
  the host, `verifier.distributed.cpu_offload`, `cpus.offload_per_gpu`).

Time limit (`runtime`, minutes): `make plan`'s estimate of the job (tools/plan_hours.py: its calls and tokens as its
stage's cost.py counts them, at the H100 throughput, its GPUs sharing the work, plus loading the weights and
starting its engine), times `runtime.margin` (the estimate's stated uncertainty is x0.5 to x2), never below
`runtime.min_minutes`, and times Snakemake's `attempt`: a job killed at its limit is retried (the profile's
`retries`) with twice the time, then three times, ... up to `runtime.max_minutes` (2880, 48 h, a common
partition's MaxTime). A job whose first attempt wants more is killed at the cap on every attempt: `make plan`
names it (tools/plan_report.py `runtime_warnings`).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from debate_audit.eraudit.common import grid
from debate_audit.models.calls import RulePlan
from debate_audit.models.spec import ModelSpec
from debate_audit.runtime.cluster import ClusterSettings
from debate_audit.tools.plan_counts import dataset_stats, model_calls
from debate_audit.tools.plan_hours import job_hours


def job_cpus(settings: ClusterSettings, *, engine_gpus: int = 0, compute_gpus: int = 0, offload: bool = False) -> int:
    """Cores of a job that starts a vLLM engine over `engine_gpus` GPUs (0: none) and computes in-process on
    `compute_gpus` GPUs (0: none), at any one time doing one or the other (a judge stops its engine before it
    scores)."""
    engine = settings.engine_cpus + engine_gpus + 1 if engine_gpus else 1
    per_gpu = settings.offload_cpus_per_gpu if offload else settings.cpus_per_gpu
    return max(engine, per_gpu * compute_gpus, 1)


def model_job_cpus(
    settings: ClusterSettings, specs: Iterable[ModelSpec], *, scores: bool, generates: bool = True
) -> int:
    """Cores of a job using the models `specs`: where it generates, the largest vLLM engine one of them starts
    (generation_backend vllm); one GPU of in-process work where it scores or one of them generates
    in-process. A model served elsewhere (source openai, generation_backend server) costs the job only its
    own process."""
    local = [s for s in specs if s.source != "openai"]
    engine = max(
        (s.vllm.tensor_parallel_size for s in local if generates and s.generation_backend == "vllm"), default=0
    )
    in_process = scores or (generates and any(s.generation_backend == "local" for s in local))
    return job_cpus(settings, engine_gpus=engine, compute_gpus=1 if in_process else 0)


def wanted_minutes(settings: ClusterSettings, hours: float, attempt: int = 1) -> int:
    """The time limit a job estimated at `hours` wants on its `attempt`-th try, before `runtime.max_minutes`."""
    return max(settings.min_runtime, math.ceil(hours * 60 * settings.runtime_margin)) * max(1, attempt)


def job_minutes(settings: ClusterSettings, hours: float, attempt: int = 1) -> int:
    """The time limit of a job estimated at `hours`, on its `attempt`-th try: what it wants, at most the cap."""
    minutes = wanted_minutes(settings, hours, attempt)
    return minutes if settings.max_runtime is None else min(minutes, int(settings.max_runtime))


def split_parts(settings: ClusterSettings, compute_hours: float, load_hours: float) -> int:
    """How many jobs to split work estimated at `compute_hours` (plus `load_hours` each job pays to load its
    model) into, so that each job's first attempt fits `runtime.max_minutes`: 1 without a cap, and 1 where
    loading alone would not fit (no split helps; make plan warns)."""
    cap = settings.max_runtime
    if cap is None or compute_hours <= 0 or wanted_minutes(settings, load_hours) > cap:
        return 1
    parts = 1
    while wanted_minutes(settings, compute_hours / parts + load_hours) > cap:
        parts += 1
    return parts


# Rules whose work one configured job would do is split into several jobs (each over a range of the work),
# and the config key that fixes how many (null: as many as fit runtime.max_minutes).
SPLIT_RULES = {"debate_gcg": ("debate", "gcg", "parts")}


def job_parts(config: Mapping[str, Any], settings: ClusterSettings, rule: str, wildcards: Mapping[str, str]) -> int:
    """How many jobs the work of `rule`'s job with `wildcards` runs as (1 for a rule that is not split)."""
    if rule not in SPLIT_RULES:
        return 1
    section, sub, key = SPLIT_RULES[rule]
    fixed = ((config.get(section) or {}).get(sub) or {}).get(key)
    return nominal_times(config).parts(rule, wildcards, settings, fixed)


def matches(cell: Mapping[str, str], wildcards: Mapping[str, str]) -> bool:
    """Whether the calls of a plan row with `cell` belong to the job with `wildcards`: every wildcard they share
    has the same value (a job over all of a model's word limits matches the rows of each)."""
    return all(str(wildcards[key]) == value for key, value in cell.items() if key in wildcards)


class JobTimes:
    """Per job of a configuration, the hours `make plan` estimates (tools/plan_hours.py `job_hours`), looked up by
    rule and wildcards. Built once per workflow (`from_config`) from the configured dataset files, else the
    nominal sizes (plan_counts.NOMINAL), and the models' sizes: the prepared directory's weights where there are
    some, else the model card's."""

    def __init__(self, rows: Mapping[str, list[tuple[dict[str, str], str, float, float]]]):
        self.rows = rows  # rule -> [(cell, model, hours of the cell's calls, hours to load the model)]

    @classmethod
    def from_config(cls, config: Mapping[str, Any], model_dirs: Mapping[str, str | Path] | None = None) -> JobTimes:
        config = dict(config)
        stats, _ = dataset_stats(config, None)
        specs = {name: ModelSpec.from_config(name, entry) for name, entry in config["models"].items()}
        rows: dict[str, list[tuple[dict[str, str], str, float, float]]] = {}
        for rp in model_calls(config, stats):
            directory = (model_dirs or {}).get(rp.model)
            compute, load = job_hours(config, specs.get(rp.model), rp, directory)
            rows.setdefault(rp.rule, []).append((rp.cell, rp.model, compute, load))
        return cls(rows)

    def split_hours(self, rule: str, wildcards: Mapping[str, str]) -> tuple[float, float]:
        """(hours of the calls, hours of loading) of the job of `rule` with `wildcards`: the calls of every row
        it covers, and loading each of its models (and starting its engine) once."""
        covered = [row for row in self.rows.get(rule, []) if matches(row[0], wildcards)]
        loads: dict[str, float] = {}
        for _, model, _, load in covered:
            loads[model] = max(loads.get(model, 0.0), load)
        return sum(compute for _, _, compute, _ in covered), sum(loads.values())

    def hours(self, rule: str, wildcards: Mapping[str, str], parts: int = 1) -> float:
        """Estimated hours of the job of `rule` with `wildcards` (0: a rule whose stage counts no calls); with
        `parts`, of one of the jobs its calls are split into, each loading the models itself."""
        compute, load = self.split_hours(rule, wildcards)
        return compute / parts + load

    def parts(self, rule: str, wildcards: Mapping[str, str], settings: ClusterSettings, fixed: int | None) -> int:
        """How many jobs the work of `rule`'s job with `wildcards` runs as: `fixed` where given (a config
        setting), else as many as make each fit `runtime.max_minutes` (`split_parts`)."""
        return fixed or split_parts(settings, *self.split_hours(rule, wildcards))

    def cells(self, rule: str) -> list[dict[str, str]]:
        """The jobs of `rule` the plan counts, as wildcard values."""
        return list({tuple(sorted(c.items())): c for c, *_ in self.rows.get(rule, [])}.values())


@functools.cache
def _nominal_times(frozen: str) -> JobTimes:
    return JobTimes.from_config(json.loads(frozen))


def nominal_times(config: Mapping[str, Any]) -> JobTimes:
    """JobTimes from the configuration alone (model cards, not prepared directories): how many jobs a split rule
    runs as must not change once its model is prepared, or a rerun would ask for other part files."""
    return _nominal_times(json.dumps(config, sort_keys=True, default=str))


def job_sizes(config: dict, specs: dict[str, ModelSpec], rules: Sequence[RulePlan]) -> Any:
    """Set each (rule, model) row's `cpus`, `runtime_min` and `runtime_wanted_min`: what its jobs ask the
    scheduler for (the most of them) and what the longest wants before the cap, computed as the workflow
    computes them (the functions above, with the models prepared under resources/models/ where they are)."""
    from debate_audit.cwpor.jobs import job_wildcards

    settings = ClusterSettings.from_config(config)
    times = JobTimes.from_config(config, {name: Path("resources/models") / name for name in specs})
    for rp in rules:
        spec = specs.get(rp.model)
        if spec is None:
            continue
        if rp.rule == "verifier_finetune":
            shards = grid.distributed_settings(config["verifier"], rp.model)
            rp.cpus = job_cpus(settings, compute_gpus=shards["processes"], offload=shards["cpu_offload"])
        else:
            rp.cpus = model_job_cpus(settings, [spec], scores=rp.scorings > 0, generates=rp.generations > 0)
        jobs = {
            tuple(sorted(job_wildcards(config, rp.rule, cell).items()))
            for cell, model, *_ in times.rows.get(rp.rule, [])
            if model == rp.model
        }
        hours = [times.hours(rp.rule, dict(job), job_parts(config, settings, rp.rule, dict(job))) for job in jobs]
        rp.runtime_min = max((job_minutes(settings, h) for h in hours), default=settings.min_runtime)
        rp.runtime_wanted_min = max((wanted_minutes(settings, h) for h in hours), default=settings.min_runtime)
    return settings
