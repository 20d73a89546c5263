"""Fine-tuning one verifier over several processes: torch's FSDP2 (`fully_shard`) shards the weights, their
gradients and AdamW's moments over the processes, one per GPU (NCCL) or, on a CPU, one per core (gloo).

An 8-9B verifier trained with full-parameter AdamW holds 16 bytes per parameter (models/memory.py,
FULL_TRAINING_BYTES): ~128 GB for Llama-3.1-8B, more than one 80 GB GPU. Over N processes each holds 1/N of
that, plus the one decoder layer FSDP gathers at a time. `cpu_offload` keeps the shards and the optimizer
step on the host instead (the release's DeepSpeed ZeRO-3 offloads the optimizer to the CPU), leaving the GPU
only the gathered layers and the activations.

The job is started by `torch.distributed.run` (torchrun), which the rule's own process calls (`launch`): the
workers run `python -m debate_audit.eraudit.verifier.finetune_worker ARGS.json`, the same `finetune_verifier` as a
one-process job. Data parallel: each optimizer step's micro-batches are dealt round-robin to the processes
and the gradient of their sum is the one-process gradient (up to the order of float additions; see
`step_share`), so the loss curve and the checkpoint equal the one-process run's to rounding.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

log = logging.getLogger(__name__)

# The workers' entry point (a module of its own: it imports finetune.py, which imports this one).
WORKER_MODULE = "debate_audit.eraudit.verifier.finetune_worker"


@dataclass(frozen=True)
class Rank:
    """Where this process stands in its job: rank `index` of `world` (world 1: not distributed)."""

    index: int = 0
    world: int = 1

    @property
    def main(self) -> bool:
        return self.index == 0


def in_worker() -> bool:
    """Whether this process is one of a torchrun job's workers."""
    return "TORCHELASTIC_RUN_ID" in os.environ or int(os.environ.get("WORLD_SIZE", "1")) > 1


def start(device: str) -> tuple[Rank, str]:
    """Join the job's process group (NCCL on GPUs, gloo on the CPU); returns this process's rank and its
    device (`cuda:<local rank>` on GPUs: torchrun's LOCAL_RANK among the GPUs the job was given)."""
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1:
        return Rank(), device
    if device.startswith("cuda"):
        local = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    if not dist.is_initialized():
        dist.init_process_group("nccl" if device.startswith("cuda") else "gloo")
    return Rank(dist.get_rank(), dist.get_world_size()), device


def stop() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def shard(model, *, cpu_offload: bool = False):
    """FSDP2 over the job's processes: each decoder layer its own unit (gathered only while it computes),
    then the rest (embeddings, final norm, head). The layer classes are the model's own `_no_split_modules`.
    """
    from torch.distributed.fsdp import CPUOffloadPolicy, OffloadPolicy, fully_shard

    names = set(getattr(model, "_no_split_modules", None) or [])
    layers = [m for m in model.modules() if type(m).__name__ in names]
    if not layers:
        raise ValueError(f"{type(model).__name__}: no decoder layer class (_no_split_modules) to shard by")
    policy = CPUOffloadPolicy() if cpu_offload else OffloadPolicy()
    for layer in layers:
        fully_shard(layer, offload_policy=policy)
    fully_shard(model, offload_policy=policy)
    return model


def step_share(micro: Sequence[Any], rank: Rank) -> list[tuple[Any, int]]:
    """This process's micro-batches of one optimizer step, each with its share: the loss of a batch enters
    the step's gradient as loss x share / (rows of the step).

    Micro-batch i goes to rank i mod world. FSDP averages the gradients over the processes, so a batch's
    share is world x its rows: the sum over ranks, divided by world, is the one-process step's weighted sum
    (and with one process the share is the batch's rows, the one-process loop exactly). Every rank runs the
    same number of forward and backward passes (FSDP gathers and reduces in lockstep); a rank with fewer
    batches repeats its first one with share 0.
    """
    mine = [batch for i, batch in enumerate(micro) if i % rank.world == rank.index]
    share = [(batch, rank.world * len(batch)) for batch in mine]
    turns = -(-len(micro) // rank.world)
    filler = mine[0] if mine else micro[0]
    return share + [(filler, 0)] * (turns - len(share))


def sum_over_ranks(values: Mapping[str, float], rank: Rank) -> dict[str, float]:
    """The step's loss terms summed over the processes (each sent its weighted share): every rank logs the
    one-process figure. A term some rank lacks (no L_lm target in its batches) counts as 0 there; a term no
    rank has stays absent."""
    if rank.world == 1:
        return dict(values)
    import torch.distributed as dist

    names = ["total", "lm", "fc", "qh"]
    present = torch.tensor([float(name in values) for name in names], dtype=torch.float64)
    totals = torch.tensor([values.get(name, 0.0) for name in names], dtype=torch.float64)
    dist.all_reduce(present)
    dist.all_reduce(totals)
    return {name: float(total) for name, total, seen in zip(names, totals, present) if seen > 0}


def full_state_dict(model) -> dict[str, torch.Tensor]:
    """Every weight of the sharded model, whole and on the CPU, on the main rank (the others get an empty
    dict): what `save_pretrained(state_dict=...)` writes. A tied weight (SmolLM2's head is its embedding)
    comes once, under its first name, as the one-process checkpoint has it: the gathered copies no longer
    share storage, so save_pretrained would write both."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    first: dict[int, str] = {}
    tied = set()
    for name, param in model.named_parameters(remove_duplicate=False):
        if first.setdefault(id(param), name) != name:
            tied.add(name)
    return {name: tensor for name, tensor in state.items() if name not in tied}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(processes: int, arguments: Mapping[str, Any]) -> None:
    """Run `finetune_verifier(**arguments)` as a torchrun job of `processes` workers on this node (the GPUs
    the job was given, or CPU cores), and wait for it. The workers' output goes to this process's stderr
    (the rule's log), each line prefixed with its rank; a failed worker fails the job, naming its exit status.
    """
    with tempfile.TemporaryDirectory(prefix="finetune-") as tmp:
        args_file = Path(tmp) / "arguments.json"
        args_file.write_text(json.dumps(arguments, default=str))
        cmd = [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nnodes",
            "1",
            "--nproc-per-node",
            str(processes),
            "--rdzv-backend",
            "c10d",
            "--rdzv-endpoint",
            f"127.0.0.1:{_free_port()}",
            "--tee",
            "3",
            "--role",
            "finetune",
            "-m",
            WORKER_MODULE,
            str(args_file),
        ]
        log.info("fine-tuning over %d processes: %s", processes, " ".join(cmd))
        env = dict(os.environ)
        # torchrun's default, said here: one thread per worker, the workers sharing the cores the job has
        env.setdefault("OMP_NUM_THREADS", str(max(1, len(os.sched_getaffinity(0)) // processes)))
        sys.stdout.flush()
        sys.stderr.flush()
        try:
            out = sys.stderr.fileno()
        except (AttributeError, OSError, ValueError):  # a stream without a file (pytest's capsys): inherit
            out = None
        done = subprocess.run(cmd, env=env, stdout=out, stderr=out)
        if done.returncode != 0:
            raise RuntimeError(
                f"the {processes}-process fine-tuning job failed (torchrun exit status "
                f"{done.returncode}; each worker's traceback is above, prefixed with its rank)"
            )
