"""QuALITY-H and GPQA-H pairs (ER-Audit release) joined to their context -> data/<dataset>.parquet."""

from __future__ import annotations

import io
import logging
import re
import zipfile
from collections.abc import Collection, Iterable
from pathlib import Path

import polars as pl

from .io import (
    DataError,
    decode_text,
    no_valid_rows,
    parse_jsonl,
    read_bytes,
    read_json,
    read_jsonl_lines,
    write_parquet,
    write_rejected,
)
from .normalise import NORMALISATION, text_key

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


def pair_defect(pair: dict) -> str | None:
    """Why a pair cannot be right: a question whose true and false answers are the same text, or a hidden
    question that is the monitored one (the audit would measure what the verifier was trained on)."""
    for true, false, name in (("y_true", "y_false", "Q_Y"), ("h_true", "h_false", "Q_H")):
        if text_key(pair[true]) == text_key(pair[false]):
            return f"{name}: the true and the false answer are the same text ({pair[true]!r}, {NORMALISATION})"
    if text_key(pair["q_h"]) == text_key(pair["q_m"]):
        return (
            f"the hidden question Q_H is the monitored question Q_Y ({pair['q_h']!r}, {NORMALISATION}): "
            f"the audit would measure the question the verifiers are trained on"
        )
    return None


def item_key(pair: dict, context: str) -> tuple[str, str, str]:
    """What makes two pairs one item: the same context, monitored and hidden question (text_key)."""
    return text_key(context), text_key(pair["q_m"]), text_key(pair["q_h"])


def same_item(first: dict) -> str:
    """Why a pair that is the item of the kept pair `first` (under another title) is rejected."""
    return (
        f"the same item as pair {first['pair_id']} ({first['story_title']!r}): the same context, Q_Y and Q_H "
        f"({NORMALISATION}); the first is kept"
    )


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
            raise DataError(
                f"{location}: items {first[title]} and {row} have the same story_title {title!r}; "
                f"each pair needs its own story (remove or rename one)"
            )
        first[title] = row
    return pairs


def one_text_per_title(
    entries: Iterable[tuple[str, object, str]], location: str | Path, field: str, warn_repeats: bool = True
) -> dict[str, object]:
    """Title -> text from (title, text, where in the file) entries. Two different texts under one title fail
    naming both places (which one a pair would be joined to is not ours to guess); the same text twice is
    used once, with a warning per title (or, `warn_repeats` False, one count in the log)."""
    texts: dict[str, tuple[object, str]] = {}
    repeats = 0
    for title, text, where in entries:
        if title not in texts:
            texts[title] = (text, where)
            continue
        first, first_where = texts[title]
        if text != first:
            raise DataError(
                f"{location}: {field} {title!r} has two different texts, at {first_where} and {where}; keep one of them"
            )
        repeats += 1
        if warn_repeats:
            log.warning(
                "%s: %s %r at %s and %s with the same text; used once", location, field, title, first_where, where
            )
    if repeats and not warn_repeats:
        log.info(
            "%s: %d repeated records with the same text as an earlier one of their title, each used once",
            location,
            repeats,
        )
    return {title: text for title, (text, _) in texts.items()}


def load_quality_stories(location: str | Path, titles: Collection[str] | None = None) -> dict[str, str]:
    """Title -> article from the QuALITY v1.0.1 release zip (URL or path) or a JSONL(.gz) of stories; only the
    `titles` asked for when given (the stories no pair uses cannot change a result)."""
    if str(location).endswith(".zip"):
        entries = _zip_stories(location)
        warn_repeats = False  # the release repeats each article once per question set
    else:
        entries = _jsonl_stories(location)
        warn_repeats = True
    wanted = (entry for entry in entries if titles is None or entry[0] in titles)
    return one_text_per_title(wanted, location, "story_title", warn_repeats)


