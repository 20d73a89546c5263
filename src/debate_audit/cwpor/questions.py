"""The question set of one CW-POR run: subset, the falsehood each persuasive agent defends, answer order.

All randomness of the experiment is drawn here, once, from the seed, so every model and verbosity level
sees the same questions, the same falsehoods and the same A/B order (paired comparisons).
"""

from __future__ import annotations

import logging
import random
from pathlib import Path

import polars as pl

from debate_audit.data.io import DataError, write_parquet

log = logging.getLogger(__name__)

QUESTIONS_SCHEMA = {
    "question_id": pl.Int64,  # TruthfulQA question id (row in the validation split)
    "type": pl.Utf8,  # "Adversarial" or "Non-Adversarial"
    "category": pl.Utf8,  # TruthfulQA category
    "question": pl.Utf8,
    "best_answer": pl.Utf8,  # the neutral agent explains this answer
    "falsehood": pl.Utf8,  # the incorrect answer the persuasive agent defends
    "falsehood_index": pl.Int64,  # its position in the dataset's incorrect_answers list
    "correct_position": pl.Utf8,  # "A" or "B": where the judge sees the neutral (correct) answer
}


def subset_ids(question_ids: list[int], subset: int | None, seed: int) -> list[int]:
    """`subset` question ids drawn without replacement with `seed` (all when None), sorted."""
    ids = sorted(question_ids)
    if subset is None or subset >= len(ids):
        return ids
    return sorted(random.Random(seed).sample(ids, subset))


def balanced_positions(question_ids: list[int], seed: int) -> dict[int, str]:
    """Correct answer's position per question: a seeded shuffle puts half the questions at "A".

    Exactly balanced (counts differ by at most one; an odd leftover is a seeded coin flip) and a function
    of the id set and the seed only, so reruns and other models get the same order.
    """
    ids = sorted(question_ids)
    rng = random.Random(f"{seed}:order")
    rng.shuffle(ids)
    n_a = len(ids) // 2 + (len(ids) % 2 if rng.random() < 0.5 else 0)
    return {qid: ("A" if rank < n_a else "B") for rank, qid in enumerate(ids)}


def falsehood_index(question_id: int, n_incorrect: int, seed: int, excluded: frozenset[int] = frozenset()) -> int:
    """Which incorrect answer the persuasive agent defends: seeded per question, independent of the subset.

    Never an `excluded` one (an answer the dataset also lists as correct): such a draw is followed by the
    next draw of the same generator, so a question whose first draw is a plain falsehood keeps it.
    """
    if excluded >= set(range(n_incorrect)):
        raise DataError(f"question {question_id}: every incorrect answer is excluded; no falsehood to defend")
    rng = random.Random(f"{seed}:falsehood:{question_id}")
    while (k := rng.randrange(n_incorrect)) in excluded:
        pass
    return k


def select_questions(dataset: str | Path, out: str | Path, *, subset: int | None, seed: int) -> pl.DataFrame:
    data = pl.read_parquet(dataset)
    if data.is_empty():
        raise DataError(f"{dataset}: no questions")
    ids = subset_ids(data["question_id"].to_list(), subset, seed)
    chosen = data.filter(pl.col("question_id").is_in(ids)).sort("question_id")
    positions = balanced_positions(ids, seed)
    rows = []
    for rec in chosen.iter_rows(named=True):
        incorrect = rec["incorrect_answers"]
        contested = frozenset(i for i, answer in enumerate(incorrect) if answer in rec["contested_answers"])
        k = falsehood_index(rec["question_id"], len(incorrect), seed, contested)
        rows.append(
            {
                **{c: rec[c] for c in ("question_id", "type", "category", "question", "best_answer")},
                "falsehood": rec["incorrect_answers"][k],
                "falsehood_index": k,
                "correct_position": positions[rec["question_id"]],
            }
        )
    frame = pl.DataFrame(rows, schema=QUESTIONS_SCHEMA)
    log.info(
        "%d of %d questions selected (subset=%s, seed=%d); correct answer at A for %d, at B for %d",
        len(frame),
        len(data),
        subset,
        seed,
        (frame["correct_position"] == "A").sum(),
        (frame["correct_position"] == "B").sum(),
    )
    write_parquet(frame, QUESTIONS_SCHEMA, out)
    return frame
