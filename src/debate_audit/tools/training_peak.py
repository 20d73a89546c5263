"""A fine-tune's measured memory peak against the figure `make plan` prints and the job checks
(models/memory.py, training_memory_bytes): tests/test_training_memory.py on the CPU, the GPU device check
(benchmarks/gpu_device_check.py) on CUDA.

The run is the job's own: the model sharded by FSDP2 over the process group (eraudit/verifier/distributed.py,
bf16 compute on fp32 master weights, as on a GPU) and trained by the job's loop (verifier/training_loop.py,
torch alone) for two optimizer steps on rows of the configured length, each with an L_lm target, a q_m readout
and, as V_org's, a q_h readout. The peak is
read from torch's allocator on a GPU (max_memory_allocated) and, on a CPU, where torch keeps no allocator
statistics, counted storage by storage (models/activations.LiveBytes); the figure minus its reserve (what the
allocator does not see) is what it is compared with.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from debate_audit.models.memory import GPU_RESERVE_BYTES, TrainingMemory, TrainingSetup, training_memory_bytes


def memory_rows(vocab: int, setup: TrainingSetup, count: int, *, seed: int = 0) -> list:
    """`count` training rows of `setup.max_length` tokens: an L_lm sequence whose last max_target_tokens are
    its target, a q_m readout sharing its prompt, a q_h readout of the full length."""
    from debate_audit.eraudit.verifier.training_rows import IGNORE, ChoiceExample, TrainExample

    generator = torch.Generator().manual_seed(seed)

    def tokens(n: int) -> list[int]:
        return torch.randint(10, vocab, (n,), generator=generator).tolist()

    s, target = setup.max_length, setup.max_target_tokens
    rows = []
    for pair_id in range(count):
        prompt = tokens(s - target)
        answer = tokens(target)
        fc = [ChoiceExample(prompt + tokens(3), pair_id % 2)]
        qh = [ChoiceExample(tokens(s), 1 - pair_id % 2)] if setup.with_qh else []
        rows.append(TrainExample(pair_id, prompt + answer, [-100] * (s - target) + answer, fc, qh))
    assert IGNORE == -100
    return rows


@dataclass(frozen=True)
class Measured:
    peak: int  # bytes, this process
    planned: TrainingMemory
    losses: list[float]

    @property
    def ratio(self) -> float:
        """Measured over planned, the reserve left out (the allocator does not see it)."""
        return self.peak / (self.planned.total - GPU_RESERVE_BYTES)


def measure_training(model: Any, config: dict, setup: TrainingSetup, device: str, rank: Any) -> Measured:
    """Shard `model` (fp32, on the host) over the process group, train it two optimizer steps with `setup`'s
    shapes, and return its peak beside training_memory_bytes(config, setup). The caller started the process
    group (distributed.start) and stops it."""
    from debate_audit.eraudit.verifier.distributed import shard
    from debate_audit.eraudit.verifier.training_loop import FinetuneSettings, train
    from debate_audit.models.activations import LiveBytes

    settings = FinetuneSettings(
        epochs=1,
        max_steps=2,
        batch_size=setup.batch_size,
        grad_accum=setup.grad_accum,
        learning_rate=1e-5,
        gradient_checkpointing=setup.gradient_checkpointing,
        max_length=setup.max_length,
        max_target_tokens=setup.max_target_tokens,
        loss_weights={"lm": 1.0, "fc": 2.0, "qh": 2.0},
        processes=rank.world,
        cpu_offload=setup.cpu_offload,
    )
    rows = memory_rows(config.get("vocab_size") or config["text_config"]["vocab_size"], setup, 2 * setup.grad_accum)
    on_gpu = device.startswith("cuda")
    model = shard(model, cpu_offload=setup.cpu_offload, compute_dtype=torch.bfloat16)
    if on_gpu:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        curve = train(model, rows, settings, [5, 6], 0, rank=rank, desc="memory")
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated()
    else:
        live = LiveBytes()
        live.track(*model.parameters())
        with live:
            curve = train(model, rows, settings, [5, 6], 0, rank=rank, desc="memory")
        peak = live.peak
    return Measured(peak, training_memory_bytes(config, setup), [c["loss"] for c in curve])
