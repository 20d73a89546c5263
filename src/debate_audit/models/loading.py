"""Load a prepared model for inference the way its spec says: in-process, with a generation backend, or
as a remote chat model."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .prepare import read_fingerprint
from .serving import OpenAIChatModel, OpenAICompatibleBackend, VLLMBackend


def load_model(model_dir: str | Path, spec: Mapping[str, Any], cache: str | Path | None) -> Any:
    """A `LanguageModel` for local weights (with its generation backend), an `OpenAIChatModel` for
    `source: openai`. `spec` holds the fields of a `ModelSpec` (rules pass them as plain params)."""
    if spec.get("source") == "openai":
        return OpenAIChatModel(base_url=spec.get("base_url"), model=spec["id"], api_key_env=spec.get("api_key_env"),
                               fingerprint=read_fingerprint(model_dir)["weights_sha256"],
                               cache=None if cache is None else str(cache))
    kind = spec.get("generation_backend") or "local"
    backend = None
    if kind == "vllm":
        backend = VLLMBackend(str(model_dir), dtype="bfloat16" if spec.get("dtype", "auto") == "auto" else spec["dtype"])
    elif kind == "server":
        # `vllm serve <hub id>` names the model by its id, `vllm serve <dir>` by the directory.
        served = spec["id"] if spec.get("source") == "hf" else str(model_dir)
        backend = OpenAICompatibleBackend(spec["base_url"], served, api_key_env=spec.get("api_key_env"))
    elif kind != "local":
        raise ValueError(f"model {spec.get('name', model_dir)}: unknown generation_backend {kind!r}")
    from .lm import LanguageModel  # torch: only when a local model is loaded

    return LanguageModel(model_dir, device=spec.get("device", "auto"), dtype=spec.get("dtype", "auto"),
                         batch_size=spec.get("batch_size", 8), cache=cache, generation_backend=backend)
