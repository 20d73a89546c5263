"""QuALITY-H and GPQA-H pairs (ER-Audit release) joined to their context -> data/<dataset>.parquet."""

from __future__ import annotations

import io
import logging
import re
import zipfile
from collections.abc import Collection, Iterable
from functools import partial
from pathlib import Path

import polars as pl

from .fields import MISSING, lookup, require_somewhere, shown, text_error
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


def _flatten(item: object) -> tuple[dict | None, str | None]:
    """(pair, None), or (None, why): a field missing, of the wrong type or empty, named with its value."""
    if not isinstance(item, dict):
        return None, f"the item is {shown(item)}, not a JSON object"
    title = item.get("story_title", MISSING)
    error = text_error("story_title", title)
    if error:
        return None, error
    record = {"story_title": title}
    for ours, (group, key) in FIELDS.items():
        value = lookup(item, (group, key))
        if value is MISSING and group in item and not isinstance(item[group], dict):
            return None, f"field {group!r} is {shown(item[group])}, not a JSON object"
        error = text_error(f"{group}.{key}", value)
        if error:
            return None, error
        # The release keeps trailing spaces and newlines on some answers.
        record[ours] = value.strip()
    return record, None


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


def load_pairs(location: str | Path) -> tuple[list[dict | None], list[dict]]:
    """(pairs, rejected): one entry per item of the file, in file order (its index is the pair_id), None where
    the item is rejected; rejected holds REJECTED_SCHEMA rows naming the field and its value. A file in which
    no item has a field every pair needs is not a pairs file and stops here, naming it and the field."""
    data = read_json(location)
    where = str(location)
    if not isinstance(data, list):
        raise DataError(f"{where}: expected a JSON array of pairs, got {type(data).__name__}")
    needed = {"story_title": ("story_title",), **{f"{g}.{k}": (g, k) for g, k in FIELDS.values()}}
    require_somewhere(data, {name: partial(lookup, path=path) for name, path in needed.items()}, where, "pairs")
    pairs: list[dict | None] = []
    rejected: list[dict] = []
    for row, item in enumerate(data):
        pair, reason = _flatten(item)
        pairs.append(pair)
        if reason:
            title = item.get("story_title") if isinstance(item, dict) else None
            key = title if isinstance(title, str) else shown(title)
            rejected.append({"file": where, "row": row, "key": key, "reason": f"item {row}: {reason}"})
    # One pair per story: the train/eval split is by story, and a second pair on the same story would be
    # joined to the same context without anyone noticing. No release has one, so it is a broken file.
    first: dict[str, int] = {}
    for row, pair in enumerate(pairs):
        if pair is None:
            continue
        title = pair["story_title"]
        if text_key(title) in first:
            other = pairs[first[text_key(title)]]["story_title"]
            same = "" if other == title else f" ({other!r} and {title!r} {NORMALISATION})"
            raise DataError(
                f"{where}: items {first[text_key(title)]} and {row} have the same story_title {title!r}{same}; "
                f"each pair needs its own story (remove or rename one)"
            )
        first[text_key(title)] = row
    return pairs, rejected


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


def load_quality_stories(
    location: str | Path, titles: Collection[str] | None = None
) -> tuple[dict[str, object], list[dict]]:
    """(title -> article, rejected) from the QuALITY v1.0.1 release zip (URL or path) or a JSONL(.gz) of
    stories; only the `titles` asked for when given (the stories no pair uses cannot change a result). A record
    whose title is not a text, or one of a wanted title whose article is not a non-empty text, is rejected
    naming the field and its value; a file in which no record has the title or the article field stops here."""
    if str(location).endswith(".zip"):
        sources = _zip_stories(location)
        title_field, warn_repeats = "title", False  # the release repeats each article once per question set
    else:
        sources = [(str(location), read_jsonl_lines(location))]
        title_field, warn_repeats = "story_title", True
    entries, rejected = [], []
    for where, lines in sources:
        records = [record for _, record in lines]
        fields = {name: partial(lookup, path=(name,)) for name in (title_field, "article")}
        require_somewhere(records, fields, where, "stories")
        for row, (number, record) in enumerate(lines):
            title = lookup(record, (title_field,))
            reason = (
                f"the record is {shown(record)}, not a JSON object"
                if not isinstance(record, dict)
                else text_error(title_field, title, empty_ok=True)
            )
            if reason is None and titles is not None and title not in titles:
                continue
            reason = reason or text_error("article", lookup(record, ("article",)))
            if reason:
                key = title if isinstance(title, str) else shown(None if title is MISSING else title)
                rejected.append({"file": where, "row": row, "key": key, "reason": f"line {number}: {reason}"})
                continue
            entries.append((title, record["article"], f"{_member(where, location)}line {number}"))
    return one_text_per_title(entries, location, "story_title", warn_repeats), rejected


