"""Key/value states of recent prompts, so a later call whose prompt starts with the same tokens skips them.

Stages call the model several times on growing versions of one prompt: the CW-POR judge writes its reply
slot by slot (each slot is a new `generate` call on the prompt plus the reply so far) and then scores the
answer letter on the same prompt. Without reuse every call runs the whole prompt again. The store keeps
the prompt states of the last calls (least recently used first out, within a byte budget) and hands out
the longest stored prefix of a new prompt; only the exact common token prefix is reused, so the result is
the same computation up to floating-point summation order.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence

import numpy as np
import torch

KV = list[tuple[torch.Tensor, torch.Tensor]]  # per layer: keys, values of shape [1, heads, tokens, head_dim]


class PrefixStore:
    def __init__(self, max_bytes: int, min_tokens: int = 16):
        self.max_bytes = max_bytes
        self.min_tokens = min_tokens
        self._entries: OrderedDict[tuple[int, ...], tuple[np.ndarray, KV, int]] = OrderedDict()
        self._bytes = 0
        self.hits = 0
        self.reused_tokens = 0

    def __len__(self) -> int:
        return len(self._entries)

    def longest(self, tokens: Sequence[int]) -> tuple[int, KV] | None:
        """(n, states of tokens[:n]) for the longest stored prefix, n < len(tokens) so at least one token
        is left to run; None below `min_tokens`."""
        if not self._entries or len(tokens) <= self.min_tokens:
            return None
        query = np.asarray(tokens)
        best, best_key = 0, None
        for key, (array, _, _) in self._entries.items():
            n = min(len(array), len(query) - 1)
            if n <= best or array[0] != query[0]:
                continue
            differ = np.flatnonzero(array[:n] != query[:n])
            common = int(differ[0]) if differ.size else n
            if common > best:
                best, best_key = common, key
        if best < self.min_tokens or best_key is None:
            return None
        self._entries.move_to_end(best_key)
        self.hits += 1
        self.reused_tokens += best
        states = self._entries[best_key][1]
        return best, [(k[:, :, :best], v[:, :, :best]) for k, v in states]

    def put(self, tokens: Sequence[int], states: KV) -> None:
        if self.max_bytes <= 0:
            return
        key = tuple(tokens)
        size = sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in states)
        if size > self.max_bytes:
            return
        if key in self._entries:
            self._bytes -= self._entries.pop(key)[2]
        self._entries[key] = (np.asarray(tokens), states, size)
        self._bytes += size
        while self._bytes > self.max_bytes:
            _, (_, _, freed) = self._entries.popitem(last=False)
            self._bytes -= freed

    def clear(self) -> None:
        self._entries.clear()
        self._bytes = 0
