"""The fine-tuning loop of a verifier (finetune.py's `train`) and its settings, apart from the job around them
(finetune.py: the rows read from parquet, the model saved, its curve written): only torch and transformers,
so the device check (tools/device_check.py, through tools/training_peak.py) runs it on a machine without
the workflow's data packages (polars, pyarrow, snakemake).
"""

from __future__ import annotations

import logging
import math
import random
from dataclasses import dataclass, field

import torch
from tqdm.auto import tqdm

from .distributed import Rank, compute_device, is_sharded, step_share, sum_over_ranks
from .losses import unpackable, verifier_losses
from .training_rows import LM_TARGETS, LR_SCHEDULES, QH_ITEMS, QH_READOUTS, TrainExample, lr_factor

# the fine-tuning job's logger (finetune.py), as before the loop moved here: its log reads as one
log = logging.getLogger("debate_audit.eraudit.verifier.finetune")


@dataclass(frozen=True)
class FinetuneSettings:
    loss_weights: dict = field(default_factory=lambda: {"lm": 1.0, "fc": 2.0, "qh": 2.0})
    epochs: int = 3
    max_steps: int | None = None
    learning_rate: float = 1e-5
    batch_size: int = 1
    grad_accum: int = 8
    max_length: int = 2048
    max_target_tokens: int = 256
    seed: int = 0
    lora: dict = field(default_factory=lambda: {"enabled": False})
    lm_target: str = "argument"  # LM_TARGETS
    warmup_steps: int = 0  # optimizer steps of linear warm-up from 0 (release: 10)
    lr_schedule: str = "constant"  # LR_SCHEDULES, after the warm-up (release: cosine)
    # Recompute each layer's activations in the backward pass instead of keeping them: the same gradients
    # (up to float rounding) for about a third more compute, and activations that no longer grow with
    # layers x sequence length (8B at 8192 tokens keeps tens of GB without it).
    gradient_checkpointing: bool = False
    qh_readout: str = "transcript"  # training_rows.QH_READOUTS: what V_org's L_qh reads (paper: transcript)
    # training_rows.QH_ITEMS: V_org's L_qh on its attacks' pairs (the release's) or on every train pair
    # (verifier.org_training.qh_items)
    qh_items: str = "attacks"
    # Processes of the job (one per GPU, or CPU cores), sharding the model with FSDP2 (distributed.py);
    # cpu_offload: the shards and the optimizer step on the host
    processes: int = 1
    cpu_offload: bool = False

    def __post_init__(self) -> None:
        if self.processes < 1:
            raise ValueError(f"verifier.distributed.processes must be at least 1, got {self.processes}")
        if self.processes > 1 and self.lora.get("enabled"):
            raise ValueError(
                "verifier.distributed.processes above 1 shards a full-parameter model; a LoRA "
                "verifier (verifier.lora.enabled) trains in one process: set its processes to 1"
            )
        if self.lm_target not in LM_TARGETS:
            raise ValueError(f"verifier.lm_target must be one of {list(LM_TARGETS)}, got {self.lm_target!r}")
        if self.lr_schedule not in LR_SCHEDULES:
            raise ValueError(f"verifier.lr_schedule must be one of {list(LR_SCHEDULES)}, got {self.lr_schedule!r}")
        if self.qh_readout not in QH_READOUTS:
            raise ValueError(f"verifier.qh_readout must be one of {list(QH_READOUTS)}, got {self.qh_readout!r}")
        if self.qh_items not in QH_ITEMS:
            raise ValueError(f"verifier.org_training.qh_items must be one of {list(QH_ITEMS)}, got {self.qh_items!r}")
        if self.qh_items == "train" and self.qh_readout != "bare":
            raise ValueError(
                "verifier.org_training.qh_items: train trains L_qh on pairs without a transcript, so it "
                f"needs verifier.qh_readout: bare (got {self.qh_readout!r})"
            )


