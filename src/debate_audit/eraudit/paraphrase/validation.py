"""Checks a paraphrase must pass before the audit uses it; every rejection carries one reason.

Order of the checks (the first failing one is the reason): empty, identical to the original, duplicate of
an earlier kept paraphrase (both by data/normalise.py's paraphrase_key: NFKC, casefold, contractions spelled
out, alphanumerics only), a number of the original missing, a symbol of the original missing, cosine similarity
to the original below the floor.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable

from debate_audit.data.normalise import paraphrase_key

REASONS = ("empty", "identical", "duplicate", "missing_number", "missing_symbol", "low_similarity")
TRUNCATED = "truncated"  # from a reply that stopped at its token cap: rejected in every filter mode (pools.py)
SURPLUS = "surplus"  # valid, but the pool was already full; kept out of the pool, still recorded

_NUMBER = re.compile(r"\d+(?:[.,]\d+)*")
# Plain punctuation may change freely in a rewrite; other non-alphanumeric characters (°, %, =, +, ->,
# $, ...) carry meaning and must survive.
_PLAIN_PUNCTUATION = set(" \t\n\r.,;:!?'\"`()[]{}-\u2010\u2011\u2012\u2013\u2014\u2018\u2019\u201c\u201d\u2026/")


def numbers(text: str) -> set[str]:
    return set(_NUMBER.findall(unicodedata.normalize("NFKC", text)))


def symbols(text: str) -> set[str]:
    text = unicodedata.normalize("NFKC", text)
    return {ch for ch in text if not ch.isalnum() and ch not in _PLAIN_PUNCTUATION and not ch.isspace()}


def cheap_reason(original: str, candidate: str, seen: Iterable[str]) -> str | None:
    """The first failing check that needs no embedding model, or None. `seen`: paraphrase_key of the kept texts."""
    key = paraphrase_key(candidate)
    if not key:
        return "empty"
    if key == paraphrase_key(original):
        return "identical"
    if key in set(seen):
        return "duplicate"
    if not numbers(original) <= numbers(candidate):
        return "missing_number"
    if not symbols(original) <= symbols(candidate):
        return "missing_symbol"
    return None


def check(original: str, candidate: str, seen: Iterable[str], similarity: float, min_similarity: float) -> str | None:
    """Reason to reject `candidate` as a paraphrase of `original`, or None when it is kept."""
    reason = cheap_reason(original, candidate, seen)
    if reason is None and not similarity >= min_similarity:
        return "low_similarity"
    return reason


# ------------------------------------------------------------------------------- parsing generations
_LIST_ITEM = re.compile(r"^\s*(?:\d{1,3}\s*[.):]|[-*\u2022])\s+(.*\S)\s*$")
_LABEL = re.compile(
    r"^\s*(?:\*\*)?(?:paraphrase|rewrite|rewritten question|new question|question)\s*\d*\s*:\s*(?:\*\*)?\s*",
    re.IGNORECASE,
)


def strip_wrapping(text: str) -> str:
    """Remove labels ("Paraphrase:"), markdown bold and surrounding quotes a model adds around a rewrite."""
    text = _LABEL.sub("", text.strip())
    text = text.strip().strip("*").strip()
    if len(text) >= 2 and text[0] in "\"'\u201c\u2018" and text[-1] in "\"'\u201d\u2019":
        text = text[1:-1].strip()
    return text


def parse_numbered_list(text: str) -> list[str]:
    """Items of a numbered (or bulleted) list; without any list marker, the non-empty lines."""
    lines = [line for line in text.splitlines() if line.strip()]
    items = [m.group(1) for line in lines if (m := _LIST_ITEM.match(line))]
    if not items:
        items = [line for line in lines if not line.rstrip().endswith(":")]
    return [strip_wrapping(item) for item in items]


def parse_single(text: str) -> str:
    """The rewrite in a single-paraphrase reply: its first non-empty line without labels or quotes."""
    for line in text.splitlines():
        cleaned = strip_wrapping(line)
        if cleaned and not line.rstrip().endswith(":"):
            return cleaned
    return ""
