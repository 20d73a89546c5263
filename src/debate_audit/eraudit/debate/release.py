"""The ER-Audit release's own debate transcripts, imported as selected transcripts.

The release ships the rows its verifiers were fine-tuned on: JSON lines, one row per pair and answer order,
each with a chat-formatted judge prompt holding the monitored question, options A/B and a 3-round
transcript (`Debater X: \"\"\"...\"\"\"` turns, quotes already marked <v_quote>/<u_quote>). This module turns
them into the selected-transcript table (selection.SELECTED_SCHEMA) that generated debates produce, so
fine-tuning, Table 1 and the audit run unchanged on the paper's transcripts. Every input row ends in the
table (one row per pair: both answer orders carry one transcript) or in the rejected rows with a reason.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
from functools import partial
from pathlib import Path

import polars as pl

from debate_audit.data.fields import (
    MISSING,
    choice_error,
    first_error,
    int_error,
    lookup,
    require_somewhere,
    shown,
    text_error,
)
from debate_audit.data.io import read_jsonl, write_parquet, write_rejected

from .debates import options_for, render_transcript
from .selection import SELECTED_SCHEMA

log = logging.getLogger(__name__)

# The release README's one expected hash mismatch: 15 U+FFFD characters restored by hand in both rows of
# this pair of the adversarial train file.
KNOWN_REPAIRED = ("gpqa_02add1f3f2a8ae89",)
_TRANSCRIPT = re.compile(r"<transcript>(.*?)</transcript>", re.DOTALL)
# A turn ends at the triple quote before the next turn, round or the end: an argument may itself end in a
# quotation mark ('..."approximation.""""').
_TURN = re.compile(r'Debater ([AB]):\s*"""(.*?)"""(?=\s*(?:Debater [AB]:|Round \d+:|$))', re.DOTALL)
_QUOTE = re.compile(r"<([vu])_quote>")


# Debater A's stance -> the position (letter) of Y_true; Debater B must hold the other stance.
TRUE_POSITION = {"Y_true": "A", "Y_false": "B"}
# Fields every row needs (a file where no row has one is no release transcript file).
NEEDED = ("story_title", "messages", "debater_stances")
_SHA256 = re.compile(r"^[0-9a-f]{64}$")


def row_error(row: object) -> str | None:
    """Why a release row cannot be read as it is: the field and its value (None: every field it reads is of
    the right type and value). Debater A's stance must be Y_true or Y_false and Debater B's, where given, the
    other one: any other value is refused, none taken for "Debater A defends Y_false"."""
    if not isinstance(row, dict):
        return f"the row is {shown(row)}, not a JSON object"
    stances = row.get("debater_stances", MISSING)
    messages = row.get("messages", MISSING)
    error = first_error(
        text_error("story_title", row.get("story_title", MISSING)),
        *(
            int_error(field, row[field])
            for field in ("source_dataset_index", "dataset_index")
            if row.get(field) is not None
        ),
        *(
            text_error(field, row[field])
            for field in ("row_id", "pair_id", "orientation")
            if row.get(field) is not None
        ),
        None if isinstance(stances, dict) else f"field 'debater_stances' is {shown(stances)}",
        None
        if isinstance(messages, list) and messages
        else f"field 'messages' is {shown(messages)}, not a list of messages",
    )
    if error:
        return error
    stance_a, stance_b = stances.get("Debater A", MISSING), stances.get("Debater B", MISSING)
    error = choice_error("debater_stances.Debater A", stance_a, TRUE_POSITION) or (
        None
        if stance_b is MISSING
        else choice_error("debater_stances.Debater B", stance_b, [s for s in TRUE_POSITION if s != stance_a])
    )
    if error:
        return error
    content = lookup(messages[0], ("content",))
    error = text_error("messages[0].content", content)
    if error:
        return error
    sha = row.get("row_sha256")
    if sha is not None:
        if not isinstance(sha, str) or not _SHA256.match(sha):
            return f"field 'row_sha256' is {shown(sha)}, not a sha256 hex digest"
        if "target" not in row:
            return "field 'target' is missing (row_sha256 is computed over messages and target)"
    return None


