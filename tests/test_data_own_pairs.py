"""Your own dataset (config `datasets.own`): the real loader on the demo file and on files with bad rows."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import polars as pl
import pytest

from debate_audit.data.io import DataError
from debate_audit.data.own_pairs import prepare_own_pairs
from debate_audit.data.pairs import PAIRS_SCHEMA

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data/demo/own_pairs.jsonl"


def good(title: str = "t0", hidden: str = "Which colour was the door?") -> dict:
    return {
        "story_title": title,
        "context": f"The story of {title}.",
        "Q_Y": {"question": "Who opened the door?", "Y_true": "Ann", "Y_false": "Bob"},
        "Q_H": {"question": hidden, "H_true": "red", "H_false": "blue"},
    }


def prepare(tmp_path: Path, name: str, text: str | bytes) -> tuple[pl.DataFrame, pl.DataFrame]:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    kept = prepare_own_pairs(path, "mine", tmp_path / "mine.parquet", tmp_path / "mine.rejected.parquet")
    return kept, pl.read_parquet(tmp_path / "mine.rejected.parquet")


def test_the_demo_file_is_the_gpqa_h_demo_with_its_contexts_inline(tmp_path):
    kept = prepare_own_pairs(DEMO, "my-pairs", tmp_path / "o.parquet", tmp_path / "r.parquet")
    assert pl.read_parquet(tmp_path / "r.parquet").height == 0
    assert kept.schema == pl.Schema(PAIRS_SCHEMA) and set(kept["dataset"]) == {"my-pairs"}
    pairs = json.loads((REPO / "data/demo/gpqa_h/pairs.json").read_text())
    contexts = json.loads((REPO / "data/demo/gpqa_h/contexts.json").read_text())
    assert kept["pair_id"].to_list() == list(range(len(pairs)))
    assert kept["q_h"].to_list() == [p["Q_H"]["question"].strip() for p in pairs]
    assert kept["context"].to_list() == [contexts[p["story_title"]] for p in pairs]
    assert set(kept["domain"]) == {"physics", "chemistry", "biology"}


def test_every_bad_row_is_rejected_naming_its_field_and_value_and_the_rest_keep_their_row(tmp_path, caplog):
    rows = [
        good("t0"),
        {**good("t1"), "context": 3},  # not a string
        {**good("t2"), "Q_H": {**good()["Q_H"], "H_true": None}},  # null in a nested field
        "a pair",  # not an object
        {k: v for k, v in good("t4").items() if k != "context"},  # missing
        {**good("t5"), "Q_Y": {**good()["Q_Y"], "Y_false": " ann "}},  # true and false the same text
        {**good("t6"), "context": good("t0")["context"]},  # the item of row 0 under another title
        {**good("t7"), "Q_H": {**good()["Q_H"], "question": "  "}},  # empty
        {**good("t8"), "domain": 7},  # optional, but typed
        {**good("t9", hidden="And the window?"), "note": "kept out", "domain": None},
    ]
    text = "\n".join(json.dumps(r) for r in rows) + "\n\n{not json\n"
    with caplog.at_level(logging.WARNING):
        kept, rejected = prepare(tmp_path, "pairs.jsonl", text)
    assert kept["pair_id"].to_list() == [0, 9] and kept["story_title"].to_list() == ["t0", "t9"]
    reasons = dict(zip(rejected["row"], rejected["reason"]))
    assert reasons == {
        1: "field 'context': expected a non-empty string, got 3 (number)",
        2: "field 'Q_H.H_true': expected a non-empty string, got null (null)",
        3: 'not a JSON object: "a pair" (string)',
        4: "field 'context' is missing",
        5: reasons[5],
        6: reasons[6],
        7: "field 'Q_H.question': empty string",
        8: "field 'domain': expected a string or null, got 7 (number)",
        10: "line 12 is not valid JSON (Expecting property name enclosed in double quotes at column 2)",
    }
    assert reasons[5].startswith("Q_Y: the true and the false answer are the same text ('Ann'")
    assert reasons[6].startswith("the same item as pair 0 ('t0')")
    assert rejected.filter(pl.col("row") == 4)["key"].item() == "t4" and set(rejected["file"]) == {
        str(tmp_path / "pairs.jsonl")
    }
    # an unknown field is left out, and said
    assert "field 'note' of 1 row(s) is not a pair field; left out" in caplog.text


def test_a_json_array_gzipped_reads_as_the_same_pairs_as_json_lines(tmp_path):
    rows = [good("a"), good("b", hidden="Where was the key?")]
    lines, _ = prepare(tmp_path, "p.jsonl", "\n".join(map(json.dumps, rows)))
    array, rejected = prepare(tmp_path, "p.json.gz", gzip.compress(json.dumps(rows, indent=1).encode()))
    assert array.equals(lines) and rejected.height == 0


def test_a_file_that_is_no_pairs_file_stops_naming_it(tmp_path):
    with pytest.raises(DataError, match="one JSON object over several lines; a pairs file is a JSON array"):
        prepare(tmp_path, "one.json", json.dumps(good(), indent=1))
    with pytest.raises(DataError, match=r"no valid rows \(2 rejected, each with its reason in .*mine.rejected"):
        prepare(tmp_path, "bad.jsonl", '{"story_title": 1}\n[]\n')
    # what was rejected is written before the rule stops
    assert pl.read_parquet(tmp_path / "mine.rejected.parquet").height == 2
    with pytest.raises(DataError, match="not a JSON file"):
        prepare(tmp_path, "bin.jsonl", b"\x00\x01")
