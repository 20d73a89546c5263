"""Which prepared model plays a role, and how it is loaded (rules pass these fields as params)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from debate_audit.models import LanguageModel


@dataclass(frozen=True)
class ModelRef:
    name: str  # the model's key under `models:` in the config
    model_dir: str  # resources/models/<name>
    device: str = "auto"
    dtype: str = "auto"
    batch_size: int = 8

    def load(self, cache: str | Path | None) -> LanguageModel:
        return LanguageModel(
            self.model_dir, device=self.device, dtype=self.dtype, batch_size=self.batch_size, cache=cache
        )