def row_hash(row: dict) -> str:
    """The release's row_sha256 recipe (er_audit_release/README.md)."""
    payload = json.dumps([row["messages"], row["target"]], sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def parse_turns(prompt: str) -> list[dict]:
    """The debate's turns in order: round r holds Debater A's then Debater B's argument."""
    found = _TRANSCRIPT.search(prompt)
    if found is None:
        raise ValueError("no <transcript> block in the judge prompt")
    turns = _TURN.findall(found.group(1))
    if not turns or len(turns) % 2:
        raise ValueError(f"{len(turns)} debater turns; expected A/B pairs")
    arguments = []
    for i, (debater, text) in enumerate(turns):
        if debater != "AB"[i % 2]:
            raise ValueError(f"turn {i + 1} is Debater {debater}; expected A and B to alternate")
        text = text.strip()
        marks = _QUOTE.findall(text)
        plain = re.sub(r"</?[vu]_quote>", "", text)
        arguments.append(
            {
                "round": i // 2 + 1,
                "debater": debater,
                "raw": text,
                "thinking": None,  # the release kept its scratchpads out of the rows (a few slipped into the text)
                "text": text,
                "words": len(plain.replace("<TRUNCATED>", "").split()),
                "truncated": text.endswith("<TRUNCATED>"),
                "quotes": len(marks),
                "verified_quotes": marks.count("v"),
            }
        )
    return arguments


def import_release(
    rows_locations: str | Path | list[str | Path],
    pairs: str | Path,
    out: str | Path,
    rejected: str | Path,
    *,
    dataset: str,
    mode: str,
    expected_hash_mismatch: tuple[str, ...] = KNOWN_REPAIRED,
) -> pl.DataFrame:
    """Release rows (files or URLs, e.g. its train and eval files) -> selected transcripts of `mode` for the
    pairs in `pairs`.

    Rows are matched to pairs by story title (one item per story in both datasets); the release's
    `source_dataset_index` (adversarial files) or `dataset_index` must agree. A row whose sha256 does not verify is rejected unless its pair is listed
    in `expected_hash_mismatch` (the release README names one such pair, repaired by hand).
    """
    items = pl.read_parquet(pairs)
    by_title = {r["story_title"]: r for r in items.iter_rows(named=True)}
    locations = [rows_locations] if isinstance(rows_locations, (str, Path)) else list(rows_locations)
    rows = []
    for loc in locations:
        records = read_jsonl(str(loc))
        # a file in which no row has a field every row needs is another kind of file: it stops the rule
        require_somewhere(records, {f: partial(lookup, path=(f,)) for f in NEEDED}, str(loc), "release transcript")
        rows.extend((str(loc), i, row) for i, row in enumerate(records))
    kept: dict[int, dict] = {}
    seen: dict[tuple[int, str], str] = {}  # (pair, answer order) -> where its row was read
    bad: list[dict] = []

    def reject(location: str, i: int, row: object, reason: str) -> None:
        key = f"{row.get('row_id')} ({row.get('story_title')})" if isinstance(row, dict) else shown(row)
        bad.append({"file": location, "row": i, "key": key, "reason": reason})

    for location, i, row in rows:
        error = row_error(row)
        if error:
            reject(location, i, row, error)
            continue
        title = row["story_title"]
        item = by_title.get(title)
        if item is None:
            reject(location, i, row, f"story_title {title!r} is not a pair of data/{dataset}.parquet")
            continue
        # Adversarial files index their own subset; source_dataset_index points into the full pairs file.
        index = row.get("source_dataset_index", row.get("dataset_index"))
        if index is not None and index != item["pair_id"]:
            reject(location, i, row, f"index {index} in the pairs file, but the title is pair {item['pair_id']}")
            continue
        if row.get("row_sha256") is not None and row_hash(row) != row["row_sha256"]:
            if row.get("pair_id") not in expected_hash_mismatch:
                reject(location, i, row, "row_sha256 does not verify: the file is corrupt or was edited")
                continue
            log.warning("%s: row %d (%s): hash mismatch expected by the release notes", location, i, row.get("row_id"))
        try:
            arguments = parse_turns(row["messages"][0]["content"])
        except ValueError as err:
            reject(location, i, row, f"unreadable transcript: {err}")
            continue
        true_position = TRUE_POSITION[row["debater_stances"]["Debater A"]]
        for arg in arguments:
            arg["defends_true"] = arg["debater"] == true_position
        # A row read twice (one file given twice, a pair in both the train and the eval file) used to pass for
        # the pair's other answer order and vanish unnamed. Without an orientation, equal rows are one row.
        order = (item["pair_id"], row.get("orientation") or row_hash(row))
        if order in seen:
            reject(
                location, i, row, f"the same pair and answer order as {seen[order]}: a repeated row (the first is kept)"
            )
            continue
        seen[order] = f"{location} row {i}"
        previous = kept.get(item["pair_id"])
        if previous is not None:
            if previous["true_position"] != true_position:
                reject(
                    location,
                    i,
                    row,
                    f"the pair's other answer order has Debater {previous['true_position']} defend Y_true, "
                    f"this row Debater {true_position}: the pair's rows contradict each other",
                )
            elif [a["text"] for a in previous["arguments"]] != [a["text"] for a in arguments]:
                reject(location, i, row, "the pair's other answer order carries a different transcript")
            continue  # the second answer order of a pair: same transcript, already kept
        kept[item["pair_id"]] = {
            "dataset": dataset,
            "pair_id": item["pair_id"],
            "story_title": title,
            "mode": mode,
            "status": "ok",
            "reason": None,
            "candidate": 0,
            "n_candidates": 1,
            "n_leaking": 0,
            "n_monitored_correct": None,
            "true_position": true_position,
            "arguments": arguments,
            "transcript": render_transcript(item["q_m"], options_for(item, true_position), arguments),
            "p_monitored_true": None,
            "p_hidden_true": None,
            "p_hidden_false": None,
            "leak_score": None,
        }
    frame = pl.DataFrame(list(kept.values()), schema=SELECTED_SCHEMA) if kept else pl.DataFrame(schema=SELECTED_SCHEMA)
    where = ", ".join(map(str, locations))
    write_parquet(frame.sort("pair_id"), SELECTED_SCHEMA, out, where=where)
    write_rejected(bad, rejected)
    log.info(
        "%s: %d rows -> %d %s transcripts (two answer orders per pair), %d rows rejected (%s)",
        where,
        len(rows),
        frame.height,
        mode,
        len(bad),
        rejected,
    )
    if frame.is_empty():
        raise ValueError(f"{where}: no release row matched a pair of {pairs}; see {rejected}")
    return frame
