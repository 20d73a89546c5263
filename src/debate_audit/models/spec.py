"""Model specifications as written in the config (`models:` section)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

Source = Literal["hf", "gguf-package", "local", "openai", "random"]
GenerationBackendKind = Literal["local", "vllm", "server"]


@dataclass(frozen=True)
class ModelSpec:
    name: str
    source: Source
    # hub id (hf), package name (gguf-package), model name (openai) or transformers model type (random)
    id: str | None = None
    path: str | None = None  # local directory (local)
    revision: str | None = None
    gguf_file: str | None = None
    dtype: str = "auto"  # auto: float32 on CPU, bfloat16 on CUDA
    device: str = "auto"
    batch_size: int | str = 8  # or "auto" (GPU: probed scoring batch)
    base_url: str | None = None  # openai / generation_backend server: an OpenAI-compatible server (vLLM)
    api_key_env: str | None = None  # name of the environment variable holding the server's key
    # Who computes uncached generate calls of a local model: in-process transformers, in-process vLLM, or
    # the server at base_url. Scoring (choice_logprobs) always runs in-process.
    generation_backend: GenerationBackendKind = "local"
    # source random: a tiny randomly initialised model of architecture `id` (a transformers model type such
    # as llama or qwen2) that borrows the tokenizer of the prepared model `tokenizer`; `init` overrides
    # its small default shape. For rehearsing a configuration's wiring offline; its outputs mean nothing.
    tokenizer: str | None = None
    init: dict[str, Any] | None = None
    # Switches of the model's own chat template, passed to it wherever the model's prompts are rendered
    # (models/chat.py): Qwen3 / Qwen3.5 {enable_thinking: false} (no reasoning block before the answer),
    # GPT-OSS {reasoning_effort: low|medium|high}. They change the prompts, so the model's numbers.
    chat_template_kwargs: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, name: str, entry: dict[str, Any]) -> ModelSpec:
        known = {f for f in cls.__dataclass_fields__ if f not in ("name", "extra")}
        unknown = set(entry) - known
        if unknown:
            raise ValueError(f"models.{name}: unknown key(s) {sorted(unknown)}; allowed: {sorted(known)}")
        spec = cls(name=name, **entry)
        required = {"hf": "id", "gguf-package": "id", "local": "path", "openai": "id", "random": "id"}[spec.source]
        if getattr(spec, required) is None:
            raise ValueError(f"models.{name}: source {spec.source!r} needs the key {required!r}")
        if spec.source == "gguf-package" and spec.gguf_file is None:
            raise ValueError(f"models.{name}: source 'gguf-package' needs the key 'gguf_file'")
        if spec.source == "random" and spec.tokenizer is None:
            raise ValueError(f"models.{name}: source 'random' needs the key 'tokenizer' (a model from models:)")
        if spec.source != "random" and (spec.tokenizer is not None or spec.init is not None):
            raise ValueError(f"models.{name}: 'tokenizer' and 'init' apply to source 'random' only")
        if spec.generation_backend not in ("local", "vllm", "server"):
            raise ValueError(f"models.{name}: generation_backend must be local, vllm or server, "
                             f"not {spec.generation_backend!r}")
        if spec.generation_backend == "server" and not spec.base_url:
            raise ValueError(f"models.{name}: generation_backend 'server' needs the key 'base_url'")
        if spec.source == "openai" and spec.chat_template_kwargs:
            raise ValueError(f"models.{name}: source 'openai' is rendered by its server; 'chat_template_kwargs' "
                             "applies to models with a local chat template")
        if spec.source == "openai" and spec.generation_backend != "local":
            raise ValueError(f"models.{name}: source 'openai' is served already; drop generation_backend")
        return spec


def resolve_device(device: str) -> str:
    import torch

    if device != "auto":
        return device
    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_dtype(dtype: str, device: str):
    import torch

    if dtype == "auto":
        # bf16 matmul on these CPUs is ~100x slower than fp32.
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