def _jsonl_stories(location: str | Path) -> Iterable[tuple[str, object, str]]:
    for number, record in read_jsonl_lines(location):
        if not isinstance(record, dict) or "story_title" not in record or "article" not in record:
            raise DataError(f"{location}: line {number}: needs fields 'story_title' and 'article'")
        yield record["story_title"], record["article"], f"line {number}"


def _zip_stories(location: str | Path) -> Iterable[tuple[str, object, str]]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(read_bytes(location)))
    except zipfile.BadZipFile as err:
        raise DataError(f"{location}: not a zip file ({err})") from err
    with archive:
        for member in archive.namelist():
            if ".htmlstripped" not in member:
                continue
            where = f"{location}:{member}"
            for number, record in parse_jsonl(decode_text(archive.read(member), where, "JSON lines"), where):
                if not isinstance(record, dict) or "title" not in record or "article" not in record:
                    raise DataError(f"{where}: line {number}: needs fields 'title' and 'article'")
                yield record["title"], record["article"], f"{member} line {number}"


class _Entries(list):
    """A JSON object's (key, value) entries in file order, repeated keys included."""


def load_contexts(location: str | Path) -> dict[str, object]:
    """Title -> context from a JSON object (GPQA-H's title-story file), a repeated title checked as in a
    stories file (json.loads alone would keep the last silently)."""
    data = read_json(location, object_pairs_hook=_Entries)
    if not isinstance(data, _Entries):
        raise DataError(f"{location}: expected a JSON object mapping title -> context")
    entries = ((title, text, f"entry {index}") for index, (title, text) in enumerate(data))
    return one_text_per_title(entries, location, "title")


GPQA_TITLE = re.compile(r"^gpqa_(?P<domain>[a-z]+)_")


def _join(
    dataset: str, pairs: list[dict], contexts: dict[str, object], missing_reason: str, where: str
) -> tuple[list, list]:
    kept, rejected = [], []
    items: dict[tuple[str, str, str], dict] = {}  # item_key -> the kept pair
    stories: dict[str, dict] = {}  # text_key of a context -> the first kept pair joined to it
    for row, pair in enumerate(pairs):
        context = contexts.get(pair["story_title"])
        reason = pair_defect(pair)
        if reason is None and (not isinstance(context, str) or not context.strip()):
            reason = missing_reason
        if reason is None and item_key(pair, context) in items:
            reason = same_item(items[item_key(pair, context)])
        if reason:
            rejected.append({"file": where, "row": row, "key": pair["story_title"], "reason": reason})
            continue
        if text_key(context) in stories:
            # Other questions make another item, so it is kept; but two titles of one text may be a copy, which
            # the split (by title) could put in train and in eval: said in the log.
            first = stories[text_key(context)]
            log.warning(
                "%s: pair %d %r has the context of pair %d %r under another title (kept)",
                dataset,
                row,
                pair["story_title"],
                first["pair_id"],
                first["story_title"],
            )
        domain = None
        if dataset == "gpqa_h":
            match = GPQA_TITLE.match(pair["story_title"])
            domain = match["domain"] if match else None
        kept.append({"pair_id": row, "dataset": dataset, "domain": domain, "context": context, **pair})
        items[item_key(pair, context)] = kept[-1]
        stories.setdefault(text_key(context), kept[-1])
    return kept, rejected


def _write(
    dataset: str, kept: list, rejected: list, out: str | Path, rejected_out: str | Path, where: str
) -> pl.DataFrame:
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
    texts = load_quality_stories(stories, {item["story_title"] for item in items})
    kept, bad = _join("quality_h", items, texts, f"no story text for this title in {stories}", pairs)
    return _write("quality_h", kept, bad, out, rejected, pairs)


def prepare_gpqa_h(pairs: str, contexts: str, out: str | Path, rejected: str | Path) -> pl.DataFrame:
    items = load_pairs(pairs)
    mapping = load_contexts(contexts)
    kept, bad = _join("gpqa_h", items, mapping, f"no context for this title in {contexts}", pairs)
    return _write("gpqa_h", kept, bad, out, rejected, pairs)
