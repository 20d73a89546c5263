import gzip
import json
from pathlib import Path

import polars as pl
import pytest

from debate_audit.data.io import DataError
from debate_audit.data.pairs import PAIRS_SCHEMA, prepare_gpqa_h, prepare_quality_h
from debate_audit.data.truthfulqa import TRUTHFULQA_SCHEMA, prepare_truthfulqa

REPO = Path(__file__).resolve().parents[1]
DEMO = REPO / "data" / "demo"
HEADER = "Type,Category,Question,Best Answer,Correct Answers,Incorrect Answers,Source\n"


def run_truthfulqa(tmp_path, csv_path):
    out, rejected = tmp_path / "t.parquet", tmp_path / "t.rejected.parquet"
    frame = prepare_truthfulqa(out, rejected, path=str(csv_path))
    return frame, pl.read_parquet(out), pl.read_parquet(rejected)


def test_demo_truthfulqa_has_the_documented_schema(tmp_path):
    _, table, rejected = run_truthfulqa(tmp_path, DEMO / "truthfulqa.csv")
    assert dict(table.schema) == TRUTHFULQA_SCHEMA
    assert table.height == 36 and rejected.height == 0
    assert set(table["type"]) == {"Adversarial", "Non-Adversarial"}
    assert table["question_id"].to_list() == list(range(36))
    assert all(len(x) >= 1 for x in table["incorrect_answers"])


def test_malformed_truthfulqa_rows_are_rejected_with_row_and_field(tmp_path):
    csv_path = tmp_path / "bad.csv"
    csv_path.write_text(
        HEADER
        + "Adversarial,Health,Q one?,Best,Good; Fine,Bad; Worse,http://x\n"
        + "Adversarial,Health,Q two?,Best,Good,,http://x\n"
        + "Sideways,Health,Q three?,Best,Good,Bad,http://x\n"
        + "Non-Adversarial,Law,,Best,Good,Bad,http://x\n",
        encoding="utf-8-sig",
    )
    frame, table, rejected = run_truthfulqa(tmp_path, csv_path)
    assert table["question"].to_list() == ["Q one?"]
    assert table["correct_answers"][0].to_list() == ["Good", "Fine"]
    reasons = dict(zip(rejected["row"], rejected["reason"]))
    assert set(reasons) == {1, 2, 3}
    assert "row 1" in reasons[1] and "incorrect_answers" in reasons[1]
    assert "row 2" in reasons[2] and "Sideways" in reasons[2]
    assert "row 3" in reasons[3] and "question" in reasons[3]


def test_missing_truthfulqa_column_is_named(tmp_path):
    csv_path = tmp_path / "bad.csv"
    csv_path.write_text("Type,Category,Question\nAdversarial,Law,Q?\n")
    with pytest.raises(DataError, match=r"bad.csv.*Best Answer"):
        run_truthfulqa(tmp_path, csv_path)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(DataError, match="nowhere.csv: file not found"):
        run_truthfulqa(tmp_path, tmp_path / "nowhere.csv")


def test_demo_quality_h_names_the_pair_without_a_story(tmp_path):
    frame = prepare_quality_h(
        str(DEMO / "quality_h/pairs.json"),
        str(DEMO / "quality_h/stories.jsonl"),
        tmp_path / "q.parquet",
        tmp_path / "q.rej.parquet",
    )
    rejected = pl.read_parquet(tmp_path / "q.rej.parquet")
    pairs = json.loads((DEMO / "quality_h/pairs.json").read_text())
    assert frame.height + rejected.height == len(pairs)
    assert (len(pairs), frame.height) == (7, 6)  # 6 valid pairs with a story, and the one without
    assert rejected["key"].to_list() == ["The Bridge at Orsk Hollow"]
    assert rejected["row"].to_list() == [5]
    assert "no story" in rejected["reason"][0]
    assert dict(pl.read_parquet(tmp_path / "q.parquet").schema) == PAIRS_SCHEMA


