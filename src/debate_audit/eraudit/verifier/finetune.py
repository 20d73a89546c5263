"""Fine-tune V_honest / V_adv / V_org from the base model on selected debate transcripts.

V_honest: honest transcripts, L = L_lm + L_fc. V_adv: adversarial transcripts, same objective. V_org:
adversarial transcripts, L = L_lm + L_fc + L_qh (losses.py). Full-parameter AdamW with gradient
accumulation by default; LoRA through peft as an option, saved as the adapter beside its base model
(`lora.save: adapter`, models/adapter.py: a few MB where a merged GPT-20B is ~40 GB) or merged into a plain
safetensors directory (`merged`); LanguageModel loads both. What it trains on comes from training_rows.py:
the items of the train split with a trained selection status, their L_lm targets
(`FinetuneSettings.lm_target`: `argument` or `adjudication`) and two rows per item, one per answer order;
with `qh_items: train`, V_org also trains L_qh alone on the train pairs without an attack (two rows each).

The batch settings count rows (the release's effective batch 8 is 8 rows). The learning rate warms up
linearly from 0 over `warmup_steps` optimizer steps and then stays (`lr_schedule: constant`) or follows a
half cosine to 0 at the last step (`cosine`; training_rows.lr_factor): the release's transformers Trainer
with lr_scheduler_type "cosine" and warmup_steps 10 (ft-verifier-oss-full.py, --warmup default 10).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import random
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import polars as pl
import torch
from tqdm.auto import tqdm

from debate_audit.data.io import write_parquet
from debate_audit.models import write_fingerprint
from debate_audit.models.adapter import save_adapter
from debate_audit.models.loading import ModelRef
from debate_audit.models.memory import (
    GPU_RESERVE_BYTES,
    TrainingSetup,
    check_training_memory,
    training_memory_bytes,
)
from debate_audit.models.prepare import FINGERPRINT_FILE
from debate_audit.models.spec import resolve_device, resolve_dtype
from debate_audit.models.weights import load_pretrained
from debate_audit.runtime.provenance import current_provenance, record_model

from ..common.grid import labelled, unlabelled, with_labels
from ..common.readout import LABELS, resolve_readout
from ..common.verifiers import (
    COPY,
    VARIANTS,  # variant -> transcript mode
)
from ..debate.debates import options_for, transcript_view
from .distributed import (
    Rank,
    compute_device,
    full_state_dict,
    in_worker,
    is_sharded,
    launch,
    shard,
    start,
    step_share,
    stop,
    sum_over_ranks,
)
from .losses import unpackable, verifier_losses
from .training_rows import (
    LM_TARGETS,
    LR_SCHEDULES,
    QH_ITEMS,
    QH_READOUTS,
    TrainExample,
    encode_example,
    encode_qh_only,
    lm_targets,
    lr_factor,
    qh_letters,
    qh_only_items,
    training_items,
)

log = logging.getLogger(__name__)

CURVE_SCHEMA = labelled(
    {
        "dataset": pl.Utf8,
        "variant": pl.Utf8,  # honest / adv / org
        "step": pl.Int32,  # optimizer step, 1-based
        "epoch": pl.Int32,  # 0-based pass over the training rows
        "loss": pl.Float64,  # weighted total, mean over the step's micro-batches
        "loss_lm": pl.Float64,  # L_lm (unweighted); null when no row of the step had an L_lm target
        "loss_fc": pl.Float64,  # L_fc (unweighted); null when the step trained L_qh alone (qh_items: train)
        "loss_qh": pl.Float64,  # L_qh (unweighted); null for honest / adv
        "learning_rate": pl.Float64,  # this step's learning rate (warm-up, lr_schedule)
        "items": pl.Int32,  # training rows seen so far (two per selected transcript)
    }
)


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


def _apply_lora(model, lora: dict):
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as err:
        raise ImportError(
            "verifier.lora.enabled is true but peft is not installed: `pip install peft` "
            "(or the project's [lora] extra)"
        ) from err
    config = LoraConfig(
        r=lora["r"],
        lora_alpha=lora["alpha"],
        lora_dropout=lora["dropout"],
        target_modules=list(lora["target_modules"]),
        task_type="CAUSAL_LM",
    )
    return get_peft_model(model, config)


def saves_adapter(lora: dict) -> bool:
    """Whether a LoRA verifier (`lora`: its settings, `enabled` resolved) is saved as its adapter, not merged."""
    return bool(lora.get("enabled")) and lora.get("save", "adapter") == "adapter"


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
    """The optimisation loop; returns one record per optimizer step (CURVE_SCHEMA without dataset/variant).
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


