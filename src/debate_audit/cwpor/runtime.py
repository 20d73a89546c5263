"""Which prepared model plays a role, and how it is loaded (rules pass these fields as params)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from debate_audit.models.loading import load_model


@dataclass(frozen=True)
class ModelRef:
    name: str  # the model's key under `models:` in the config
    model_dir: str  # resources/models/<name>
    device: str = "auto"
    dtype: str = "auto"
    batch_size: int | str = 8
    source: str = "local"
    id: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    generation_backend: str = "local"

    def load(self, cache: str | Path | None) -> Any:
        """A `LanguageModel` (or, for `source: openai`, a chat model that can generate but not score)."""
        return load_model(self.model_dir, asdict(self), cache)