def train(
    model,
    examples: list[TrainExample],
    settings: FinetuneSettings,
    label_ids: list[int],
    pad_id: int,
    *,
    desc: str = "fine-tuning",
    rank: Rank = Rank(),
) -> list[dict]:
    """The optimisation loop; returns one record per optimizer step (finetune.CURVE_SCHEMA without dataset/variant).
    `rank`: this process's place in a distributed job (distributed.py), whose `model` is sharded already;
    every rank returns the same curve."""
    if settings.gradient_checkpointing:
        # Non-reentrant: works when the inputs need no grad (a frozen embedding under LoRA) and with autocast.
        # (transformers 5 renames this activation_checkpointing_enable; the old name works from 4.35 to 5.x.)
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    params = [p for p in model.parameters() if p.requires_grad]
    # fused: one kernel per parameter over its weight, gradient and moments; on one CPU core 0.085 s a step of
    # the embedded model against 0.33 s for PyTorch's default loop (beside 3.3 s of forward and backward), the
    # same update up to float rounding (7e-7 after 4 steps; benchmarks/bench_finetune_step.py). Also on DTensor
    # shards (distributed.py), on CUDA and on MPS.
    optimizer = torch.optim.AdamW(params, lr=settings.learning_rate, weight_decay=0.0, fused=True)
    per_step = settings.batch_size * settings.grad_accum
    steps_per_epoch = math.ceil(len(examples) / per_step)
    total = steps_per_epoch * settings.epochs
    if settings.max_steps is not None:
        total = min(total, settings.max_steps)
    rng = random.Random(f"finetune:{settings.seed}")
    device = compute_device(model)
    # A sharded model computes in its MixedPrecisionPolicy's dtype (distributed.shard); a LoRA model on a GPU
    # (a bf16 base, fp32 adapters) under bf16 autocast; on a CPU everything in fp32.
    autocast = torch.autocast(
        "cuda" if device.type == "cuda" else "cpu",
        dtype=torch.bfloat16,
        enabled=device.type == "cuda" and not is_sharded(model),
    )
    why = unpackable(model)
    if rank.main:
        log.info(
            "%s: L_lm and L_fc %s",
            desc,
            "from one packed forward pass per micro-batch" if why is None else f"from two forward passes ({why})",
        )
    curve, seen = [], 0
    model.train()
    bar = tqdm(total=total, desc=desc, unit="step", disable=not rank.main)
    step = 0
    for epoch in range(settings.epochs):
        order = list(range(len(examples)))
        rng.shuffle(order)
        for first in range(0, len(order), per_step):
            if step >= total:
                break
            chunk = [examples[i] for i in order[first : first + per_step]]
            micro = [chunk[i : i + settings.batch_size] for i in range(0, len(chunk), settings.batch_size)]
            learning_rate = settings.learning_rate * lr_factor(step, total, settings.warmup_steps, settings.lr_schedule)
            for group in optimizer.param_groups:
                group["lr"] = learning_rate
            sums: dict[str, float] = {}
            for batch, share in step_share(micro, rank):
                with autocast:
                    terms = verifier_losses(
                        model,
                        batch,
                        label_ids,
                        settings.loss_weights,
                        pad_id,
                        lockstep=rank.world > 1,
                        pack=why is None,
                    )
                (terms["total"] * share / len(chunk)).backward()
                for name, value in terms.items() if share else ():
                    sums[name] = sums.get(name, 0.0) + value.item() * share / len(chunk) / rank.world
            sums = sum_over_ranks(sums, rank)
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            step += 1
            seen += len(chunk)
            curve.append(
                {
                    "step": step,
                    "epoch": epoch,
                    "loss": sums["total"],
                    "loss_lm": sums.get("lm"),
                    "loss_fc": sums.get("fc"),
                    "loss_qh": sums.get("qh"),
                    "learning_rate": learning_rate,
                    "items": seen,
                }
            )
            bar.update(1)
            shown = {name: f"{sums[name]:.4f}" if name in sums else "-" for name in ("lm", "fc", "qh")}
            bar.set_postfix(loss=f"{sums['total']:.3f}", fc=shown["fc"])
            log.log(
                logging.INFO if rank.main else logging.DEBUG,
                "step %d/%d epoch %d lr %.3g loss %.4f (lm %s fc %s qh %s)",
                step,
                total,
                epoch,
                learning_rate,
                sums["total"],
                shown["lm"],
                shown["fc"],
                shown["qh"],
            )
    bar.close()
    if settings.gradient_checkpointing:
        model.gradient_checkpointing_disable()
    model.eval()
    return curve