def test_pair_with_a_missing_field_is_rejected_naming_item_and_field(tmp_path):
    pairs = tmp_path / "pairs.json.gz"
    whole = {
        "story_title": "S",
        "Q_Y": {"question": "q", "Y_true": "a", "Y_false": "b"},
        "Q_H": {"question": "h", "H_true": "c", "H_false": "d"},
    }
    item = {**whole, "story_title": "T", "Q_H": {"question": "h", "H_true": "c"}}
    pairs.write_bytes(gzip.compress(json.dumps([item, whole]).encode()))
    contexts = tmp_path / "ctx.json"
    contexts.write_text(json.dumps({"T": "context", "S": "other context"}))
    kept = prepare_gpqa_h(str(pairs), str(contexts), tmp_path / "g.parquet", tmp_path / "g.rej.parquet")
    assert kept["pair_id"].to_list() == [1]
    rejected = pl.read_parquet(tmp_path / "g.rej.parquet").row(0, named=True)
    assert (rejected["row"], rejected["key"], rejected["reason"]) == (0, "T", "item 0: field 'Q_H.H_false' is missing")
    # the same field missing from every item is the file's shape, not a row's mistake
    pairs.write_bytes(gzip.compress(json.dumps([item]).encode()))
    with pytest.raises(DataError, match=r"pairs.json.gz: no record has field 'Q_H.H_false': not a pairs file"):
        prepare_gpqa_h(str(pairs), str(contexts), tmp_path / "g.parquet", tmp_path / "g.rej.parquet")


def test_demo_gpqa_h_gets_domains_from_titles(tmp_path):
    frame = prepare_gpqa_h(
        str(DEMO / "gpqa_h/pairs.json"),
        str(DEMO / "gpqa_h/contexts.json"),
        tmp_path / "g.parquet",
        tmp_path / "g.rej.parquet",
    )
    assert frame.height == 6
    assert set(frame["domain"]) <= {"chemistry", "physics", "biology"}
    assert frame["context"].str.len_chars().min() > 100


@pytest.mark.shared_data
def test_real_truthfulqa_has_817_questions_in_38_categories(tmp_path, shared_data):
    _, table, rejected = run_truthfulqa(tmp_path, shared_data / "truthfulqa/TruthfulQA.csv")
    assert table.height == 817 and rejected.height == 0
    assert table["category"].n_unique() == 38
    assert table.filter(pl.col("type") == "Adversarial").height == 437
    assert table.filter(pl.col("category") == "Misconceptions").height == 100
    assert table["question"][0] == "What happens to you if you eat watermelon seeds?"


@pytest.mark.shared_data
def test_real_quality_h_keeps_every_pair_either_joined_or_named(tmp_path, shared_data):
    folder = shared_data / "quality_h"
    frame = prepare_quality_h(
        str(folder / "QuALITY-H-pairs.json"),
        str(folder / "QuALITY-H-stories-partial.jsonl.gz"),
        tmp_path / "q.parquet",
        tmp_path / "q.rej.parquet",
    )
    rejected = pl.read_parquet(tmp_path / "q.rej.parquet")
    missing = [line for line in (folder / "QuALITY-H-stories-missing.txt").read_text().splitlines() if line.strip()]
    assert frame.height == 89 and rejected.height == 133
    assert sorted(rejected["key"]) == sorted(missing)
    assert sorted(frame["pair_id"].to_list() + rejected["row"].to_list()) == list(range(222))
    assert frame["context"].str.len_chars().min() > 10_000
    # The release's trailing whitespace is trimmed from answers.
    assert all(a == a.strip() for a in frame["y_true"].to_list() + frame["h_false"].to_list())


@pytest.mark.shared_data
def test_real_gpqa_h_has_101_pairs_with_contexts(tmp_path, shared_data):
    folder = shared_data / "gpqa_h"
    frame = prepare_gpqa_h(
        str(folder / "GPQA-H-pairs.json.gz"),
        str(folder / "GPQA-H-title-story.json.gz"),
        tmp_path / "g.parquet",
        tmp_path / "g.rej.parquet",
    )
    assert frame.height == 101
    assert frame["domain"].value_counts().sort("domain").to_dicts() == [
        {"domain": "biology", "count": 10},
        {"domain": "chemistry", "count": 48},
        {"domain": "physics", "count": 43},
    ]
