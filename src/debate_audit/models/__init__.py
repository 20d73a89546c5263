"""Model layer: specs, preparation into local safetensors directories, cached inference.

Names are imported on first use, so importing a spec or `GenerationParams` (as the Snakefile does) does
not load torch and transformers.
"""

from __future__ import annotations

import importlib
from typing import Any

_WHERE = {
    "GenerationParams": ".params",
    "two_way_softmax": ".params",
    "LanguageModel": ".lm",
    "ModelSpec": ".spec",
    "prepare_model": ".prepare",
    "read_fingerprint": ".prepare",
    "write_fingerprint": ".prepare",
    "load_model": ".loading",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name], __name__), name)
