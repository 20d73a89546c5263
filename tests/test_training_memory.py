"""GPU memory that adds up (models/memory.py, training_memory_bytes, the figure `make plan` prints and the fine-tuning
job checks): tiny fine-tunes run the job's own path (FSDP2, bf16 compute on fp32 master weights, AdamW, two
optimizer steps, gradient checkpointing as set) on gloo processes, and their peak is measured storage by
storage (models/activations.LiveBytes: torch keeps no allocator statistics on a CPU; every tensor an operator
makes is counted until freed, FSDP2's resized parameter storages at their size).

The figure may not be below the peak (a job it lets start would run out of memory) nor more than 15% above it,
in one process and in two; and each of its terms is needed: for each, some case in which the figure without it
is below the measured peak (training_memory_cases.py shapes them so)."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest
import torch
from helpers import torchrun

from debate_audit.models.memory import GPU_RESERVE_BYTES, TrainingMemory

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))
from training_memory_cases import CASES, measure  # noqa: E402

HEADROOM = 1.15  # the figure over the measured peak, at most


def planned(memory: TrainingMemory) -> float:
    """The figure as the allocator would see it: without the reserve (CUDA context, NCCL, fragmentation)."""
    return memory.total - GPU_RESERVE_BYTES


@pytest.fixture(scope="module")
def one_process():
    from debate_audit.eraudit.verifier.distributed import start, stop

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    rank, _ = start("cpu", shard_alone=True)
    try:
        yield {name: measure(name, rank) for name in CASES}
    finally:
        stop()
        torch.set_num_threads(threads)


@pytest.mark.parametrize("name", CASES)
def test_the_planned_figure_bounds_the_measured_peak_of_one_process(one_process, name):
    result = one_process[name]
    assert all(torch.isfinite(torch.tensor(result.losses))) and len(result.losses) == 2
    assert result.peak <= planned(result.planned) <= HEADROOM * result.peak, (
        name,
        result.peak / 2**20,
        {k: round(v / 2**20, 2) for k, v in result.planned.terms().items()},
    )


def test_every_term_of_the_figure_is_needed(one_process):
    needed = {}
    for term in TrainingMemory.TERMS:
        if term == "reserve":  # not on a CPU
            continue
        for name, result in one_process.items():
            without = dataclasses.replace(result.planned, **{term: 0.0})
            if planned(without) < result.peak:
                needed[term] = name
                break
    assert set(needed) == set(TrainingMemory.TERMS) - {"reserve"}, needed


@pytest.mark.slow
def test_the_planned_figure_bounds_the_measured_peak_of_each_of_two_processes(tmp_path):
    out = tmp_path / "peaks"
    torchrun(2, HERE / "training_memory_cases.py", str(out), "head", "layers")
    for rank in (0, 1):
        for name, (peak, fields) in torch.load(f"{out}.{rank}").items():
            memory = TrainingMemory(**fields)
            assert peak <= planned(memory) <= HEADROOM * peak, (rank, name, peak / 2**20, memory.terms())
            # half the shards of one process: 16 bytes a parameter over the two
            assert memory.shards > 0 and memory.host == 0