def save_verifier(
    model,
    tokenizer,
    out_dir: str | Path,
    adapter_of: str | Path | None = None,
    state_dict: dict | None = None,
    **fields,
) -> dict:
    """A plain safetensors directory (or, `adapter_of` a base directory, peft's adapter of that base) with
    tokenizer files; fingerprint.json (the rule output) comes last. `state_dict`: the weights to write in
    place of the model's own (a sharded model's, gathered: distributed.full_state_dict)."""
    out_dir = Path(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)  # no stale shards from an earlier run
    out_dir.mkdir(parents=True)
    if adapter_of is not None:
        save_adapter(model, out_dir, adapter_of)
        fields["checkpoint"] = "lora-adapter"
    else:
        model.save_pretrained(out_dir, safe_serialization=True, state_dict=state_dict)
        fields["checkpoint"] = "full"
    tokenizer.save_pretrained(out_dir)
    return write_fingerprint(out_dir, **fields)


def finetune_verifier(
    selected: str | Path,
    pairs: str | Path,
    split: str | Path,
    base: ModelRef,
    out_dir: str | Path,
    curve_out: str | Path,
    *,
    dataset: str,
    variant: str,
    settings: FinetuneSettings,
    readout: str = "auto",
    labels: dict | None = None,
    adjudications: str | Path | None = None,
) -> dict:
    """Train one verifier from `base` (on its device) and write it to `out_dir` (safetensors, tokenizer,
    fingerprint.json last). Training needs the trainable transformers model, not `open_model`'s.
    `adjudications`: the Parquet of adjudication.py for these transcripts (lm_target adjudication only);
    `labels`: the grid cell (architecture, length, qh_weight) of the checkpoint."""
    from transformers import AutoTokenizer

    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {sorted(VARIANTS)}, got {variant!r}")
    if settings.processes > 1 and not in_worker():
        arguments = dict(
            selected=str(selected),
            pairs=str(pairs),
            split=str(split),
            base=base.to_params(),
            out_dir=str(out_dir),
            curve_out=str(curve_out),
            dataset=dataset,
            variant=variant,
            settings=dataclasses.asdict(settings),
            readout=readout,
            labels=labels,
            adjudications=None if adjudications is None else str(adjudications),
            provenance=current_provenance(),
        )
        launch(settings.processes, arguments)
        record = json.loads((Path(out_dir) / FINGERPRINT_FILE).read_text())
        record_model(base.name, base.directory, base.fingerprint())
        return record
    started = time.time()
    torch.manual_seed(settings.seed)
    out_dir = Path(out_dir)
    base_fingerprint = base.fingerprint()
    record_model(base.name, base.directory, base_fingerprint)
    tokenizer = AutoTokenizer.from_pretrained(base.directory)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    label_ids = [tokenizer(label, add_special_tokens=False)["input_ids"] for label in LABELS]
    if any(len(ids) != 1 for ids in label_ids):
        raise ValueError(f"{base.directory}: answer labels {LABELS} are not single tokens for this tokenizer")
    label_ids = [ids[0] for ids in label_ids]
    items = training_items(selected, pairs, split)
    targets = lm_targets(items, settings.lm_target, adjudications, VARIANTS[variant])
    examples = [
        row
        for r, target in zip(items, targets)
        for row in encode_example(
            tokenizer,
            pair_id=r["pair_id"],
            item=r,
            target=target,
            with_qh=variant == "org",
            transcript=transcript_view(r["q_m"], options_for(r, r["true_position"]), r["arguments"]),
            max_length=settings.max_length,
            max_target_tokens=settings.max_target_tokens,
            readout=readout,
            reply=settings.lm_target == "adjudication",
            qh_order=qh_letters(settings.seed, r["pair_id"]),
            chat_template_kwargs=base.chat_template_kwargs,
            qh_readout=settings.qh_readout,
        )
    ]
    qh_only = qh_only_items(selected, pairs, split) if variant == "org" and settings.qh_items == "train" else []
    examples += [
        row
        for r in qh_only
        for row in encode_qh_only(
            tokenizer, pair_id=r["pair_id"], item=r, readout=readout, chat_template_kwargs=base.chat_template_kwargs
        )
    ]
    log.info(
        "%s/%s: %d training rows (2 per item, %d items, %d without an L_lm target; pairs of L_qh alone: %d) "
        "from %s; weights %s; readout %s; L_lm target %s; learning rate %g, %d warm-up steps, %s",
        dataset,
        variant,
        len(examples),
        len(items),
        sum(t is None for t in targets),
        len(qh_only),
        selected,
        settings.loss_weights,
        resolve_readout(readout, tokenizer),
        settings.lm_target,
        settings.learning_rate,
        settings.warmup_steps,
        settings.lr_schedule,
    )
    lora = bool(settings.lora.get("enabled"))
    device = resolve_device(base.device, base.name)
    # On a GPU a full-parameter fine-tune is always sharded (FSDP2, a group of one included): bf16 compute on
    # fp32 master weights, the memory that memory.training_memory_bytes counts.
    rank, dev = start(device, shard_alone=device.startswith("cuda") and not lora)
    on_gpu = dev.startswith("cuda")
    planned = None
    if on_gpu:
        setup = TrainingSetup.of(dataclasses.asdict(settings), processes=rank.world, with_qh=variant == "org")
        config = json.loads((Path(base.directory) / "config.json").read_text())
        planned = training_memory_bytes(config, setup)
        check_training_memory(
            base.name, planned, torch.cuda.get_device_properties(torch.device(dev)).total_memory, setup
        )
        log.info(
            "%s: planned GPU memory a process %.1f GiB at its peak (%s; GiB: %s)",
            base.name,
            planned.total / 2**30,
            planned.peak_at,
            ", ".join(f"{k} {v / 2**30:.1f}" for k, v in planned.terms().items()),
        )
        torch.cuda.reset_peak_memory_stats()
    dtype = torch.bfloat16 if lora and on_gpu else torch.float32  # FROZEN_BYTES, or fp32 master weights
    model = load_pretrained(base.directory, dtype=dtype)  # MXFP4 experts dequantized, every weight checked
    if lora:
        model = _apply_lora(model.to(dev), settings.lora)
    elif on_gpu or rank.world > 1:
        # from the host, one decoder layer at a time: no GPU ever holds the whole model
        model = shard(model, cpu_offload=settings.cpu_offload, compute_dtype=torch.bfloat16 if on_gpu else None)
    else:
        model = model.to(dev)
    curve: list[dict] = []
    if examples:
        curve = train(model, examples, settings, label_ids, pad_id, desc=f"{dataset}/{variant}", rank=rank)
    else:
        log.warning(
            "%s/%s: no usable training transcripts in %s: the checkpoint is the base model unchanged",
            dataset,
            variant,
            selected,
        )
    if planned is not None:
        log.info(
            "%s/%s: GPU peak %.1f GiB allocated (planned %.1f without the reserve)",
            dataset,
            variant,
            torch.cuda.max_memory_allocated() / 2**30,
            (planned.total - GPU_RESERVE_BYTES) / 2**30,
        )
    # Saved in the dtype the verifier is evaluated in (its base's spec on this device): loading rounds to it
    # anyway, so bf16 on a GPU loses nothing the audit sees and halves the checkpoint (8B: 30 -> 15 GiB).
    saved_dtype = resolve_dtype(base.dtype, dev)
    state_dict = None
    if is_sharded(model):
        state_dict = full_state_dict(model, saved_dtype)
        if not rank.main:
            stop()
            return {}
    adapter_only = saves_adapter(settings.lora)
    if not adapter_only and state_dict is None:
        if lora:
            model = model.merge_and_unload()
        model = model.to(saved_dtype)
    rows = [{"dataset": dataset, "variant": variant, **c} for c in curve]
    frame = with_labels(pl.DataFrame(rows, schema=unlabelled(CURVE_SCHEMA)), labels)
    write_parquet(frame, CURVE_SCHEMA, curve_out)
    record = save_verifier(
        model,
        tokenizer,
        out_dir,
        adapter_of=base.directory if adapter_only else None,
        state_dict=state_dict,
        processes=rank.world,
        name=f"verifier-{dataset}-{variant}",
        dataset=dataset,
        variant=variant,
        **(labels or {}),
        base_weights_sha256=base_fingerprint["weights_sha256"],
        training_items=len(items),
        training_rows=len(examples),
        qh_only_items=len(qh_only),
        steps=len(curve),
    )
    log.info(
        "%s/%s: %d steps in %.1f s, saved to %s (weights sha256 %s)",
        dataset,
        variant,
        len(curve),
        time.time() - started,
        out_dir,
        record["weights_sha256"][:16],
    )
    stop()
    return record


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def copy_verifier(base: ModelRef, out_dir: str | Path, *, architecture: str) -> dict:
    """V_base saved again under another name (the audit's null target `copy`): its files byte for byte, and a
    fingerprint that says it was not trained (0 training rows, 0 steps), so it never passes as a trained one."""
    base_fingerprint = base.fingerprint()
    record_model(base.name, base.directory, base_fingerprint)
    out_dir = Path(out_dir)
    if out_dir.exists():
        shutil.rmtree(out_dir)
    # hard links where the filesystem allows: the same bytes without another copy of the weights on disk
    shutil.copytree(
        base.directory, out_dir, ignore=shutil.ignore_patterns(FINGERPRINT_FILE), copy_function=_link_or_copy
    )
    record = write_fingerprint(
        out_dir,
        name=f"verifier-{COPY.name}",
        variant=COPY.name,
        architecture=architecture,
        length=None,
        qh_weight=None,
        base_weights_sha256=base_fingerprint["weights_sha256"],
        training_items=0,
        training_rows=0,
        steps=0,
        checkpoint=COPY.name,
    )
    if record["weights_sha256"] != base_fingerprint["weights_sha256"]:
        raise RuntimeError(f"{out_dir}: the copy's weights differ from {base.directory}'s")
    log.info(
        "%s: V_base copied to %s (weights sha256 %s, not trained)", architecture, out_dir, record["weights_sha256"][:16]
    )
    return record
