"""Train/eval split at the context (story) level, so no story is seen in training and evaluation.

Two sources (`debate.split.source`):

- "seeded": the release's policy. The unique story titles in first-occurrence order (pair_id order, which is
  the order of the release's pairs file) are shuffled with Python's `random.Random(split_seed)`; the first
  floor((1 - eval_fraction) * n) stories are train, the rest eval; every item of a story stays with it.
  With the release's seed and eval_fraction 0.2 this reproduces the release's normal split
  (GPQA-H: 80 / 21 stories). The same split serves honest and adversarial debates.
- "release": the release's own split files. The normal file gives `split` (honest debates, V_honest,
  evaluation), the adversarial file, when given, `split_adversarial` (adversarial debates, V_adv and
  V_org; null for an item the adversarial set leaves out). The two files were drawn separately and
  overlap: an eval item of the normal split can be an adversarial train item, i.e. V_adv / V_org trained on
  it. `debate.split.overlap` decides: "exclude" (default) sets such an item's `split` to "excluded", so no
  compared verifier is evaluated on an item one of them trained on; "report" keeps it in eval. Either way
  `overlap` says what overlaps, and the log counts it.
"""

from __future__ import annotations

import logging
import math
import random
from pathlib import Path
from typing import Any

import polars as pl

from debate_audit.data.fields import MISSING, int_error, shown, text_error
from debate_audit.data.io import DataError, read_json, write_parquet
from debate_audit.data.normalise import text_key

log = logging.getLogger(__name__)

EXCLUDED = "excluded"
OVERLAP_POLICIES = ("exclude", "report")

SPLIT_SCHEMA = {
    "pair_id": pl.Int64,  # pair in data/<dataset>.parquet
    "story_title": pl.Utf8,  # the context the pair belongs to; all pairs of one title share a split
    "split": pl.Utf8,  # "train" (honest debates, fine-tuning), "eval" (Table 1, audit) or "excluded" (overlap)
    "split_adversarial": pl.Utf8,  # the same for adversarial debates and V_adv / V_org; null: not in the set
    "source": pl.Utf8,  # "seeded" or "release:<normal file>[+<adversarial file>]"
    "overlap": pl.Utf8,  # what another split's training does to this item (null: nothing)
}


def assign_splits(titles: list[str], eval_fraction: float, seed: int) -> dict[str, str]:
    """title -> split by the release's policy: unique titles in first-occurrence order, shuffled with
    random.Random(seed), the first floor((1 - eval_fraction) * n) are train."""
    unique = list(dict.fromkeys(titles))
    random.Random(seed).shuffle(unique)
    # round(..., 9) first: (1 - 0.2) * 101 = 80.80000000000001 must floor to 80, and 0.5 * 4 to exactly 2.
    n_train = math.floor(round((1.0 - eval_fraction) * len(unique), 9))
    if len(unique) >= 2:
        n_train = min(max(n_train, 1), len(unique) - 1)  # both splits non-empty whenever possible
    return {title: ("train" if i < n_train else "eval") for i, title in enumerate(unique)}


def read_release_split(path: str | Path) -> dict[str, Any]:
    """A release split file (JSON, optionally gzip-compressed) with its index -> (pair_id, title) map.

    Returns {"train": {pair_id: title}, "eval": {pair_id: title}, "seed": ..., "path": ...}. pair_id is the
    index in the full pairs file: `source_dataset_index` where the file has one (adversarial files index
    their own subset), the index itself otherwise. A split assigns every pair or none, so any field of the
    wrong type or value stops the rule, naming the file, the field and the value.
    """
    where = str(path)
    data = read_json(path)
    if not isinstance(data, dict):
        raise DataError(f"{where}: not a release split file: a JSON {type(data).__name__}, not an object")
    for key in ("train_indices", "eval_indices", "index_info"):
        if key not in data:
            raise DataError(f"{where}: release split file has no field {key!r}")
    info = data["index_info"]
    if not isinstance(info, dict):
        raise DataError(f"{where}: field 'index_info' is {shown(info)}, not an object")
    seed = data.get("split_seed")
    if seed is not None and int_error("split_seed", seed, minimum=None):
        raise DataError(f"{where}: {int_error('split_seed', seed, minimum=None)}")
    out: dict[str, Any] = {"seed": seed, "path": where}
    for part in ("train", "eval"):
        indices = data[f"{part}_indices"]
        if not isinstance(indices, list):
            raise DataError(f"{where}: field '{part}_indices' is {shown(indices)}, not a list")
        mapping = {}
        for n, index in enumerate(indices):
            error = int_error(f"{part}_indices[{n}]", index)
            if error:
                raise DataError(f"{where}: {error}")
            entry = info.get(str(index))
            if entry is None:
                raise DataError(f"{where}: {part}_indices has {index}, which index_info does not describe")
            field = f"index_info.{index}"
            if not isinstance(entry, dict):
                raise DataError(f"{where}: field {field!r} is {shown(entry)}, not an object")
            source = entry.get("source_dataset_index")
            error = text_error(f"{field}.story_title", entry.get("story_title", MISSING)) or (
                None if source is None else int_error(f"{field}.source_dataset_index", source)
            )
            if error:
                raise DataError(f"{where}: {error}")
            pair_id = index if source is None else source
            if pair_id in mapping:
                raise DataError(f"{where}: {part}_indices lists pair {pair_id} twice")
            mapping[pair_id] = entry["story_title"]
        out[part] = mapping
    both = set(out["train"]) & set(out["eval"])
    if both:
        raise DataError(f"{where}: items {sorted(both)[:5]} are both train and eval")
    return out


