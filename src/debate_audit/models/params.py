"""Call parameters and small helpers of the model layer that need no torch (the Snakefile imports them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class GenerationParams:
    max_new_tokens: int = 256
    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    num_samples: int = 1  # sampling only: independent samples of one prompt
    seed: int = 0

    def key(self) -> dict[str, Any]:
        if not self.do_sample:
            return {"max_new_tokens": self.max_new_tokens, "do_sample": False}
        return dict(self.__dict__)


def two_way_softmax(logprobs: Sequence[float]) -> list[float]:
    top = max(logprobs)
    weights = [math.exp(lp - top) for lp in logprobs]
    total = sum(weights)
    return [w / total for w in weights]
