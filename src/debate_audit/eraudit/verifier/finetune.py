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
import os
import shutil
import time
from pathlib import Path

import polars as pl
import torch

from debate_audit.data.io import write_parquet
from debate_audit.models import write_fingerprint
from debate_audit.models.adapter import save_adapter
from debate_audit.models.linear_kernels import linear_attention, warn_if_fallback_on_gpu
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
from debate_audit.runtime.provenance import current_provenance, record_linear_attention, record_model

from ..common.grid import labelled, unlabelled, with_labels
from ..common.readout import LABELS, resolve_readout
from ..common.verifiers import (
    COPY,
    VARIANTS,  # variant -> transcript mode
)
from ..debate.debates import options_for, transcript_view
from .distributed import (
    full_state_dict,
    in_worker,
    is_sharded,
    launch,
    shard,
    start,
    stop,
)
from .training_loop import FinetuneSettings, train
from .training_rows import (
    encode_example,
    encode_qh_only,
    lm_targets,
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
        # read before save_pretrained, which empties the dict it is given
        dtypes = {t.dtype for t in (state_dict or {}).values() if t.is_floating_point()}
        model.save_pretrained(out_dir, safe_serialization=True, state_dict=state_dict)
        if len(dtypes) == 1:
            # save_pretrained's config names the model's own dtype, a sharded model's fp32 master weights, not
            # the gathered ones it wrote (bf16 on a GPU): said as a one-process checkpoint says it, for a load
            # that takes the dtype from the config (transformers' default "auto", vLLM's --dtype auto)
            model.config.dtype = str(dtypes.pop()).removeprefix("torch.")
            model.config.save_pretrained(out_dir)
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
        if record.get("linear_attention"):  # what the workers' Qwen3.5 layers ran
            record_linear_attention(base.directory, record["linear_attention"])
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
    # Qwen3.5: the `gpu` extra's kernels or transformers' torch fallback train it (other numbers, other speed);
    # recorded in the provenance and the checkpoint's fingerprint. None (nothing recorded) for other models.
    ran = linear_attention(json.loads((Path(base.directory) / "config.json").read_text()), dev)
    warn_if_fallback_on_gpu(base.name, dev, ran)
    if ran is not None:
        record_linear_attention(base.directory, ran.record())
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
        **({} if ran is None else {"linear_attention": ran.record()}),
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
