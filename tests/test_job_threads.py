"""Host threads of a model job (runtime/threads.py): Snakemake's `threads` in a local run, the cores of its SLURM
step where the plugin sized one for a GPU job, shared among torchrun's workers."""

from __future__ import annotations

import logging
import os
import subprocess
from types import SimpleNamespace

import pytest
import torch
from test_offline_jobs import fake_job

from debate_audit.eraudit.verifier import distributed
from debate_audit.runtime import threads
from debate_audit.runtime.job import rule_context
from debate_audit.runtime.threads import JOB_CORES, THREAD_VARIABLES, held_cores, worker_threads


def test_a_step_sized_for_the_job_gives_it_its_cores_and_nothing_else_does():
    # the jobstep's `srun --cpus-per-task=<cpus_per_task>`: the job's own number, above its threads
    assert held_cores(1, 4, {"SLURM_CPUS_PER_TASK": "4"}) == 4
    # a 4-process fine-tune whose optimizer steps on the host
    assert held_cores(4, 32, {"SLURM_CPUS_PER_TASK": "32"}) == 32
    # a local run: no SLURM step
    assert held_cores(1, 4, {}) is None
    # `snakemake --cores 16` inside a 16-core allocation: every job sees the allocation's number, not its own
    assert held_cores(1, 4, {"SLURM_CPUS_PER_TASK": "16"}) is None
    # no more than Snakemake's threads, or no cpus_per_task (a CPU job; profiles/slurm-cpu's 0; a site's -1)
    assert held_cores(1, 1, {"SLURM_CPUS_PER_TASK": "1"}) is None
    assert held_cores(1, None, {"SLURM_CPUS_PER_TASK": "1"}) is None
    assert held_cores(1, 0, {"SLURM_CPUS_PER_TASK": "1"}) is None
    assert held_cores(1, -1, {"SLURM_CPUS_PER_TASK": "1"}) is None


def test_workers_share_the_job_s_cores_and_otherwise_inherit_snakemake_s_threads():
    assert worker_threads(4, {JOB_CORES: "32"}) == 8
    assert worker_threads(3, {JOB_CORES: "4"}) == 1
    assert worker_threads(8, {JOB_CORES: "4"}) == 1  # never none
    assert worker_threads(4, {}) is None


def model_job(tmp_path, *, threads=1, cpus_per_task=4, gpu=1):
    job = fake_job("verifier_evaluate", tmp_path)
    job.threads = threads
    job.resources = SimpleNamespace(gpu=gpu, cpus_per_task=cpus_per_task)
    return job


@pytest.fixture
def cuda_seen(monkeypatch):
    """A machine whose CUDA sees a GPU (this one need not have one: nothing here touches it)."""
    monkeypatch.setattr(threads, "_cuda_sees_a_gpu", lambda: True)


def test_a_gpu_job_in_its_slurm_step_computes_with_the_cores_it_holds(tmp_path, monkeypatch, cuda_seen):
    before = torch.get_num_threads()
    cores = before + 3  # more than the test's process has: the step's number, not torch's default
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", str(cores))
    monkeypatch.delenv(JOB_CORES, raising=False)
    with rule_context(model_job(tmp_path, cpus_per_task=cores)):
        assert torch.get_num_threads() == cores
        assert os.environ[JOB_CORES] == str(cores)
    # the test's process as it was
    assert torch.get_num_threads() == before and JOB_CORES not in os.environ
    log = (tmp_path / "verifier_evaluate.log").read_text()
    assert f"host threads: {cores}, the cores of its SLURM step" in log


def test_a_job_keeps_snakemake_s_threads_without_a_step_of_its_own_or_a_gpu(tmp_path, monkeypatch, cuda_seen):
    monkeypatch.delenv(JOB_CORES, raising=False)
    before = torch.get_num_threads()
    cases = [
        ({}, model_job(tmp_path)),  # a local run, as before: cell for cell the same numbers
        ({"SLURM_CPUS_PER_TASK": "16"}, model_job(tmp_path)),  # a local run inside an allocation
        ({"SLURM_CPUS_PER_TASK": "4"}, model_job(tmp_path, gpu=0)),  # no GPU: one thread on the CPU
        ({"SLURM_CPUS_PER_TASK": "4"}, fake_job("verifier_evaluate", tmp_path)),  # a script without resources
    ]
    for environ, job in cases:
        monkeypatch.delenv("SLURM_CPUS_PER_TASK", raising=False)
        for key, value in environ.items():
            monkeypatch.setenv(key, value)
        with rule_context(job):
            assert torch.get_num_threads() == before and JOB_CORES not in os.environ, environ
        if hasattr(job, "resources"):  # a model job's log says so
            assert "host threads: 1 (Snakemake's threads)" in (tmp_path / "verifier_evaluate.log").read_text()


def test_a_gpu_job_on_a_node_where_cuda_sees_none_keeps_one_thread(tmp_path, monkeypatch):
    """A SLURM test node's fake GPUs: the model computes on the CPU, with the local run's thread."""
    monkeypatch.setattr(threads, "_cuda_sees_a_gpu", lambda: False)
    monkeypatch.setenv("SLURM_CPUS_PER_TASK", "4")
    before = torch.get_num_threads()
    with rule_context(model_job(tmp_path)):
        assert torch.get_num_threads() == before


def test_torchrun_workers_get_their_share_of_the_step_s_cores(tmp_path, monkeypatch, caplog):
    """distributed.launch: in a step of 32 cores, each of 4 workers 8 threads; elsewhere Snakemake's threads."""
    started = []

    def run(cmd, env, **kwargs):
        started.append(env)
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(distributed.subprocess, "run", run)
    monkeypatch.setenv("OMP_NUM_THREADS", "4")  # Snakemake's, from the rule's threads (its processes)
    monkeypatch.setenv(JOB_CORES, "32")
    with caplog.at_level(logging.INFO):
        distributed.launch(4, {})
    assert {key: started[-1][key] for key in THREAD_VARIABLES} == dict.fromkeys(THREAD_VARIABLES, "8")
    monkeypatch.delenv(JOB_CORES)
    distributed.launch(4, {})
    assert started[-1]["OMP_NUM_THREADS"] == "4"