def _release_assignment(frame: pl.DataFrame, release: dict[str, Any], name: str, required: bool) -> dict[int, str]:
    """pair_id -> train/eval from one release file; checks that every title matches the pairs file."""
    titles = dict(zip(frame["pair_id"].to_list(), frame["story_title"].to_list()))
    out = {}
    for part in ("train", "eval"):
        for pair_id, title in release[part].items():
            if pair_id not in titles:
                continue  # the pairs file left this item out (e.g. no context); nothing to split
            if text_key(titles[pair_id]) != text_key(title):
                raise DataError(
                    f"{release['path']}: index {pair_id} is story {title!r}, but pair {pair_id} of the "
                    f"pairs file is {titles[pair_id]!r}: the split file belongs to another pairs file"
                )
            out[pair_id] = part
    missing = sorted(set(titles) - set(out))
    if required and missing:
        raise ValueError(
            f"{release['path']}: pairs {missing[:10]} ({len(missing)} in all) are in no split of the {name} split file"
        )
    return out


def release_splits(
    frame: pl.DataFrame, normal: str | Path, adversarial: str | Path | None, overlap: str
) -> pl.DataFrame:
    """SPLIT_SCHEMA rows from the release's split files (module docstring)."""
    if overlap not in OVERLAP_POLICIES:
        raise ValueError(f"debate.split.overlap must be one of {OVERLAP_POLICIES}, got {overlap!r}")
    norm = _release_assignment(frame, read_release_split(normal), "normal", required=True)
    adv = (
        _release_assignment(frame, read_release_split(adversarial), "adversarial", required=False)
        if adversarial
        else dict(norm)
    )
    source = f"release:{Path(normal).name}" + (f"+{Path(adversarial).name}" if adversarial else "")
    rows = []
    for pair_id, title in zip(frame["pair_id"].to_list(), frame["story_title"].to_list()):
        split, split_adv, note = norm[pair_id], adv.get(pair_id), None
        if split == "eval" and split_adv == "train":
            note = "eval item of the normal split is adversarial train: V_adv and V_org trained on it"
            if overlap == "exclude":
                split = EXCLUDED
        elif split == "train" and split_adv == "eval":
            note = "adversarial eval item is normal train: V_honest trained on it"
        rows.append(
            {
                "pair_id": pair_id,
                "story_title": title,
                "split": split,
                "split_adversarial": split_adv,
                "source": source,
                "overlap": note,
            }
        )
    return pl.DataFrame(rows, schema=SPLIT_SCHEMA)


def seeded_splits(frame: pl.DataFrame, eval_fraction: float, seed: int) -> pl.DataFrame:
    mapping = assign_splits(frame["story_title"].to_list(), eval_fraction, seed)
    return frame.select(
        "pair_id", "story_title", pl.col("story_title").replace_strict(mapping).alias("split")
    ).with_columns(
        pl.col("split").alias("split_adversarial"),
        pl.lit("seeded").alias("source"),
        pl.lit(None, dtype=pl.Utf8).alias("overlap"),
    )


def split_pairs(
    pairs: str | Path,
    out: str | Path,
    *,
    eval_fraction: float,
    seed: int,
    source: str = "seeded",
    release: dict[str, Any] | None = None,
    overlap: str = "exclude",
) -> pl.DataFrame:
    """Write the split of every pair. `release`: {"normal": path, "adversarial": path or None} for
    source "release"."""
    frame = pl.read_parquet(pairs).select("pair_id", "story_title").sort("pair_id")
    if source == "seeded":
        result = seeded_splits(frame, eval_fraction, seed)
    elif source == "release":
        if not release or not release.get("normal"):
            raise ValueError(
                f"{pairs}: debate.split.source is 'release' but debate.split.release has no "
                "'normal' split file for this dataset"
            )
        result = release_splits(frame, release["normal"], release.get("adversarial"), overlap)
    else:
        raise ValueError(f"debate.split.source must be 'seeded' or 'release', got {source!r}")
    result = result.sort("pair_id")
    write_parquet(result, SPLIT_SCHEMA, out)
    for column in ("split", "split_adversarial"):
        stories = result.filter(pl.col(column).is_not_null()).group_by(column).agg(pl.col("story_title").n_unique())
        log.info("%s: %s stories per split %s", pairs, column, dict(stories.iter_rows()))
    n_overlap = result["overlap"].is_not_null().sum()
    if n_overlap:
        for note, n in result.filter(pl.col("overlap").is_not_null()).group_by("overlap").len().iter_rows():
            log.warning(
                "%s: %d items: %s%s",
                pairs,
                n,
                note,
                " (excluded from evaluation)" if overlap == "exclude" and "V_adv" in note else "",
            )
    return result


def release_split_files(split_config: dict[str, Any], dataset: str) -> dict[str, str | None]:
    """{"normal": path, "adversarial": path or None} of `dataset` from `debate.split` (source release), else {}."""
    if split_config["source"] != "release":
        return {}
    files = (split_config.get("release") or {}).get(dataset)
    if not files or not files.get("normal"):
        raise ValueError(f"debate.split.release.{dataset}.normal: source is 'release' but no split file is given")
    return {"normal": files["normal"], "adversarial": files.get("adversarial")}


SPLIT_COLUMNS = {"honest": "split", "adversarial": "split_adversarial"}


def split_column(mode: str) -> str:
    """The split column that decides an item's role for debates of `mode` (honest / adversarial)."""
    if mode not in SPLIT_COLUMNS:
        raise ValueError(f"debate mode {mode!r} is not one of {list(SPLIT_COLUMNS)}")
    return SPLIT_COLUMNS[mode]
