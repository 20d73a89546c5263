"""How many threads a model job computes with on the host: Snakemake's `threads`, unless SLURM gave the job a
step of more cores for its GPU work.

Snakemake exports a job's `threads` as OMP_NUM_THREADS, MKL_NUM_THREADS and the like (THREAD_VARIABLES;
snakemake/shell.py), which torch reads when it is imported. The model-bound rules keep `threads` at 1 (a
fine-tune at its process count): a local run puts one model job on each core, and on a CPU one thread keeps a
job's numbers reproducible (models/cpu_numerics.py). What a job needs on a GPU node it asks SLURM for through
`cpus_per_task` instead (tools/job_sizes.py), and snakemake-executor-plugin-slurm-jobstep runs the job inside
its allocation as `srun -n1 --cpus-per-task=<cpus_per_task> python -m snakemake ...` (get_cpu_setting), so the
step's environment has SLURM_CPUS_PER_TASK set to that number, but the job still sees OMP_NUM_THREADS of its
`threads`: a scoring job dequantized gpt-oss's experts (about 19 billion values) on one thread of the four
cores it held, and GPT-20B's four offloaded optimizer steps used 16 of its 32.

`held_cores` is the number a job uses instead: SLURM_CPUS_PER_TASK where it equals the job's own
`cpus_per_task` (a step sized for this job alone; a local `snakemake --cores N` inside an allocation shares the
allocation's SLURM_CPUS_PER_TASK among all its jobs, which keep Snakemake's threads) and exceeds its `threads`.
`job_threads` applies it only where the job holds a GPU that CUDA sees: a model computing on the CPU keeps
one thread, and the numbers of a local run (tests/test_slurm.py compares a SLURM run's outputs with them).
Job arrays (the plugin's --slurm-array-jobs, unused by profiles/slurm) run without a step of their own and
without SLURM_CPUS_PER_TASK: they keep Snakemake's threads.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Mapping

# What Snakemake sets from `threads` (snakemake/shell.py), set alike for the processes a job starts.
THREAD_VARIABLES = (
    "OMP_NUM_THREADS",
    "GOTO_NUM_THREADS",
    "OPENBLAS_NUM_THREADS",
    "MKL_NUM_THREADS",
    "VECLIB_MAXIMUM_THREADS",
    "NUMEXPR_NUM_THREADS",
)
# Set by `job_threads` while a job uses the cores it holds: how the processes it starts (torchrun's workers,
# distributed.launch) learn how many to share. A vLLM engine ignores it and keeps Snakemake's threads: its
# 2 + N processes are what its cores were counted for (tools/job_sizes.py).
JOB_CORES = "DEBATE_AUDIT_JOB_CORES"


def held_cores(threads: int, cpus_per_task: int | None, environ: Mapping[str, str]) -> int | None:
    """The cores a job computes with instead of its Snakemake `threads`: its SLURM step's SLURM_CPUS_PER_TASK
    where that is the job's own `cpus_per_task` and more than `threads`; None elsewhere (a local run, a step
    shared with other jobs, or one no larger than `threads`)."""
    step = environ.get("SLURM_CPUS_PER_TASK", "")
    if not step.isdigit() or not cpus_per_task or int(step) != cpus_per_task:
        return None
    return cpus_per_task if cpus_per_task > threads else None


def worker_threads(processes: int, environ: Mapping[str, str] | None = None) -> int | None:
    """Threads of each of `processes` workers a job starts: the cores it holds (JOB_CORES) shared among them;
    None where it holds none beyond Snakemake's threads (the workers then inherit those)."""
    environ = os.environ if environ is None else environ
    cores = environ.get(JOB_CORES, "")
    return max(1, int(cores) // max(1, processes)) if cores.isdigit() else None


def _cuda_sees_a_gpu() -> bool:
    import torch  # only here: a job without a GPU never imports torch for this

    return torch.cuda.is_available()


@contextlib.contextmanager
def job_threads(threads: int, cpus_per_task: int | None, gpus: int, log: logging.Logger) -> Iterator[int | None]:
    """Inside, a job with `gpus` GPUs that CUDA sees computes with the cores its SLURM step holds
    (`held_cores`): torch's threads in this process, JOB_CORES for the processes it starts. Yields that count,
    None where the job keeps Snakemake's threads; afterwards the process is as it was (a test runs a script
    in-process)."""
    cores = held_cores(threads, cpus_per_task, os.environ)
    if cores is None or gpus <= 0 or not _cuda_sees_a_gpu():
        if cpus_per_task:
            log.info("host threads: %d (Snakemake's threads)", threads)
        yield None
        return
    import torch

    before, exported = torch.get_num_threads(), os.environ.get(JOB_CORES)
    torch.set_num_threads(cores)
    os.environ[JOB_CORES] = str(cores)
    log.info("host threads: %d, the cores of its SLURM step (SLURM_CPUS_PER_TASK; Snakemake's: %d)", cores, threads)
    try:
        yield cores
    finally:
        torch.set_num_threads(before)
        if exported is None:
            os.environ.pop(JOB_CORES, None)
        else:
            os.environ[JOB_CORES] = exported
