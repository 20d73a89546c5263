"""Local multi-GPU runs: concurrent model jobs get GPUs of their own (gpu_slots.py), as separate processes
lock them; a machine without GPUs (this one) or a scheduler's choice is left alone."""

import multiprocessing
import os
import signal
import time
from types import SimpleNamespace

import pytest

from debate_audit.runtime.gpu_slots import GPUS_ENV, local_gpus, pinned
from debate_audit.runtime.job import rule_context


def _hold(n, total, locks, hold_s, out):
    """A job: pin n of `total` GPUs, report what it sees, hold them a while."""
    for key in ("CUDA_VISIBLE_DEVICES", "SLURM_JOB_ID"):
        os.environ.pop(key, None)
    with pinned(n, total=total, locks=locks, poll_s=0.02, what=f"job{os.getpid()}") as gpus:
        out.put(
            (os.getpid(), gpus, os.environ["CUDA_VISIBLE_DEVICES"], os.environ["CUDA_DEVICE_ORDER"], time.monotonic())
        )
        time.sleep(hold_s)
        out.put((os.getpid(), "done", time.monotonic()))


def test_concurrent_jobs_get_disjoint_gpus_and_a_job_waits_for_its_share(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    # 4 GPUs: jobs of 2, 1 and 1 fill them; a fourth job of 2 must wait until the first ends
    jobs = [ctx.Process(target=_hold, args=(n, 4, tmp_path, hold, out)) for n, hold in [(2, 1.5), (1, 3.0), (1, 3.0)]]
    for job in jobs:
        job.start()
    seen = {}
    while len(seen) < 3:
        pid, gpus, visible, order, at = out.get(timeout=60)
        seen[pid] = gpus
        assert visible == ",".join(map(str, gpus)) and order == "PCI_BUS_ID"
    assert sorted(g for gpus in seen.values() for g in gpus) == [0, 1, 2, 3]  # disjoint, all in use
    late = ctx.Process(target=_hold, args=(2, 4, tmp_path, 0.0, out))
    late.start()
    events = [out.get(timeout=60) for _ in range(4)]  # three "done" and the late job's start, in time order
    first_done = min(e[2] for e in events if e[1] == "done")
    (start,) = [e for e in events if e[0] == late.pid and e[1] != "done"]
    assert start[4] >= first_done  # it started only once the 2-GPU job let its GPUs go
    assert set(start[1]) == set(seen[jobs[0].pid])
    for job in [*jobs, late]:
        job.join(timeout=60)
        assert job.exitcode == 0


def test_a_killed_job_leaves_no_gpu_locked(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    job = ctx.Process(target=_hold, args=(2, 2, tmp_path, 60.0, out))
    job.start()
    assert out.get(timeout=60)[1] == [0, 1]
    os.kill(job.pid, signal.SIGKILL)  # no finally runs: the kernel drops its locks
    job.join(timeout=60)
    with pinned(2, total=2, locks=tmp_path, poll_s=0.02) as gpus:
        assert gpus == [0, 1]


def test_nothing_is_pinned_without_gpus_or_where_a_scheduler_chose(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    with pinned(1, total=0, locks=tmp_path) as gpus:
        assert gpus is None and "CUDA_VISIBLE_DEVICES" not in os.environ
    with pinned(0, total=4, locks=tmp_path) as gpus:  # a job without a gpu resource
        assert gpus is None
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    with pinned(1, total=4, locks=tmp_path) as gpus:
        assert gpus is None
    monkeypatch.delenv("SLURM_JOB_ID")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3")
    with pinned(1, total=4, locks=tmp_path) as gpus:
        assert gpus is None and os.environ["CUDA_VISIBLE_DEVICES"] == "3"
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    with pytest.raises(ValueError, match="asks for 3 GPUs .* this machine has 2"):
        with pinned(3, total=2, locks=tmp_path):
            pass


def test_a_rule_pins_its_gpu_resource_and_restores_the_environment(tmp_path, monkeypatch):
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    monkeypatch.setenv(GPUS_ENV, "2")
    monkeypatch.setattr("debate_audit.runtime.gpu_slots.lock_dir", lambda: tmp_path)
    assert local_gpus() == 2
    job = SimpleNamespace(
        rule="verifier_finetune",
        log=[str(tmp_path / "job.log")],
        resources=SimpleNamespace(gpu=2),
        params=SimpleNamespace(items=lambda: []),
        wildcards=SimpleNamespace(items=lambda: []),
    )
    with rule_context(job):
        assert os.environ["CUDA_VISIBLE_DEVICES"] == "0,1"
    assert "CUDA_VISIBLE_DEVICES" not in os.environ
    assert "rule verifier_finetune runs on GPU 0,1 of 2" in (tmp_path / "job.log").read_text()
