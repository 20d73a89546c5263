"""Fine-tuning one verifier with torch's FSDP2 (`fully_shard`): the weights, their gradients and AdamW's moments
sharded over the job's processes, one per GPU (NCCL) or, on a CPU, one per core (gloo).

On a GPU every full-parameter fine-tune runs this way, one process included: fp32 master weights in the shards,
each decoder layer gathered in bf16 only while it computes, gradients reduced in fp32 (FSDP2's
MixedPrecisionPolicy: bf16 parameters, fp32 reduction; no outer autocast, whose bf16 copies of the weights
would sit beside the fp32 ones). An 8-9B verifier holds 16 bytes per parameter in its shards (models/memory.py):
~128 GB for Llama-3.1-8B, more than one 80 GB GPU; over N processes each holds 1/N of that, plus what the
memory function counts (the root unit, the gathered layers, the activations). `cpu_offload` keeps the shards
and the optimizer step on the host instead (the release's DeepSpeed ZeRO-3 offloads the optimizer to the CPU),
leaving the GPU the gathered layers and the activations. On a CPU the weights compute in fp32 as stored.

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

from debate_audit.runtime.threads import THREAD_VARIABLES, worker_threads

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


def backend(device: str) -> str:
    """The process group's backends: on GPUs NCCL for CUDA tensors and gloo for the CPU tensors a job also
    reduces (the loss terms of `sum_over_ranks`; with `cpu_offload`, the gradient norm of the host shards)."""
    return "cuda:nccl,cpu:gloo" if device.startswith("cuda") else "gloo"


def start(device: str, *, shard_alone: bool = False) -> tuple[Rank, str]:
    """Join the job's process group; returns this process's rank and its device (`cuda:<local rank>` on GPUs:
    torchrun's LOCAL_RANK among the GPUs the job was given). A one-process job joins none, unless
    `shard_alone` (a full-parameter fine-tune on a GPU, which FSDP2 shards over a group of one)."""
    import torch.distributed as dist

    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world == 1 and not shard_alone:
        return Rank(), device
    if device.startswith("cuda") and world > 1:
        local = int(os.environ["LOCAL_RANK"])
        torch.cuda.set_device(local)
        device = f"cuda:{local}"
    elif device.startswith("cuda"):
        index = torch.device(device).index
        index = torch.cuda.current_device() if index is None else index
        torch.cuda.set_device(index)
        device = f"cuda:{index}"
    if not dist.is_initialized():
        if world == 1:  # no torchrun: a group of one in this process
            dist.init_process_group(backend(device), store=dist.HashStore(), rank=0, world_size=1)
        else:
            dist.init_process_group(backend(device))
    return Rank(dist.get_rank(), dist.get_world_size()), device


def stop() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def decoder_layers(model) -> list:
    """The model's decoder layers: the modules of its own `_no_split_modules` classes."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    return [m for m in model.modules() if type(m).__name__ in names]


def shard(model, *, cpu_offload: bool = False, compute_dtype: torch.dtype | None = None):
    """FSDP2 over the job's processes: each decoder layer its own unit (gathered only while it computes),
    then the root unit, the rest (embeddings, final norm, head), which stays gathered from its forward to its
    backward. `compute_dtype` (bf16 on a GPU): the dtype the gathered weights compute in, gradients reduced
    in fp32 into the fp32 shards; None: as stored."""
    from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy, OffloadPolicy, fully_shard

    layers = decoder_layers(model)
    if not layers:
        raise ValueError(f"{type(model).__name__}: no decoder layer class (_no_split_modules) to shard by")
    # Pinned host memory speeds the shards' copies to the GPU, but pinning needs an accelerator: without one
    # `pin_memory()` raises ("Cannot access accelerator device when none is available"), so a CPU job (the
    # rehearsal of the paper's offloaded gpt-oss-20b) keeps its shards in ordinary memory.
    pinned = torch.accelerator.is_available()
    policy = CPUOffloadPolicy(pin_memory=pinned) if cpu_offload else OffloadPolicy()
    precision = MixedPrecisionPolicy(
        param_dtype=compute_dtype, reduce_dtype=torch.float32 if compute_dtype is not None else None
    )
    for layer in layers:
        fully_shard(layer, offload_policy=policy, mp_policy=precision)
    fully_shard(model, offload_policy=policy, mp_policy=precision)
    return model


def is_sharded(model) -> bool:
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def compute_device(model) -> torch.device:
    """Where `model` computes: its parameters' device, or, sharded, the device of its process group's mesh
    (with cpu_offload the shards sit on the host while every layer computes on the GPU)."""
    from torch.distributed.tensor import DTensor

    param = next(model.parameters())
    if isinstance(param, DTensor) and param.device_mesh.device_type == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return param.device


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


def full_state_dict(model, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """Every weight of the sharded model, whole and on the CPU, on the main rank (the others get an empty
    dict), in `dtype` (None: as stored): what `save_pretrained(state_dict=...)` writes. Each weight is cast as
    it arrives, so the host holds the gathered fp32 model at most once. A tied weight (SmolLM2's head is its
    embedding) comes once, under its first name, as the one-process checkpoint has it: the gathered copies no
    longer share storage, so save_pretrained would write both."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
    first: dict[int, str] = {}
    tied = set()
    for name, param in model.named_parameters(remove_duplicate=False):
        if first.setdefault(id(param), name) != name:
            tied.add(name)
    for name in list(state):
        tensor = state.pop(name)
        if name not in tied:
            state[name] = tensor if dtype is None else tensor.to(dtype)
    return state


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
        # In a SLURM step sized for the job (runtime/threads.py), its cores shared among the workers: the
        # offloaded optimizer steps run on them. Elsewhere they keep what Snakemake set (its `threads`).
        share = worker_threads(processes)
        if share is not None:
            env.update(dict.fromkeys(THREAD_VARIABLES, str(share)))
            log.info("each worker computes with %d threads on the host", share)
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
