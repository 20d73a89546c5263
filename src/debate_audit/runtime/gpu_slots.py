"""Local runs on a machine with several GPUs: each model job on GPUs of its own.

Snakemake's `--resources gpu=N` (`make run`) caps how many GPUs the running jobs ask for together, but it
hands a job no device: without help every job's torch and vLLM would start on GPU 0. `pinned` gives a job
the GPUs it asked for (its `gpu` resource): it locks that many of the machine's GPUs, one lock file per GPU
(`flock`, released by the kernel when the job's process ends, however it ends), and sets
CUDA_VISIBLE_DEVICES to them before anything touches CUDA, with CUDA_DEVICE_ORDER=PCI_BUS_ID so the
indices are nvidia-smi's. Processes the job starts (a vLLM engine, torchrun's workers) inherit them.

Snakemake keeps the GPUs asked for by running jobs within the machine's, so each job finds enough free
locks: the others hold at most what they asked for. A job waits (saying so) when another run on the same
machine holds them. Nothing is pinned where a scheduler already chose (SLURM sets CUDA_VISIBLE_DEVICES for
its jobs' GPUs), where CUDA_VISIBLE_DEVICES is set, or where there is no GPU.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

log = logging.getLogger(__name__)

# How many GPUs this machine has for local jobs, where nvidia-smi's count is not the one to use (fewer GPUs
# for this run; tests).
GPUS_ENV = "DEBATE_AUDIT_LOCAL_GPUS"


def local_gpus() -> int:
    """The machine's GPUs: $DEBATE_AUDIT_LOCAL_GPUS, else the GPUs `nvidia-smi -L` lists (0 without it)."""
    if os.environ.get(GPUS_ENV):
        return int(os.environ[GPUS_ENV])
    if shutil.which("nvidia-smi") is None:
        return 0
    listed = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
    return sum(1 for line in listed.splitlines() if line.startswith("GPU "))


def lock_dir() -> Path:
    """One folder of GPU locks per machine and user: every run of the user on the machine shares them."""
    return Path(tempfile.gettempdir()) / f"debate-audit-gpus-{os.getuid()}"


@contextlib.contextmanager
def pinned(
    n: int, *, total: int | None = None, locks: Path | None = None, poll_s: float = 1.0, what: str = "job"
) -> Iterator[list[int] | None]:
    """Within: CUDA_VISIBLE_DEVICES names `n` GPUs that no other pinned job holds; yields their indices, or
    None where nothing is pinned (module docstring). The environment is restored on exit."""
    if n <= 0 or "CUDA_VISIBLE_DEVICES" in os.environ or "SLURM_JOB_ID" in os.environ:
        yield None
        return
    total = local_gpus() if total is None else total
    if total <= 0:
        yield None
        return
    if n > total:
        raise ValueError(f"{what} asks for {n} GPUs (its gpu resource); this machine has {total}")
    folder = locks or lock_dir()
    folder.mkdir(parents=True, exist_ok=True)
    held: dict[int, int] = {}  # GPU index -> open lock file descriptor
    note_at = time.monotonic()
    try:
        while True:
            for index in range(total):
                if len(held) == n:
                    break
                if index in held:
                    continue
                fd = os.open(folder / f"gpu{index}.lock", os.O_RDWR | os.O_CREAT, 0o600)
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    os.close(fd)
                else:
                    held[index] = fd
            if len(held) == n:
                break
            if time.monotonic() >= note_at:
                log.info(
                    "%s: %d of its %d GPUs are free; waiting for the others (held by other jobs, %s)",
                    what,
                    len(held),
                    n,
                    folder,
                )
                note_at = time.monotonic() + 60
            time.sleep(poll_s)
        gpus = sorted(held)
        before = {key: os.environ.get(key) for key in ("CUDA_VISIBLE_DEVICES", "CUDA_DEVICE_ORDER")}
        os.environ["CUDA_VISIBLE_DEVICES"] = ",".join(map(str, gpus))
        os.environ["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID"
        log.info("%s runs on GPU %s of %d", what, os.environ["CUDA_VISIBLE_DEVICES"], total)
        try:
            yield gpus
        finally:
            for key, value in before.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
    finally:
        for fd in held.values():
            os.close(fd)  # closing the descriptor drops its lock
