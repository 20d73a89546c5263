"""Model layer: specs, preparation into local safetensors directories, cached inference.

Names are imported on first use, so importing a spec or `GenerationParams` (as the Snakefile does) does
not load torch and transformers.
"""

from __future__ import annotations

import importlib
import os

# MKL's strict conditional-numerical-reproducibility mode: a row of a matrix product is the same bits
# whatever the number of rows (and memory alignment), which the CPU scoring path needs to be batch-
# invariant (see decoding.py). MKL reads it at its first call, so it is set here, before any model code
# runs; a value set in the environment wins. Costs nothing measurable at 16+ rows; single-row products
# (one-prompt decoding steps) run ~2x slower in the GEMM part. It is not enough on every CPU (an AMD EPYC
# still differed at 1 and 3 rows): cpu_numerics.py measures what a model's products need when it loads.
os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")
from typing import Any

_WHERE = {
    "GenerationParams": ".params",
    "two_way_softmax": ".params",
    "Reply": ".params",
    "ChatPrompt": ".params",
    "ChoiceScores": ".params",
    "LanguageModel": ".lm",
    "ModelSpec": ".spec",
    "prepare_model": ".prepare",
    "read_fingerprint": ".prepare",
    "write_fingerprint": ".prepare",
    "ModelRef": ".loading",
    "ChatModel": ".loading",
    "open_model": ".loading",
}

__all__ = sorted(_WHERE)


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_WHERE[name], __name__), name)
