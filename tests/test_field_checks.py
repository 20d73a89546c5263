"""Every field a loader reads is type- and value-checked: a wrong one is a rejected row naming the field and
its value (never read as the other case), a field no record has stops the rule naming the file; texts that
are one text in another Unicode form are one text."""

from __future__ import annotations

import gzip
import json
import logging

import polars as pl
import pytest

from debate_audit.data import truthfulqa
from debate_audit.data.io import DataError
from debate_audit.data.normalise import paraphrase_key, text_key
from debate_audit.data.pairs import prepare_gpqa_h, prepare_quality_h
from debate_audit.eraudit.debate.release import import_release, row_hash
from debate_audit.eraudit.debate.splits import read_release_split, split_column


def qa(title: str, y=("ja", "nein"), h=("rot", "blau"), q_m="Which?", q_h="Whose?") -> dict:
    return {
        "story_title": title,
        "Q_Y": {"question": q_m, "Y_true": y[0], "Y_false": y[1]},
        "Q_H": {"question": q_h, "H_true": h[0], "H_false": h[1]},
    }


def gpqa(tmp_path, items, contexts):
    (tmp_path / "p.json").write_text(json.dumps(items))
    (tmp_path / "c.json").write_text(json.dumps(contexts))
    kept = prepare_gpqa_h(str(tmp_path / "p.json"), str(tmp_path / "c.json"), tmp_path / "o.parquet", tmp_path / "r.pq")
    return kept, pl.read_parquet(tmp_path / "r.pq")


# ------------------------------------------------------------------------------------------------- TruthfulQA
def hub_record(**fields) -> dict:
    good = {
        "type": "Non-Adversarial",
        "category": "Weather",
        "question": "Does it rain upward?",
        "best_answer": "No",
        "correct_answers": ["No", "Never"],
        "incorrect_answers": ["Yes"],
        "source": "https://example.org",
    }
    return {**good, **fields}


def test_hub_rows_with_a_field_of_the_wrong_type_are_rejected_naming_field_and_value(tmp_path, monkeypatch):
    # The hub's rows come as the dataset wrote them: a text where a list belongs used to be split into letters.
    records = [
        hub_record(question="Kept?"),
        hub_record(type=1),
        hub_record(question=None),
        hub_record(correct_answers="No; Never"),
        hub_record(incorrect_answers=["Yes", 7]),
        hub_record(source=["https://example.org"]),
        hub_record(type="adversarial"),
    ]
    monkeypatch.setattr(truthfulqa, "records_from_hub", lambda dataset_id, revision: records)
    kept = truthfulqa.prepare_truthfulqa(tmp_path / "t.parquet", tmp_path / "r.parquet", hf_id="some/truthful_qa")
    assert kept["question"].to_list() == ["Kept?"]
    reasons = pl.read_parquet(tmp_path / "r.parquet")["reason"].to_list()
    assert [r.split(": ", 1)[1] for r in reasons] == [
        "field 'type' is int 1, not one of ['Adversarial', 'Non-Adversarial']",
        "field 'question' is null, not text",
        "field 'correct_answers' is str 'No; Never', not a list of texts",
        "field 'incorrect_answers[1]' is int 7, not text",
        "field 'source' is list ['https://example.org'], not text",
        "field 'type' is str 'adversarial', not one of ['Adversarial', 'Non-Adversarial']",
    ]


# ------------------------------------------------------------------------------------------------- pairs
def test_pair_items_with_a_field_of_the_wrong_type_are_rejected_and_the_others_keep_their_pair_id(tmp_path):
    items = [
        "a title, not an object",
        {**qa("B"), "story_title": 12},
        {**qa("C"), "Q_Y": ["question", "Y_true", "Y_false"]},
        qa("D", h=(3.5, "blau")),
        qa("E", y=("ja", "   ")),
        qa("F"),
    ]
    kept, rejected = gpqa(tmp_path, items, {t: f"text of {t}" for t in "BCDEF"})
    assert kept["pair_id"].to_list() == [5]
    assert rejected.select("row", "key", "reason").rows() == [
        (0, "null", "item 0: the item is str 'a title, not an object', not a JSON object"),
        (1, "int 12", "item 1: field 'story_title' is int 12, not text"),
        (2, "C", "item 2: field 'Q_Y' is list ['question', 'Y_true', 'Y_false'], not a JSON object"),
        (3, "D", "item 3: field 'Q_H.H_true' is float 3.5, not text"),
        (4, "E", "item 4: field 'Q_Y.Y_false' is empty"),
    ]


