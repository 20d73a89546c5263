"""LoRA verifier checkpoints saved as adapters: a few MB beside their base model instead of a full copy.

A LoRA-trained verifier (`verifier.lora.save: adapter`) is a directory with peft's adapter_config.json and
adapter_model.safetensors, the tokenizer and fingerprint.json. The adapter names its base as a path relative
to itself, so the pair moves together (a cluster's shared file system, a copied results tree). Loading merges
the adapter into the base weights in memory, so inference runs the same code as for a merged checkpoint.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .prepare import read_fingerprint

ADAPTER_CONFIG = "adapter_config.json"


def is_adapter(directory: str | Path) -> bool:
    return (Path(directory) / ADAPTER_CONFIG).exists()


def save_adapter(peft_model: Any, out_dir: Path, base_dir: str | Path) -> None:
    """peft's adapter files, naming `base_dir` relative to `out_dir` (not the absolute path of this machine)."""
    for config in peft_model.peft_config.values():
        config.base_model_name_or_path = os.path.relpath(Path(base_dir).resolve(), out_dir.resolve())
    # Embeddings are never LoRA targets here; without the flag peft looks for the base's config relative to
    # the working directory to guess whether they changed.
    peft_model.save_pretrained(out_dir, safe_serialization=True, save_embedding_layers=False)


def adapter_base(directory: str | Path) -> Path:
    """The base model directory of adapter `directory`; an error names the adapter when the base is missing
    or is no longer the model it was trained on (weights fingerprint differs)."""
    directory = Path(directory)
    named = json.loads((directory / ADAPTER_CONFIG).read_text())["base_model_name_or_path"]
    base = (directory / named).resolve()
    if not (base / "config.json").exists():
        raise FileNotFoundError(f"{directory}: LoRA adapter of {named!r}, which is not a model directory ({base})")
    expected = read_fingerprint(directory).get("base_weights_sha256")
    found = read_fingerprint(base)["weights_sha256"]
    if expected is not None and expected != found:
        raise ValueError(
            f"{directory}: LoRA adapter trained on base weights {expected[:16]}, but {base} now holds "
            f"{found[:16]}: retrain the verifier (delete the directory) or restore the base"
        )
    return base


def load_merged(directory: str | Path, base_dir: str | Path, **kwargs: Any) -> Any:
    """Base model `base_dir` (`adapter_base(directory)`) with adapter `directory` merged into its weights:
    a plain transformers model. Every weight of both is accounted for (weights.py); `kwargs` go to the base's
    load_pretrained (dtype, attn_implementation)."""
    from .weights import load_adapter, load_pretrained

    return load_adapter(load_pretrained(base_dir, **kwargs), directory).merge_and_unload()
