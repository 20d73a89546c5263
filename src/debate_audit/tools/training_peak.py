"""A fine-tune's measured memory peak against the figure `make plan` prints and the job checks
(models/memory.py, training_memory_bytes): tests/test_training_memory.py on the CPU, the GPU device check
(benchmarks/gpu_device_check.py) on CUDA.

The run is the job's own: the model sharded by FSDP2 over the process group (eraudit/verifier/distributed.py,
bf16 compute on fp32 master weights, as on a GPU) and trained by the job's loop (verifier/training_loop.py,
torch alone) for two optimizer steps on rows of the configured length, each with an L_lm target, a q_m readout
and, as V_org's, a q_h readout. The peak is
read from torch's allocator on a GPU (max_memory_allocated) and, on a CPU, where torch keeps no allocator
statistics, counted storage by storage (models/activations.LiveBytes); the figure minus its reserve (what the
allocator does not see) is what it is compared with. On a CPU, FSDP2's collectives there (gloo) return only once
gloo has let go of their tensors (settle_collectives), so the count does not depend on thread scheduling.
"""

from __future__ import annotations

import time
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
        if rank.world > 1:
            settle_collectives(model)
        live = LiveBytes()
        live.track(*model.parameters())
        with live:
            curve = train(model, rows, settings, [5, 6], 0, rank=rank, desc="memory")
        peak = live.peak
    return Measured(peak, training_memory_bytes(config, setup), [c["loss"] for c in curve])


# ---------------------------------------------------------------------------------------- gloo, settled
# gloo runs each collective on a worker thread of its process group, which marks the work done (waking the
# caller) and only then drops its reference to the work, and with it to the collective's tensors. What the
# caller freed meanwhile stays allocated until that thread runs again: at once on an idle machine, on a loaded
# one (CI: both cores busy) only after the training went on. gloo's reduce-scatter all-reduces a copy of its
# whole input (ProcessGroupGloo::reduce_scatter_tensor_coalesced: a layer's gradients in fp32), so LiveBytes
# now and then counted that copy, or an all-gather's buffer, beside the next layer's gathered weights: the same
# two-process run peaked up to 2.4 MB above its usual figure (rank 0 of case `layers`: 23,676,927 bytes against
# 21,289,893, over the planned 23,401,472). That is gloo's thread, not the job's memory, and no term the plan
# misses: NCCL reduce-scatters without such a copy, and a GPU's peak is read from its allocator. So on a CPU the
# measurement runs FSDP2's collectives through the two classes below: gloo's own operations, each returning
# only once gloo's thread has let go of its tensors (their storages' use counts back to what they were before).
SETTLE_SECONDS = 60.0  # how long gloo's thread may keep a finished collective's tensors before it is an error


def _use_count(storage: Any) -> int:
    return torch._C._storage_Use_Count(storage._cdata)


def _settled(collective: Any, *tensors: torch.Tensor, **kwargs: Any) -> None:
    """`collective(*tensors, **kwargs)`, synchronous, returning once no other thread holds `tensors`. It is given
    views of them: a storage's use count counts the tensors on it, not the references to one tensor, so a view
    that gloo's thread still holds keeps the count up until it lets go."""
    storages = [t.untyped_storage() for t in tensors]
    held = [_use_count(s) for s in storages]
    views = [t.view_as(t) for t in tensors]
    collective(*views, **kwargs)
    del views
    deadline = time.monotonic() + SETTLE_SECONDS
    while any(_use_count(s) > n for s, n in zip(storages, held, strict=True)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"gloo kept the tensors of a finished {collective.__name__} {SETTLE_SECONDS:.0f} s")
        time.sleep(1e-4)


def settle_collectives(model: Any) -> None:
    """Have the FSDP2 units of `model` (sharded over gloo processes) all-gather and reduce-scatter settled:
    synchronously (as FSDP2 calls them in this job), and gloo's reduce-scatter as gloo runs it, a copy of the
    input all-reduced and this rank's chunk copied out, the copy freed here before returning."""
    import torch.distributed as dist
    from torch.distributed.fsdp import FSDPModule
    from torch.distributed.fsdp._fully_shard._fsdp_collectives import DefaultAllGather, DefaultReduceScatter

    # FSDP2's default communications (their buffers allocated as FSDP2 allocates them), made to wait
    class SettledAllGather(DefaultAllGather):
        def __call__(self, output_tensor, input_tensor, group, async_op=False):
            _settled(dist.all_gather_single, output_tensor, input_tensor, group=group)
            return None

    class SettledReduceScatter(DefaultReduceScatter):
        def __call__(self, output_tensor, input_tensor, group, op, async_op=False):
            copy = input_tensor.clone()
            _settled(dist.all_reduce, copy, op=op, group=group)
            output_tensor.copy_(copy.view(group.size(), -1)[group.rank()])
            return None

    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.set_custom_all_gather(SettledAllGather())
            module.set_custom_reduce_scatter(SettledReduceScatter())
