"""Leak detection: does a debate's public text reveal the hidden question q_h or its answers?

Texts are normalised (NFKC, casefold, alphanumeric tokens only) and compared by word n-grams. Only
n-grams that the debater could not have taken from public material count: grams that also occur in the
context, q_m or its answers are removed first (quoting the story is allowed, even when the story
happens to contain an answer to q_h). A target (q_h, H_true, H_false) leaks when the share of its
remaining grams found in the public text reaches the threshold. Targets shorter than n words are
compared as one gram.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

_TOKEN = re.compile(r"[^\W_]+")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(unicodedata.normalize("NFKC", text).casefold())


def ngrams(words: list[str], n: int) -> set[tuple[str, ...]]:
    if not words:
        return set()
    if len(words) < n:
        return {tuple(words)}
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


def _all_grams(words: list[str], n: int) -> set[tuple[str, ...]]:
    # Every gram length up to n, so short targets (compared whole) are found inside longer texts.
    out: set[tuple[str, ...]] = set()
    for k in range(1, n + 1):
        out |= {tuple(words[i : i + k]) for i in range(max(len(words) - k + 1, 0))}
    return out


@dataclass(frozen=True)
class LeakCheck:
    leak: bool
    score: float  # highest share of a target's private grams found in the public text
    target: str | None  # which target scored highest: "q_h", "h_true" or "h_false"


def detect_leak(
    public_text: str,
    targets: dict[str, str],
    public_sources: Iterable[str],
    *,
    n: int = 3,
    threshold: float = 0.3,
) -> LeakCheck:
    """Check `public_text` against each private target; `public_sources` are texts the debater may echo."""
    public = _all_grams(tokens(public_text), n)
    allowed: set[tuple[str, ...]] = set()
    for source in public_sources:
        allowed |= _all_grams(tokens(source), n)
    best, which = 0.0, None
    for name, target in targets.items():
        private = ngrams(tokens(target), n) - allowed
        if not private:
            continue  # nothing in this target that public material does not already contain
        share = len(private & public) / len(private)
        if share > best:
            best, which = share, name
    return LeakCheck(best >= threshold and best > 0, best, which)
