"""Memory a model-bound job needs, planned before it runs: host memory (every job's `mem_mb`, rules/job_sizes.smk;
a fine-tune's from what its processes hold) and the GPU memory of a fine-tuning job, term by term (`make plan`
and the job's own check before loading: one function each, so the plan and the check cannot disagree;
tests/test_training_memory.py holds the GPU figure against the measured peak of tiny fine-tunes)."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .activations import ModelShape, Profile, activation_profile, model_shape
from .size import bytes_per_param, params_b
from .spec import ModelSpec

# ---------------------------------------------------------------------------------------- host memory
# A model-bound job holds its models' weights in host memory (loading, or running on the CPU), so its
# mem_mb is: JOB_BASE_MB + headroom x (parameters x bytes per parameter of the spec's dtype), summed over
# the distinct models it loads. Parameters are counted exactly from the prepared model's safetensors
# headers, or from its config.json as AutoModelForCausalLM loads it where the headers are not that (quantized
# or multimodal checkpoints: size.prepared_params); before the model is prepared (a dry run) they come from
# size.py's table or the size in the model's id or name ("...-14B-...", "...-135m"), else
# UNKNOWN_MODEL_PARAMS. Snakemake evaluates resources again when a job is about to start, so every submitted
# job gets the exact figure. Fine-tuned verifiers have their base model's parameters. Measured
# (benchmarks/rules, SmolLM2-135M in float32, 0.54 GB of weights): inference peaks at 1.1-1.2 GB,
# fine-tuning at 3.0 GB; the formula gives 2.8 GB and 4.2 GB.
JOB_BASE_MB = 2000  # interpreter, torch, tokenizer, data, activations
INFERENCE_HEADROOM = 1.5
TRAINING_HEADROOM = 4.0  # weights, gradients and two AdamW moments in the same dtype
UNKNOWN_MODEL_PARAMS = 8e9
VLLM_ENGINE_MB = 3000  # a vLLM engine's processes besides weights and key/value cache
# bytes a parameter (or an activation) of fine-tuning on a GPU
COMPUTE_BYTES = 2  # bf16: the gathered weights, their gradients, the activations
MASTER_BYTES = 4  # fp32: the sharded weights, gradients, moments; the gradient reduction
FULL_TRAINING_BYTES = 16  # fp32 weights + gradients + two AdamW moments
FROZEN_BYTES = 2  # a LoRA base in bf16
GPU_RESERVE_BYTES = 2 * 2**30  # the CUDA context, NCCL's buffers, the allocator's fragmentation


def model_params(spec: ModelSpec, directory: str | Path | None) -> float:
    """Parameters of a model: exact once prepared in `directory`, else the size its id or name states."""
    size = params_b(spec, directory)
    return UNKNOWN_MODEL_PARAMS if size is None else size * 1e9


def host_mem_mb(
    models: Iterable[tuple[ModelSpec, str | Path | None]],
    *,
    training: bool = False,
    scores: bool = True,
    generates: bool = True,
) -> int:
    """mem_mb of a job using `models` (spec, prepared directory; one entry per distinct model); served models
    hold no weights. A job that only generates (`scores=False`), or whose model's server scores too
    (`scoring_backend: server`), loads no weights in-process when a generation backend serves the model; a
    vLLM engine the job starts holds a copy of them (and, on a CPU, its key/value cache). A job that only
    scores (`generates=False`: selection, GCG, evaluation, the audits' scoring) starts no engine, so it is
    charged none, whatever the model's generation_backend."""
    weights_mb = engine_mb = 0.0
    for spec, directory in models:
        if spec.source == "openai":
            continue
        # "auto" counts as on the CPU (float32), the larger of its two dtypes
        mb = model_params(spec, directory) * bytes_per_param(spec, gpu=False) / 1e6
        # scores in-process unless its server scores too (scoring_backend server)
        if (scores and spec.scoring_backend == "local") or (generates and spec.generation_backend == "local"):
            weights_mb += mb
        if generates and spec.generation_backend == "vllm":
            engine_mb += VLLM_ENGINE_MB + mb + 1024 * spec.vllm.cpu_kvcache_gb * (not spec.device.startswith("cuda"))
    headroom = TRAINING_HEADROOM if training else INFERENCE_HEADROOM
    return JOB_BASE_MB + math.ceil(headroom * weights_mb + engine_mb)


def finetune_host_mb(
    spec: ModelSpec, directory: str | Path | None, *, lora: bool, processes: int, cpu_offload: bool
) -> int:
    """mem_mb of one verifier_finetune job (eraudit/verifier/finetune.py), from what its processes hold.

    On a GPU (spec device cuda), no vLLM engine: LoRA loads the bf16 base (then moves it to the GPU); a
    full-parameter job's processes each load the whole model in fp32 and shard it (the offloaded shards
    appearing beside it), then with cpu_offload keep the fp32 shards, gradients and AdamW moments on the host
    (16 bytes a parameter over all processes), and at the end the main process gathers the fp32 weights
    there to save them. On a CPU, as before: each process the training headroom over its weights (no engine
    either: a fine-tune generates nothing)."""
    if not spec.device.startswith("cuda"):
        return processes * host_mem_mb([(spec, directory)], training=not lora, generates=False)
    params = model_params(spec, directory)
    if lora:
        return JOB_BASE_MB + math.ceil(INFERENCE_HEADROOM * params * FROZEN_BYTES / 1e6)
    offload = int(cpu_offload)
    loading = processes * MASTER_BYTES * params + offload * MASTER_BYTES * params
    saving = offload * FULL_TRAINING_BYTES * params + MASTER_BYTES * params
    return processes * JOB_BASE_MB + math.ceil(max(loading, saving) / 1e6)


# ---------------------------------------------------------------------------------------- GPU memory
# One process of a fine-tuning job on a GPU, at its peak (eraudit/verifier/distributed.py). Full-parameter:
# FSDP2 over N processes (N = 1 included), MixedPrecisionPolicy bf16 parameters / fp32 reduction. LoRA: one
# process, the frozen base in bf16 under autocast. Every term below is bytes on one GPU:
#
#   shards       fp32 weights, their fp32 gradients and AdamW's two fp32 moments: 16 P / N (on the host with
#                cpu_offload: then 0 here, `host` there)
#   root         the root unit (embeddings, final norm, head: R parameters) gathered in bf16 for the whole
#                forward and backward (FSDP2 does not reshard the root after forward), and its bf16 gradients
#                (the head's from the backward's start, the embeddings' once an earlier pass is through)
#   layers       decoder layers gathered in bf16: the one computing and the one prefetched (2 x largest layer)
#   layer grads  the computing layer's bf16 gradients, and the fp32 reduce-scatter buffers of the layer before
#                it (one in flight: the whole layer in, its shard out)
#   activations  models/activations.py, measured per layer kind on fake tensors at max_length x batch_size:
#                every pass of a micro-batch keeps its saved tensors until the one backward of their sum
#                (losses.py: L_lm + L_fc packed in one pass where every layer attends fully, else apart, and
#                L_qh), each pass the checkpointed layers' inputs (gradient_checkpointing) or every layer's
#                saved tensors
#   at head      on top at the backward's start: the head's logits and their fp32 loss and gradient
#   at layer     on top in a layer's backward: its (recomputed) activations and their gradients
#   masks        with gradient checkpointing, the attention masks of every pass, batch x s x s (eager
#                attention: one per attention kind, in bf16; SDPA: one, boolean, where a pass has one)
#   reserve      what torch's allocator does not count: the CUDA context, NCCL's buffers, fragmentation
#
# The peak is the largest of three moments (TrainingMemory.moments): the backward's start (everything but the
# layers' terms and `at layer`), a layer's backward (everything but `at head`), and the end of the backward,
# when the root's gradients are reduced (an fp32 copy) and the activations are gone. Measured against tiny
# fine-tunes on the CPU (tests/test_training_memory.py), the figure is 2-9% above the peak: on a CPU only the
# next layer's all-gather buffer is alive at the peak (two gathered layers are counted, as a GPU's streams
# overlap them), and a layer's gradients and its reduce-scatter buffers are counted together where they
# follow one another.


@dataclass(frozen=True)
class TrainingMemory:
    """Bytes of one process of a fine-tuning job (memory.training_memory_bytes): on its GPU, term by term
    (see the table above), and on the host (`host`: the offloaded shards and optimizer, per process).

    The peak is the largest of three moments: the backward's start at the head (the logits' fp32 loss and its
    gradient over every pass's kept activations), a decoder layer's backward (two layers gathered, one's
    gradients and its activations' temporaries over what is kept), and the end of the backward (the root's
    gradients reduced, the activations gone)."""

    shards: float
    root: float
    layers: float
    layer_grads: float
    activations: float  # what the passes keep until their backward
    at_head: float  # the head's and its loss's tensors on top of `activations`, at the backward's start
    at_layer: float  # one layer's (recomputed) activations and temporaries on top, in its backward
    masks: float
    reserve: float
    end_of_backward: float  # the third moment, whole
    host: float = 0.0

    TERMS = ("shards", "root", "layers", "layer_grads", "activations", "at_head", "at_layer", "masks", "reserve")

    @property
    def moments(self) -> dict[str, float]:
        common = self.shards + self.root + self.activations + self.masks + self.reserve
        return {
            "head": common + self.at_head,
            "layer": common + self.layers + self.layer_grads + self.at_layer,
            "end": self.end_of_backward,
        }

    @property
    def total(self) -> float:
        """The peak on the GPU."""
        return max(self.moments.values())

    @property
    def peak_at(self) -> str:
        moments = self.moments
        return max(moments, key=moments.__getitem__)

    def terms(self) -> dict[str, float]:
        return {name: getattr(self, name) for name in self.TERMS}


@dataclass(frozen=True)
class TrainingSetup:
    """What a fine-tune's GPU memory depends on besides the model (FinetuneSettings' fields)."""

    lora: bool = False
    processes: int = 1
    cpu_offload: bool = False
    gradient_checkpointing: bool = False
    max_length: int = 2048
    max_target_tokens: int = 256
    batch_size: int = 1
    grad_accum: int = 1
    with_qh: bool = True  # V_org's L_qh pass (its other checkpoints train without it; the plan is for the largest)

    @classmethod
    def of(cls, settings: Mapping[str, Any], *, processes: int | None = None, with_qh: bool = True) -> TrainingSetup:
        """From a fine-tune's settings (FinetuneSettings as a dict, or config `verifier` with an
        architecture's `lora` and `distributed` settings resolved: rules/stage_inputs.smk finetune_settings)."""
        lora = settings.get("lora", False)
        return cls(
            lora=bool(lora.get("enabled")) if isinstance(lora, Mapping) else bool(lora),
            processes=int(processes if processes is not None else settings.get("processes", 1)),
            cpu_offload=bool(settings.get("cpu_offload", False)),
            gradient_checkpointing=bool(settings["gradient_checkpointing"]),
            max_length=int(settings["max_length"]),
            max_target_tokens=int(settings["max_target_tokens"]),
            batch_size=int(settings["batch_size"]),
            grad_accum=int(settings["grad_accum"]),
            with_qh=with_qh,
        )


def passes(shape: ModelShape, setup: TrainingSetup) -> list[bool]:
    """The forward passes of one micro-batch whose activations are all alive when its backward starts
    (losses.verifier_losses), each True where its layers are given a mask: L_lm and L_fc packed into one pass
    with a custom mask where every layer attends fully, else apart; then L_qh (V_org). Rows of a batch are
    left-padded, so with more than one row every pass has a mask."""
    padded = setup.batch_size > 1
    lm_fc = [True] if shape.full_attention_only else [padded, padded]
    return lm_fc + ([padded] if setup.with_qh else [])


def activation_bytes(shape: ModelShape, profile: Profile, setup: TrainingSetup) -> dict[str, float]:
    """The activations of one micro-batch (see the table above): `kept` by its passes until their backward,
    the transients `at_head` and `at_layer` on top of them, and the `masks`."""
    s, rows = setup.max_length, setup.batch_size
    kept, at_layer = 0.0, 0.0
    for has_mask in passes(shape, setup):
        kinds = [(profile.masked if has_mask else profile.layers)[k] for k in shape.layer_kinds]
        if setup.gradient_checkpointing:
            # each checkpointed layer keeps its input, the hidden states in bf16; the backward recomputes a
            # layer's forward and runs its backward, one layer at a time
            kept += shape.layers * s * shape.hidden * COMPUTE_BYTES
            at_layer = max(at_layer, max(a.peak for a in kinds))
        else:
            kept += sum(a.saved for a in kinds)
            at_layer = max(at_layer, max(a.peak - a.saved for a in kinds))
        kept += profile.norm.saved
    # L_lm's pass reads max_target_tokens + 1 positions' logits; the backward starts with them and the norm
    at_head = max(profile.head.peak, profile.head.saved + profile.norm.peak - profile.norm.saved)
    # The masks a pass makes are inputs of its checkpointed layers, kept with them until its backward; without
    # checkpointing nothing keeps them past the forward (SDPA keeps the additive mask it makes of a boolean
    # one: in the layers' `masked` activations).
    if not setup.gradient_checkpointing:
        masks = 0
    elif shape.eager_attention:  # one additive mask per attention kind, in bf16, for every pass
        per_pass = COMPUTE_BYTES * len(set(shape.layer_kinds) - {"linear_attention"})
        masks = len(passes(shape, setup)) * rows * s * s * per_pass
    else:  # one boolean mask for every pass given one
        masks = sum(passes(shape, setup)) * rows * s * s
    return {"kept": rows * kept, "at_head": rows * at_head, "at_layer": rows * at_layer, "masks": masks}


def training_memory_bytes(config: dict, setup: TrainingSetup) -> TrainingMemory:
    """The GPU memory of one process of a fine-tune of the model `config` (its config.json) describes: the
    one figure `make plan` prints and the job checks before loading (check_training_memory)."""
    shape = model_shape(config)
    import torch

    profile = activation_profile(config, torch.bfloat16, setup.max_length, setup.max_target_tokens + 1)
    act = activation_bytes(shape, profile, setup)
    if setup.lora:
        # the frozen base in bf16, adapters (<1% of the parameters) and autocast's copies of them uncounted
        return TrainingMemory(
            shards=shape.params * FROZEN_BYTES,
            root=0.0,
            layers=0.0,
            layer_grads=0.0,
            activations=act["kept"],
            at_head=act["at_head"],
            at_layer=act["at_layer"],
            masks=act["masks"],
            reserve=GPU_RESERVE_BYTES,
            end_of_backward=0.0,
        )
    n = setup.processes
    shards = shape.params * FULL_TRAINING_BYTES / n
    # The sharded fp32 gradients exist through a backward once an earlier micro-batch of the step made them
    # (each process runs ceil(grad_accum / N) of the step's micro-batches: distributed.step_share); in a
    # step's first backward they appear layer by layer, after the activations' peak.
    accumulating = -(-setup.grad_accum // n) > 1
    during_backward = shape.params * (FULL_TRAINING_BYTES - (0 if accumulating else MASTER_BYTES)) / n
    # The head's gradient from the start of the backward; the embeddings' too where an earlier pass of the
    # micro-batch was backpropagated first (or the head is the embedding).
    grads = shape.root_params
    if len(passes(shape, setup)) == 1 and not shape.tied:
        grads -= shape.embedding_params
    root = (shape.root_params + grads) * COMPUTE_BYTES
    layers = 2 * shape.layer_params * COMPUTE_BYTES
    layer_grads = shape.layer_params * (COMPUTE_BYTES + MASTER_BYTES + MASTER_BYTES / n)
    on_gpu = 0.0 if setup.cpu_offload else during_backward
    end = (0.0 if setup.cpu_offload else shards) + shape.root_params * (2 * COMPUTE_BYTES + MASTER_BYTES)
    end += GPU_RESERVE_BYTES
    return TrainingMemory(
        shards=on_gpu,
        root=root,
        layers=layers,
        layer_grads=layer_grads,
        activations=act["kept"],
        at_head=act["at_head"],
        at_layer=act["at_layer"],
        masks=act["masks"],
        reserve=GPU_RESERVE_BYTES,
        end_of_backward=end,
        host=shards if setup.cpu_offload else 0.0,
    )


def check_training_memory(name: str, memory: TrainingMemory, available_bytes: int, setup: TrainingSetup) -> None:
    """Fail before loading when one process of the fine-tune cannot fit its GPU: a clear error naming the
    terms and the settings to change, instead of a CUDA out-of-memory error minutes into the job."""
    if memory.total <= available_bytes:
        return
    terms = ", ".join(f"{k.replace('_', ' ')} {v / 2**30:.1f}" for k, v in memory.terms().items() if v)
    if setup.lora:
        fix = "use a GPU with more memory (LoRA trains on one GPU), or a shorter verifier.max_length"
    else:
        fix = (
            f"spread it over more GPUs (verifier.distributed.processes for {name!r}), keep the shards on the host "
            "(verifier.distributed.cpu_offload), turn on verifier.gradient_checkpointing, shorten "
            "verifier.max_length, or use GPUs with more memory"
        )
    how = "LoRA on a bf16 base" if setup.lora else f"full-parameter over {setup.processes} process(es)"
    raise MemoryError(
        f"fine-tuning {name} ({how}, max_length {setup.max_length}, batch {setup.batch_size}, gradient "
        f"checkpointing {'on' if setup.gradient_checkpointing else 'off'}"
        + (", shards on the host" if setup.cpu_offload else "")
        + f"): {memory.total / 2**30:.0f} GiB a GPU at the peak (GiB: {terms}), and this GPU has "
        f"{available_bytes / 2**30:.0f} GiB; {fix}. `make plan` lists this for every architecture before a run."
    )