def test_a_story_record_of_the_wrong_type_is_rejected_and_named_by_its_pairs_rejection(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps([qa("A"), qa("B"), qa("C")]))
    lines = [
        {"story_title": "A", "article": "The story of A."},
        {"story_title": "B", "article": 404},
        {"story_title": None, "article": "a story without a title"},
        {"story_title": "Z", "article": ["no pair reads Z: not checked"]},
        {"story_title": "C", "article": "The story of C."},
    ]
    (tmp_path / "s.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    kept = prepare_quality_h(str(tmp_path / "p.json"), str(tmp_path / "s.jsonl"), tmp_path / "q.pq", tmp_path / "r.pq")
    assert kept["story_title"].to_list() == ["A", "C"]
    rejected = pl.read_parquet(tmp_path / "r.pq")
    stories = str(tmp_path / "s.jsonl")
    assert rejected.select("file", "row", "key").rows() == [
        (str(tmp_path / "p.json"), 1, "B"),
        (stories, 1, "B"),
        (stories, 2, "null"),
    ]
    assert rejected["reason"].to_list() == [
        f"no story text for this title in {stories} (its record was rejected: {stories} line 2: field 'article' "
        "is int 404, not text)",
        "line 2: field 'article' is int 404, not text",
        "line 3: field 'story_title' is null, not text",
    ]


def test_a_context_of_the_wrong_type_is_rejected_with_its_pair(tmp_path):
    kept, rejected = gpqa(
        tmp_path,
        [qa("gpqa_physics_x_1"), qa("gpqa_physics_x_2")],
        {
            "gpqa_physics_x_1": {"text": "an object, not a text"},
            "gpqa_physics_x_2": "A context.",
        },
    )
    assert kept["story_title"].to_list() == ["gpqa_physics_x_2"]
    assert rejected.select("row", "key").rows() == [(0, "gpqa_physics_x_1"), (0, "gpqa_physics_x_1")]
    assert rejected["reason"][1] == "entry 0: field 'context' is dict {'text': 'an object, not a text'}, not text"
    assert "its record was rejected" in rejected["reason"][0] and "c.json" in rejected["file"][1]


# ------------------------------------------------------------------------------------------- Unicode identity
def test_answers_equal_in_another_unicode_form_are_one_answer(tmp_path):
    # full-width letters, a ligature, a non-breaking space, a zero-width space: the same text to a reader
    items = [
        qa("A", y=("Ｏｘｙｇｅｎ", "oxygen.")),
        qa("B", h=("the ﬁrst\u00a0law", "The first law")),
        qa("C", q_m="Why\u200b did it stop?", q_h="why did it stop"),
        qa("D", y=("-1/2", "+1/2")),  # a sign is not a form: two answers
    ]
    kept, rejected = gpqa(tmp_path, items, {t: f"story {t}" for t in "ABCD"})
    assert kept["story_title"].to_list() == ["D"]
    assert [r.split(" (", 1)[0] for r in rejected["reason"]] == [
        "Q_Y: the true and the false answer are the same text",
        "Q_H: the true and the false answer are the same text",
        "the hidden question Q_H is the monitored question Q_Y",
    ]
    assert "NFKC" in rejected["reason"][0]


def test_one_key_folds_compatibility_forms_but_keeps_signs_and_symbols():
    assert text_key("  ＰＡＲＩＳ! ") == text_key("paris") == "paris"
    assert text_key("co\u00adoperate") == text_key("cooperate")  # soft hyphen: invisible
    assert text_key("ﬂuid\u2003dynamics") == "fluid dynamics"  # ligature, em space
    assert text_key("94%") != text_key("94") and text_key("x-1") != text_key("x+1")
    # the paraphrase key keeps only alphanumerics (App. D.3): the sign goes, which is why datasets do not use it
    assert paraphrase_key("x-1") == paraphrase_key("x+1")


def test_a_questions_copy_in_full_width_letters_is_rejected_as_the_same_question(tmp_path):
    header = "Type,Category,Question,Best Answer,Correct Answers,Incorrect Answers,Source\n"
    rows = "Adversarial,Law,Is it legal?,Yes,Yes,No,x\nAdversarial,Law,ＩＳ ＩＴ ＬＥＧＡＬ？,Yes,Yes,No,x\n"
    (tmp_path / "t.csv").write_text(header + rows)
    truthfulqa.prepare_truthfulqa(tmp_path / "t.parquet", tmp_path / "r.parquet", path=str(tmp_path / "t.csv"))
    reason = pl.read_parquet(tmp_path / "r.parquet")["reason"].to_list()
    assert len(reason) == 1 and "the same question as row 0" in reason[0]


def test_two_pairs_whose_titles_differ_only_in_unicode_form_stop_the_rule(tmp_path):
    with pytest.raises(DataError, match=r"items 0 and 1 have the same story_title 'ＡＢ'"):
        gpqa(tmp_path, [qa("AB", q_h="one?"), qa("ＡＢ", q_h="two?")], {"AB": "x", "ＡＢ": "y"})


# ------------------------------------------------------------------------------------- release transcripts
def release_row(title="s0", stance="Y_false", **fields) -> dict:
    turns = 'Round 1:\n\nDebater A: """a"""\n\nDebater B: """b"""'
    row = {
        "row_id": f"{title}|A=Y_true",
        "orientation": "A=Y_true",
        "story_title": title,
        "dataset_index": 0,
        "debater_stances": {"Debater A": stance, "Debater B": "Y_true" if stance == "Y_false" else "Y_false"},
        "messages": [{"role": "user", "content": f"Question: q?\n<transcript>\n{turns}\n</transcript>"}],
        "target": "Answer: B",
    }
    row.update(fields)
    return {**row, "row_sha256": row_hash(row)} if "row_sha256" not in fields else row


def run_import(tmp_path, rows):
    pl.DataFrame(
        {"pair_id": [0], "story_title": ["s0"], "q_m": ["q?"], "y_true": ["x"], "y_false": ["y"]}
    ).write_parquet(tmp_path / "pairs.parquet")
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    args = (tmp_path / "pairs.parquet", tmp_path / "sel.parquet", tmp_path / "rej.parquet")
    return import_release(tmp_path / "rows.jsonl", *args, dataset="d", mode="honest"), pl.read_parquet(args[2])


def test_a_stance_other_than_y_true_or_y_false_is_rejected_not_read_as_debater_b(tmp_path):
    # Before, any stance but "Y_true" (a typo, a boolean) made Debater B the one defending Y_true.
    rows = [
        release_row(stance="Y-true"),
        release_row(stance=True),
        release_row(debater_stances={"Debater A": "Y_false", "Debater B": "Y_false"}),
        release_row(dataset_index="0"),
        release_row(dataset_index=True),
        release_row(row_sha256=12345),
        ["not", "a", "row"],
        release_row(messages=[{"role": "user", "content": None}]),
        release_row(orientation="A=Y_false", debater_stances={"Debater A": "Y_true", "Debater B": "Y_false"}),
    ]
    kept, rejected = run_import(tmp_path, rows)
    assert kept["true_position"].to_list() == ["A"]  # the one valid row: Debater A defends Y_true
    assert rejected["row"].to_list() == list(range(8))
    assert [r.split(" (")[0].split(", not")[0] for r in rejected["reason"]] == [
        "field 'debater_stances.Debater A' is str 'Y-true'",
        "field 'debater_stances.Debater A' is bool True",
        "field 'debater_stances.Debater B' is str 'Y_false'",
        "field 'dataset_index' is str '0'",
        "field 'dataset_index' is bool True",
        "field 'row_sha256' is int 12345",
        "the row is list ['not', 'a', 'row']",
        "field 'messages[0].content' is null",
    ]


def test_a_transcript_file_in_which_no_row_has_a_needed_field_stops_naming_it(tmp_path):
    rows = [{k: v for k, v in release_row().items() if k != "debater_stances"}] * 2
    with pytest.raises(DataError, match=r"rows.jsonl: no record has field 'debater_stances'"):
        run_import(tmp_path, rows)


# ---------------------------------------------------------------------------------------------- split files
def split_file(tmp_path, name="split.json", **changes) -> str:
    data = {
        "split_seed": 7,
        "train_indices": [0, 1],
        "eval_indices": [2],
        "index_info": {str(i): {"pair_id": f"p{i}", "story_title": f"s{i}"} for i in range(3)},
    }
    data.update(changes)
    path = tmp_path / name
    text = json.dumps(data).encode()
    path.write_bytes(gzip.compress(text) if name.endswith(".gz") or "gzip" in name else text)
    return str(path)


@pytest.mark.parametrize(
    ("changes", "error"),
    [
        ({"train_indices": [0, "1"]}, r"field 'train_indices\[1\]' is str '1', not an integer"),
        ({"eval_indices": 2}, r"field 'eval_indices' is int 2, not a list"),
        (
            {"index_info": {"0": {"story_title": "s0"}, "1": {"story_title": 1}, "2": {"story_title": "s2"}}},
            r"field 'index_info.1.story_title' is int 1, not text",
        ),
        (
            {
                "index_info": {
                    "0": {"story_title": "s0", "source_dataset_index": True},
                    "1": {"story_title": "s1"},
                    "2": {"story_title": "s2"},
                }
            },
            r"field 'index_info.0.source_dataset_index' is bool True, not an integer",
        ),
        ({"split_seed": "7"}, r"field 'split_seed' is str '7', not an integer"),
        ({"train_indices": [0, 1, 1]}, r"train_indices lists pair 1 twice"),
    ],
    ids=["index as text", "indices not a list", "title a number", "index a boolean", "seed as text", "index twice"],
)
def test_a_split_file_field_of_the_wrong_type_stops_the_split_naming_file_field_and_value(tmp_path, changes, error):
    with pytest.raises(DataError, match=r"split.json: " + error):
        read_release_split(split_file(tmp_path, **changes))


def test_a_gzip_split_file_is_read_whatever_its_name(tmp_path):
    # the opener used to follow the suffix: a gzip file not named .gz failed as a decoding error
    assert read_release_split(split_file(tmp_path, "split-gzip.json"))["train"] == {0: "s0", 1: "s1"}


def test_a_debate_mode_other_than_honest_or_adversarial_has_no_split_column():
    assert split_column("adversarial") == "split_adversarial" and split_column("honest") == "split"
    with pytest.raises(ValueError, match="debate mode 'adversarail' is not one of"):
        split_column("adversarail")


def test_rejections_are_logged_with_their_file(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        gpqa(tmp_path, [qa("A", y=(1, "b")), qa("B")], {"A": "x", "B": "y"})
    assert "p.json row 0 'A' rejected: item 0: field 'Q_Y.Y_true' is int 1, not text" in caplog.text
