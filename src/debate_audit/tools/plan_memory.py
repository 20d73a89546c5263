"""GPU memory of a configuration's jobs for `make plan`: a fine-tuning job's processes and its peak per GPU,
term by term (models/memory.py, training_memory_bytes: the figure the job itself checks before loading),
and the weights a scoring or generating job holds."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from debate_audit.eraudit.common import grid
from debate_audit.models.calls import RulePlan
from debate_audit.models.memory import TrainingMemory
from debate_audit.models.size import bytes_per_param, params_b
from debate_audit.models.size import model_config as size_config
from debate_audit.models.spec import ModelSpec

# Memory torch reports for one GPU (GiB): what a fine-tuning job must fit in.
GPU_GIB = {"H100 80 GB": 79.6, "H200": 139.0}
MODELS_DIR = "resources/models"  # prepared models (rules/model_refs.smk, model_dir): their config.json, once there


@dataclass
class FinetuneMemory:
    """GPU memory of one architecture's fine-tuning jobs at their peak, term by term (models/memory.py,
    training_memory_bytes: the figure the job checks before loading; eraudit/verifier/finetune.py)."""

    architecture: str
    params_b: float | None
    lora: bool
    gib: float | None  # per GPU at the peak; None: the model's config.json is not at hand
    terms_gib: dict[str, float] = field(default_factory=dict)  # memory.TrainingMemory.terms(), GiB
    peak_at: str | None = None  # the moment of the peak: head, layer or end (of the backward)
    host_gib: float = 0.0  # per process, on the host: the offloaded shards and optimizer (cpu_offload)
    # one saved checkpoint on a GPU: full weights in the evaluation dtype, or a LoRA adapter (~10-50 MB)
    checkpoint_gib: float | None = None
    adapter: bool = False
    processes: int = 1  # GPUs per job (verifier.distributed.processes)
    cpu_offload: bool = False
    linear_attention: bool = False  # layers that keep a recurrent state (Qwen3.5): kernels of the `gpu` extra


def finetune_memory(config: dict, spec: ModelSpec) -> TrainingMemory | None:
    """memory.training_memory_bytes of `spec`'s fine-tunes as configured (the largest checkpoint: V_org, with
    its L_qh pass), from its prepared config.json or the published one (size.KNOWN_CONFIGS); None where
    neither is at hand."""
    from debate_audit.models.memory import TrainingSetup, training_memory_bytes

    model_config = size_config(spec, Path(MODELS_DIR) / spec.name)
    if model_config is None:
        return None
    settings = {
        **config["verifier"],
        "lora": grid.lora_settings(config["verifier"], spec.name),
        **grid.distributed_settings(config["verifier"], spec.name),
    }
    return training_memory_bytes(model_config, TrainingSetup.of(settings, with_qh=True))


def training_memory(config: dict, specs: dict[str, ModelSpec]) -> list[FinetuneMemory]:
    """Per verifier architecture: the GPU memory of its fine-tuning jobs, full-parameter or LoRA as configured
    (the job itself refuses to start on a GPU that is too small)."""
    from debate_audit.eraudit.verifier.finetune import saves_adapter
    from debate_audit.models.activations import model_shape

    rows = []
    for arch in grid.base_models(config["verifier"]):
        spec = specs.get(arch)
        size = params_b(spec) if spec is not None else None
        lora = grid.uses_lora(config["verifier"], arch)
        shards = grid.distributed_settings(config["verifier"], arch)
        memory = finetune_memory(config, spec) if spec is not None else None
        adapter = saves_adapter(grid.lora_settings(config["verifier"], arch))
        saved = None
        if size is not None:  # finetune.py saves a full checkpoint in the dtype it is evaluated in (on a GPU)
            saved = 0.0 if adapter else size * 1e9 * bytes_per_param(spec, gpu=True) / 2**30
        config_json = size_config(spec, Path(MODELS_DIR) / arch) if spec is not None else None
        linear = config_json is not None and "linear_attention" in model_shape(config_json).layer_kinds
        rows.append(
            FinetuneMemory(
                arch,
                size,
                lora,
                None if memory is None else memory.total / 2**30,
                {} if memory is None else {k: v / 2**30 for k, v in memory.terms().items()},
                None if memory is None else memory.peak_at,
                0.0 if memory is None else memory.host / 2**30,
                saved,
                adapter,
                **shards,
                linear_attention=linear,
            )
        )
    return rows


def job_gpus(
    config: dict, spec: ModelSpec | None, rp: RulePlan, size_b: float | None, *, memory: bool = True
) -> tuple[int, float | None]:
    """GPUs of one job of `rp.rule` with `spec`'s model and the memory each holds: a fine-tuning job's
    processes and memory.training_memory_bytes at its peak (the figure the job checks); a job whose vLLM
    engine generates, its tensor_parallel_size and the bf16 weights over them; else one GPU holding the weights
    in-process. Served models (source openai, generation_backend server) hold nothing here. `memory=False`:
    a fine-tuning job's GPUs alone, without measuring its activations (which imports torch: a workflow's
    start-up sizes its jobs with this and must not)."""
    server_scores = spec is not None and spec.scoring_backend == "server"
    if (
        spec is None
        or spec.source == "openai"
        or (spec.generation_backend == "server" and (not rp.scorings or server_scores))
    ):
        return 0, None
    if rp.rule == "verifier_finetune":
        processes = grid.distributed_settings(config["verifier"], spec.name)["processes"]
        if not memory:
            return processes, None
        needed = finetune_memory(config, spec)
        return processes, None if needed is None else needed.total / 2**30
    engine = spec.generation_backend == "vllm" and (rp.generations or server_scores)
    gpus = spec.vllm.tensor_parallel_size if engine else 1
    gib = None if size_b is None else size_b * 1e9 * bytes_per_param(spec, gpu=True) / gpus / 2**30
    return gpus, gib
