"""Memory a model-bound job needs, planned before it runs: host memory (every job's `mem_mb`, rules/common.smk)
and GPU memory of a fine-tuning job (`make plan` and the job's own check before loading: one function each,
so the plan and the check cannot disagree)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from pathlib import Path

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


def model_params(spec: ModelSpec, directory: str | Path | None) -> float:
    """Parameters of a model: exact once prepared in `directory`, else the size its id or name states."""
    size = params_b(spec, directory)
    return UNKNOWN_MODEL_PARAMS if size is None else size * 1e9


def host_mem_mb(
    models: Iterable[tuple[ModelSpec, str | Path | None]], *, training: bool = False, scores: bool = True
) -> int:
    """mem_mb of a job using `models` (spec, prepared directory; one entry per distinct model); served models
    hold no weights. A job that only generates (`scores=False`), or whose model's server scores too
    (`scoring_backend: server`), loads no weights in-process when a generation backend serves the model; a vLLM engine the job starts holds a copy of them (and, on a CPU, its key/value
    cache)."""
    weights_mb = engine_mb = 0.0
    for spec, directory in models:
        if spec.source == "openai":
            continue
        # "auto" counts as on the CPU (float32), the larger of its two dtypes
        mb = model_params(spec, directory) * bytes_per_param(spec, gpu=False) / 1e6
        # scores in-process unless its server scores too (scoring_backend server)
        if (scores and spec.scoring_backend == "local") or spec.generation_backend == "local":
            weights_mb += mb
        if spec.generation_backend == "vllm":
            engine_mb += VLLM_ENGINE_MB + mb + 1024 * spec.vllm.cpu_kvcache_gb * (not spec.device.startswith("cuda"))
    headroom = TRAINING_HEADROOM if training else INFERENCE_HEADROOM
    return JOB_BASE_MB + math.ceil(headroom * weights_mb + engine_mb)


# ---------------------------------------------------------------------------------------- GPU memory
# GPU bytes per parameter before activations: full training keeps fp32 master weights (bf16 autocast),
# their fp32 gradients and AdamW's two fp32 moments; LoRA on a GPU keeps the frozen base in bf16 (the
# matrix products run in bf16 under autocast either way) and fp32 adapters, well under 1% of the parameters.
FULL_TRAINING_BYTES = 16
FROZEN_BYTES = 2
OFFLOAD_BYTES = 4


def training_memory_bytes(params: float, lora: bool, processes: int = 1, cpu_offload: bool = False) -> float:
    """Memory one GPU of a fine-tuning job holds before activations: FROZEN_BYTES per parameter under LoRA
    (one process); FULL_TRAINING_BYTES per parameter over `processes` FSDP shards; with `cpu_offload` the
    shards stay on the host and a GPU holds the bf16 or fp32 layer it computes and its gradient, counted as
    OFFLOAD_BYTES per parameter over the shards (DeepSpeed's ZeRO-3 figure with the optimizer offloaded)."""
    if lora:
        return params * FROZEN_BYTES
    return params * (OFFLOAD_BYTES if cpu_offload else FULL_TRAINING_BYTES) / processes


def check_training_memory(
    name: str, params: float, lora: bool, available_bytes: int, *, processes: int = 1, cpu_offload: bool = False
) -> None:
    """Fail before loading when the weights, gradients and optimizer state alone exceed the GPU: a clear
    error naming the setting to change instead of a CUDA out-of-memory error minutes into the job."""
    need = training_memory_bytes(params, lora, processes, cpu_offload)
    if need <= available_bytes:
        return
    how = (
        f"LoRA training keeps the {params / 1e9:.2f}B frozen bf16 base weights ({FROZEN_BYTES} bytes each)"
        if lora
        else f"full-parameter AdamW training keeps {FULL_TRAINING_BYTES} bytes per parameter (fp32 weights, "
        f"gradients, two moments) for {params / 1e9:.2f}B parameters, over {processes} process(es)"
        + (" with the shards offloaded to the host" if cpu_offload else "")
    )
    fix = (
        "use a GPU with more memory (LoRA trains on one GPU)"
        if lora
        else f"spread it over more GPUs (verifier.distributed.processes for {name!r}), keep the shards on the host "
        "(verifier.distributed.cpu_offload), or use GPUs with more memory"
    )
    raise MemoryError(
        f"fine-tuning {name}: {how}: at least {need / 2**30:.0f} GiB before activations, and "
        f"this GPU has {available_bytes / 2**30:.0f} GiB; {fix}. `make plan` lists this for "
        "every architecture before a run."
    )
