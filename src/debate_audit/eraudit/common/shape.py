"""The sizes ER-Audit's cost plans share (each stage's `cost.py`, `make plan`): per dataset how many items are
debated and audited and how long their texts are; per planned debate length how long a transcript is."""

from __future__ import annotations

import math
from dataclasses import dataclass

from debate_audit.models.calls import tokens

from . import grid
from .brought import audit_datasets


@dataclass(frozen=True)
class ItemShape:
    """One ER-Audit dataset as the plan sees it (`stats`: its size and mean words, tools/plan_counts.py)."""

    dataset: str
    n_items: float  # pairs the run reads (debate.max_items)
    train: float  # pairs debated: the train split where debate.splits is [train], else all
    context_tokens: float  # the story or context shown to the debaters (debate.max_context_words)
    question_words: float
    pairs: float  # pairs audited (paraphrase.max_pairs)


def item_shapes(config: dict, stats: dict[str, dict[str, float]]) -> list[ItemShape]:
    db, par = config["debate"], config["paraphrase"]
    shapes = []
    for dataset in config["verifier"]["datasets"]:
        st = stats[dataset]
        n_items = st["n"] if db["max_items"] is None else min(st["n"], db["max_items"])
        train = n_items * (1 - db["eval_fraction"]) if db["splits"] == ["train"] else n_items
        ctx = tokens(min(st.get("context_words", 0), db["max_context_words"] or math.inf))
        pairs = n_items if par["max_pairs"] is None else min(n_items, par["max_pairs"])
        shapes.append(ItemShape(dataset, n_items, train, ctx, st["question_words"], pairs))
    return shapes


@dataclass(frozen=True)
class AuditShape:
    """One dataset with paraphrase pools (every audit's, the trained verifiers' or models you bring)."""

    dataset: str
    question_words: float
    pairs: float  # pairs audited (paraphrase.max_pairs)


def audit_shapes(config: dict, stats: dict[str, dict[str, float]]) -> list[AuditShape]:
    """The trained datasets as item_shapes sees them, then the datasets only audits of models you bring use
    (eraudit/common/brought.py): all their pairs up to paraphrase.max_pairs."""
    shapes = {s.dataset: AuditShape(s.dataset, s.question_words, s.pairs) for s in item_shapes(config, stats)}
    max_pairs = config["paraphrase"]["max_pairs"]
    for dataset in audit_datasets(config):
        if dataset not in shapes:
            n = stats[dataset]["n"]
            shapes[dataset] = AuditShape(dataset, stats[dataset]["question_words"], min(n, max_pairs or n))
    return list(shapes.values())


@dataclass(frozen=True)
class TranscriptShape:
    """A debate transcript at one planned length."""

    length: str
    words: int  # each argument's word limit
    history_tokens: float  # what a debater sees of the debate so far, on average
    transcript_tokens: float  # the whole transcript with its question (what a verifier reads)


def generated(config: dict) -> bool:
    """Whether the run generates its debates (else it imports the release's transcripts)."""
    return ((config["debate"].get("transcripts") or {}).get("source") or "generate") == "generate"


def transcript_shape(config: dict, item: ItemShape, length: str) -> TranscriptShape:
    db = config["debate"]
    words = grid.word_limit(length) if generated(config) else grid.as_list(db["word_limit"])[0]
    history = tokens(words) * 2 * db["rounds"] / 2
    transcript = tokens(words) * 2 * db["rounds"] + tokens(item.question_words)
    return TranscriptShape(length, words, history, transcript)