def _member(where: str, location: str | Path) -> str:
    """How a place in the file is named: the zip member before the line, nothing for a plain file."""
    return where[len(str(location)) + 1 :] + " " if where != str(location) else ""


def _zip_stories(location: str | Path) -> list[tuple[str, list[tuple[int, object]]]]:
    try:
        archive = zipfile.ZipFile(io.BytesIO(read_bytes(location)))
    except zipfile.BadZipFile as err:
        raise DataError(f"{location}: not a zip file ({err})") from err
    members = []
    with archive:
        for member in archive.namelist():
            if ".htmlstripped" not in member:
                continue
            where = f"{location}:{member}"
            members.append((where, parse_jsonl(decode_text(archive.read(member), where, "JSON lines"), where)))
    return members


class _Entries(list):
    """A JSON object's (key, value) entries in file order, repeated keys included."""


def load_contexts(location: str | Path) -> tuple[dict[str, object], list[dict]]:
    """(title -> context, rejected) from a JSON object (GPQA-H's title-story file), a repeated title checked
    as in a stories file (json.loads alone would keep the last silently); an entry whose context is not a
    non-empty text is rejected naming its title and value."""
    data = read_json(location, object_pairs_hook=_Entries)
    if not isinstance(data, _Entries):
        raise DataError(f"{location}: expected a JSON object mapping title -> context")
    entries, rejected = [], []
    for index, (title, text) in enumerate(data):
        reason = text_error("context", dict(text) if isinstance(text, _Entries) else text)
        if reason:
            rejected.append({"file": str(location), "row": index, "key": title, "reason": f"entry {index}: {reason}"})
            continue
        entries.append((title, text, f"entry {index}"))
    return one_text_per_title(entries, location, "title"), rejected


GPQA_TITLE = re.compile(r"^gpqa_(?P<domain>[a-z]+)_")


def _join(
    dataset: str,
    pairs: list[dict | None],
    contexts: dict[str, object],
    missing_reason: str,
    where: str,
    context_rejected: list[dict],
) -> tuple[list, list]:
    kept, rejected = [], []
    items: dict[tuple[str, str, str], dict] = {}  # item_key -> the kept pair
    stories: dict[str, dict] = {}  # text_key of a context -> the first kept pair joined to it
    # a title whose context record was rejected: the pair's reason says which record and why
    problems = {r["key"]: f"{r['file']} {r['reason']}" for r in context_rejected}
    for row, pair in enumerate(pairs):
        if pair is None:  # rejected while loading
            continue
        context = contexts.get(pair["story_title"])
        reason = pair_defect(pair)
        if reason is None and (not isinstance(context, str) or not context.strip()):
            problem = problems.get(pair["story_title"])
            reason = missing_reason + (f" (its record was rejected: {problem})" if problem else "")
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
    """`rejected`: the pairs file's rejected items in pair order, then the stories' or contexts' records."""
    write_rejected(rejected, rejected_out)
    for r in rejected:
        log.warning("%s: %s row %d %r rejected: %s", dataset, r["file"], r["row"], r["key"], r["reason"])
    if not kept:
        raise no_valid_rows(where, len(rejected), rejected_out)
    frame = pl.DataFrame(kept, schema=PAIRS_SCHEMA)
    write_parquet(frame, PAIRS_SCHEMA, out)
    log.info("%s: %d pairs kept, %d rejected (%s)", dataset, frame.height, len(rejected), where)
    return frame


def prepare_quality_h(pairs: str, stories: str, out: str | Path, rejected: str | Path) -> pl.DataFrame:
    items, bad_items = load_pairs(pairs)
    texts, bad_stories = load_quality_stories(stories, {item["story_title"] for item in items if item})
    kept, bad = _join("quality_h", items, texts, f"no story text for this title in {stories}", pairs, bad_stories)
    return _write(
        "quality_h", kept, sorted(bad_items + bad, key=lambda r: r["row"]) + bad_stories, out, rejected, pairs
    )


def prepare_gpqa_h(pairs: str, contexts: str, out: str | Path, rejected: str | Path) -> pl.DataFrame:
    items, bad_items = load_pairs(pairs)
    mapping, bad_contexts = load_contexts(contexts)
    kept, bad = _join("gpqa_h", items, mapping, f"no context for this title in {contexts}", pairs, bad_contexts)
    return _write("gpqa_h", kept, sorted(bad_items + bad, key=lambda r: r["row"]) + bad_contexts, out, rejected, pairs)
