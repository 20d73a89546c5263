"""QuALITY-H and GPQA-H pairs (ER-Audit release) joined to their context -> data/<dataset>.parquet."""

from __future__ import annotations

import io
import logging
import re
import zipfile
from pathlib import Path

import polars as pl

from .io import DataError, no_valid_rows, read_bytes, read_json, read_jsonl, write_parquet, write_rejected

log = logging.getLogger(__name__)

PAIRS_SCHEMA = {
    "pair_id": pl.Int64,  # 0-based index in the release's pairs file
    "dataset": pl.Utf8,  # "quality_h" or "gpqa_h"
    "story_title": pl.Utf8,  # title as in the release (joins pairs to contexts)
    "domain": pl.Utf8,  # GPQA-H: chemistry / physics / biology; QuALITY-H: null
    "context": pl.Utf8,  # shared context c: the story (QuALITY-H) or the expert explanation (GPQA-H)
    "q_m": pl.Utf8,  # monitored question (Q_Y)
    "y_true": pl.Utf8,
    "y_false": pl.Utf8,
    "q_h": pl.Utf8,  # hidden question (Q_H)
    "h_true": pl.Utf8,
    "h_false": pl.Utf8,
}

FIELDS = {
    "q_m": ("Q_Y", "question"),
    "y_true": ("Q_Y", "Y_true"),
    "y_false": ("Q_Y", "Y_false"),
    "q_h": ("Q_H", "question"),
    "h_true": ("Q_H", "H_true"),
    "h_false": ("Q_H", "H_false"),
}


def _flatten(item: object, row: int, where: str) -> dict:
    if not isinstance(item, dict):
        raise DataError(f"{where}: item {row} is not a JSON object")
    title = item.get("story_title")
    if not isinstance(title, str) or not title.strip():
        raise DataError(f"{where}: item {row}: field 'story_title' is missing or empty")
    record = {"story_title": title}
    for ours, (group, key) in FIELDS.items():
        value = (item.get(group) or {}).get(key)
        if not isinstance(value, str) or not value.strip():
            raise DataError(f"{where}: item {row} ({title!r}): field '{group}.{key}' is missing or empty")
        # The release keeps trailing spaces and newlines on some answers.
        record[ours] = value.strip()
    return record


def _normalised(text: str) -> str:
    return " ".join(text.split()).casefold()


def pair_defect(pair: dict) -> str | None:
    """Why a pair cannot be right: a question whose true and false answers are the same text."""
    for true, false, name in (("y_true", "y_false", "Q_Y"), ("h_true", "h_false", "Q_H")):
        if _normalised(pair[true]) == _normalised(pair[false]):
            return f"{name}: the true and the false answer are the same text ({pair[true]!r})"
    return None


def load_pairs(location: str | Path) -> list[dict]:
    data = read_json(location)
    if not isinstance(data, list):
        raise DataError(f"{location}: expected a JSON array of pairs, got {type(data).__name__}")
    pairs = [_flatten(item, row, str(location)) for row, item in enumerate(data)]
    # One pair per story: the train/eval split is by story, and a second pair on the same story would be
    # joined to the same context without anyone noticing. No release has one, so it is a broken file.
    first: dict[str, int] = {}
    for row, pair in enumerate(pairs):
        title = pair["story_title"]
        if title in first:
            raise DataError(f"{location}: items {first[title]} and {row} have the same story_title {title!r}; "
                            f"each pair needs its own story (remove or rename one)")
        first[title] = row
    return pairs


def load_quality_stories(location: str | Path) -> dict[str, str]:
    """Title -> article from the QuALITY v1.0.1 release zip (URL or path) or a JSONL(.gz) of stories."""
    name = str(location)
    if name.endswith(".zip"):
        stories: dict[str, str] = {}
        try:
            archive = zipfile.ZipFile(io.BytesIO(read_bytes(location)))
        except zipfile.BadZipFile as err:
            raise DataError(f"{location}: not a zip file ({err})") from err
        with archive:
            for member in archive.namelist():
                if ".htmlstripped" not in member:
                    continue
                for record in read_jsonl_bytes(archive.read(member), f"{name}:{member}"):
                    stories.setdefault(record["title"], record["article"])
        return stories
    stories = {}
    for number, record in enumerate(read_jsonl(location)):
        if not isinstance(record, dict) or "story_title" not in record or "article" not in record:
            raise DataError(f"{location}: line {number + 1}: needs fields 'story_title' and 'article'")
        stories[record["story_title"]] = record["article"]
    return stories


def read_jsonl_bytes(data: bytes, where: str) -> list[dict]:
    import json

    rows = []
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"{where}: not a JSON lines file (not UTF-8 text: {err})") from err
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as err:
                raise DataError(f"{where}: line {number} is not valid JSON ({err})") from err
    return rows


GPQA_TITLE = re.compile(r"^gpqa_(?P<domain>[a-z]+)_")


def _join(dataset: str, pairs: list[dict], contexts: dict[str, str], missing_reason: str, where: str) -> tuple[list, list]:
    kept, rejected = [], []
    for row, pair in enumerate(pairs):
        defect = pair_defect(pair)
        if defect:
            rejected.append({"file": where, "row": row, "key": pair["story_title"], "reason": defect})
            continue
        context = contexts.get(pair["story_title"])
        if not isinstance(context, str) or not context.strip():
            rejected.append({"file": where, "row": row, "key": pair["story_title"], "reason": missing_reason})
            continue
        domain = None
        if dataset == "gpqa_h":
            match = GPQA_TITLE.match(pair["story_title"])
            domain = match["domain"] if match else None
        kept.append({"pair_id": row, "dataset": dataset, "domain": domain, "context": context, **pair})
    return kept, rejected


def _write(dataset: str, kept: list, rejected: list, out: str | Path, rejected_out: str | Path, where: str) -> pl.DataFrame:
    write_rejected(rejected, rejected_out)
    for r in rejected:
        log.warning("%s: pair %d %r rejected: %s", dataset, r["row"], r["key"], r["reason"])
    if not kept:
        raise no_valid_rows(where, len(rejected), rejected_out)
    frame = pl.DataFrame(kept, schema=PAIRS_SCHEMA)
    write_parquet(frame, PAIRS_SCHEMA, out)
    log.info("%s: %d pairs kept, %d rejected (%s)", dataset, frame.height, len(rejected), where)
    return frame


def prepare_quality_h(pairs: str, stories: str, out: str | Path, rejected: str | Path) -> pl.DataFrame:
    items = load_pairs(pairs)
    texts = load_quality_stories(stories)
    kept, bad = _join("quality_h", items, texts, f"no story text for this title in {stories}", pairs)
    return _write("quality_h", kept, bad, out, rejected, pairs)


def prepare_gpqa_h(pairs: str, contexts: str, out: str | Path, rejected: str | Path) -> pl.DataFrame:
    items = load_pairs(pairs)
    mapping = read_json(contexts)
    if not isinstance(mapping, dict):
        raise DataError(f"{contexts}: expected a JSON object mapping title -> context")
    kept, bad = _join("gpqa_h", items, mapping, f"no context for this title in {contexts}", pairs)
    return _write("gpqa_h", kept, bad, out, rejected, pairs)
