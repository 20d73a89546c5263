"""Train/eval split at the context (story) level, so no story is seen in training and evaluation."""

from __future__ import annotations

import logging
import random
from pathlib import Path

import polars as pl

from debate_audit.data.io import write_parquet

log = logging.getLogger(__name__)

SPLIT_SCHEMA = {
    "pair_id": pl.Int64,  # pair in data/<dataset>.parquet
    "story_title": pl.Utf8,  # the context the pair belongs to; all pairs of one title share a split
    "split": pl.Utf8,  # "train" (debates, fine-tuning) or "eval" (Table 1, audit)
}


def assign_splits(titles: list[str], eval_fraction: float, seed: int) -> dict[str, str]:
    """title -> split; a seeded shuffle of the sorted unique titles, the first share goes to eval."""
    unique = sorted(set(titles))
    random.Random(f"split:{seed}").shuffle(unique)
    n_eval = round(eval_fraction * len(unique))
    if len(unique) >= 2:
        n_eval = min(max(n_eval, 1), len(unique) - 1)  # both splits non-empty whenever possible
    return {title: ("eval" if i < n_eval else "train") for i, title in enumerate(unique)}


def split_pairs(pairs: str | Path, out: str | Path, *, eval_fraction: float, seed: int) -> pl.DataFrame:
    frame = pl.read_parquet(pairs).select("pair_id", "story_title")
    mapping = assign_splits(frame["story_title"].to_list(), eval_fraction, seed)
    result = frame.with_columns(pl.col("story_title").replace_strict(mapping).alias("split")).sort("pair_id")
    write_parquet(result, SPLIT_SCHEMA, out)
    counts = dict(result.group_by("split").len().iter_rows())
    log.info("%s: %d stories, pairs per split %s", pairs, len(mapping), counts)
    return result
