"""Every bad input and bad config we know of, each with the named error or the rejected row it must give.

Three tables: dataset files through the loaders, config mistakes through the start-up check, and the
cases that need the workflow itself (`snakemake -n` or one data rule in a scratch copy of the project).
"""

from __future__ import annotations

import copy
import gzip
import json
import logging
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import polars as pl
import pytest
import yaml

from debate_audit.cwpor.questions import falsehood_index, select_questions
from debate_audit.data.io import DataError, read_text, write_parquet
from debate_audit.data.pairs import prepare_gpqa_h, prepare_quality_h
from debate_audit.data.truthfulqa import prepare_truthfulqa
from debate_audit.eraudit.audit.runtime import runtime_table
from debate_audit.eraudit.debate.release import import_release, row_hash
from debate_audit.tools.config_check import config_errors, used_models

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
SCHEMA = REPO / "config/schema.yaml"
HEADER = "Type,Category,Question,Best Answer,Correct Answers,Incorrect Answers,Source\n"
GOOD_ROW = "Adversarial,Health,Q ok?,Best,Good; Fine,Bad; Worse,http://x\n"


# ------------------------------------------------------------------------------------ dataset files
def pair(title="T", y=("yes", "no"), h=("red", "blue")):
    return {
        "story_title": title,
        "Q_Y": {"question": "q?", "Y_true": y[0], "Y_false": y[1]},
        "Q_H": {"question": "h?", "H_true": h[0], "H_false": h[1]},
    }


def run_tqa(tmp_path, content: bytes | str, name="t.csv"):
    src = tmp_path / name
    src.write_bytes(content.encode() if isinstance(content, str) else content)
    prepare_truthfulqa(tmp_path / "t.parquet", tmp_path / "t.rej.parquet", path=str(src))
    return pl.read_parquet(tmp_path / "t.parquet"), pl.read_parquet(tmp_path / "t.rej.parquet")


def run_gpqa(tmp_path, items, contexts=None, raw: bytes | None = None, raw_contexts: str | None = None):
    pairs = tmp_path / "pairs.json"
    pairs.write_bytes(raw if raw is not None else json.dumps(items).encode())
    ctx = tmp_path / "ctx.json"
    ctx.write_text(
        raw_contexts or json.dumps(contexts if contexts is not None else {p["story_title"]: "context" for p in items})
    )
    prepare_gpqa_h(str(pairs), str(ctx), tmp_path / "g.parquet", tmp_path / "g.rej.parquet")
    return pl.read_parquet(tmp_path / "g.parquet"), pl.read_parquet(tmp_path / "g.rej.parquet")


# (id, csv text, rejected row, words its reason must contain); every case also has one good row kept.
TRUTHFULQA_REJECTED = [
    ("row cut short", HEADER + GOOD_ROW + "Adversarial,Health,Q short?,Best,Good\n", 1, ["5 fields", "header has 7"]),
    (
        "unquoted comma",
        HEADER + GOOD_ROW + "Adversarial,Health,Q, comma?,Best,Good,Bad,http://x\n",
        1,
        ["8 fields", "line 3"],
    ),
    ("empty best answer", HEADER + GOOD_ROW + "Adversarial,Health,Q?,,Good,Bad,http://x\n", 1, ["best_answer"]),
    ("empty category", HEADER + "Adversarial,,Q?,Best,Good,Bad,http://x\n" + GOOD_ROW, 0, ["category"]),
    (
        "no incorrect answers",
        HEADER + GOOD_ROW + "Adversarial,Health,Q?,Best,Good,;,http://x\n",
        1,
        ["incorrect_answers"],
    ),
    ("unknown type", HEADER + GOOD_ROW + "Sideways,Health,Q?,Best,Good,Bad,http://x\n", 1, ["Sideways"]),
    # rows that contradict themselves or repeat another (compared without whitespace, case, trailing . , ; : ! ?)
    (
        "best answer also incorrect",
        HEADER + GOOD_ROW + "Adversarial,Health,Q2?,Cats purr.,Cats purr,Cats bark; CATS  purr!,x\n",
        1,
        ["best_answer 'Cats purr.' is also among incorrect_answers"],
    ),
    (
        "every falsehood also correct",
        HEADER + "Adversarial,Law,Q2?,Yes,Yes; Maybe; Perhaps,maybe; perhaps!,x\n" + GOOD_ROW,
        0,
        ["every incorrect answer is also a correct answer"],
    ),
    (
        "same question twice",
        HEADER + GOOD_ROW + "Adversarial,Health,q  OK,Best,Good; Fine,Bad; Worse,http://x\n",
        1,
        ["the same question as row 0", "first valid row of a question is kept"],
    ),
    (
        "same question, other answers",
        HEADER + GOOD_ROW + "Non-Adversarial,Law,Q ok?,Other,Other,Bad,http://y\n",
        1,
        ["the same question as row 0", "answers differ"],
    ),
    (
        "first copy invalid, the valid copy kept",
        HEADER + "Adversarial,Health,Q ok?,,Good,Bad,x\n" + GOOD_ROW,
        0,
        ["best_answer"],
    ),
]


@pytest.mark.parametrize(
    ("content", "row", "words"), [c[1:] for c in TRUTHFULQA_REJECTED], ids=[c[0] for c in TRUTHFULQA_REJECTED]
)
def test_truthfulqa_bad_row_is_rejected_with_file_row_and_reason(tmp_path, content, row, words):
    table, rejected = run_tqa(tmp_path, content)
    assert table["question"].to_list() == ["Q ok?"]
    assert rejected["row"].to_list() == [row]
    assert rejected["file"][0].endswith("t.csv")
    assert all(w in rejected["reason"][0] for w in words), rejected["reason"][0]
    assert f"row {row}" in rejected["reason"][0]


def test_truthfulqa_answer_listed_correct_and_incorrect_is_kept_but_never_defended(tmp_path, caplog):
    # As the real release's rows 347 and 354 ("Unknown" on both lists): the row stays, the answer is
    # never the persuasive agent's falsehood, and every other question keeps the falsehood it had.
    rows = "".join(
        f"Adversarial,Health,Q{i}?,Best {i},Best {i}; Unknown,Bad {i}; unknown.; Worse {i}; Wrong {i},x\n"
        for i in range(40)
    )
    with caplog.at_level(logging.WARNING):
        table, rejected = run_tqa(tmp_path, HEADER + rows)
    assert table.height == 40 and rejected.height == 0
    assert table["contested_answers"].to_list() == [["unknown."]] * 40
    assert "row 3: ['unknown.'] listed as correct and as incorrect" in caplog.text
    first_draws = [falsehood_index(q, 4, seed=7) for q in range(40)]
    assert 1 in first_draws  # the case at stake occurs: some first draw is the contested answer
    questions = select_questions(tmp_path / "t.parquet", tmp_path / "q.parquet", subset=None, seed=7)
    assert "unknown." not in questions["falsehood"].to_list()
    picks = questions["falsehood_index"].to_list()
    assert [p for p, d in zip(picks, first_draws) if d != 1] == [d for d in first_draws if d != 1]
    assert set(picks) == {0, 2, 3}


def test_truthfulqa_empty_source_is_named_but_the_question_kept(tmp_path, caplog):
    # The real release leaves `source` empty on rows 582 and 602; the papers use all 817 questions.
    with caplog.at_level(logging.WARNING):
        table, rejected = run_tqa(tmp_path, HEADER + GOOD_ROW + "Adversarial,Health,Q2?,Best,Good,Bad,\n")
    assert table.height == 2 and rejected.height == 0
    assert table["source"].to_list() == ["http://x", None]
    assert "row 1: empty field 'source'" in caplog.text


def test_truthfulqa_release_without_source_column_is_read(tmp_path):
    table, _ = run_tqa(tmp_path, HEADER.replace(",Source", "") + GOOD_ROW.replace(",http://x", ""))
    assert table["source"].to_list() == [None]


# (id, file name, content, error the loader must raise)
TRUTHFULQA_ERRORS = [
    ("binary file", "t.csv", b"PAR1\x00\x01\x02\x00binary", r"t.csv: not a CSV file"),
    ("not UTF-8", "t.csv", b"\xff\xfe\xc0 latin", r"t.csv: not a CSV file \(not UTF-8"),
    ("not a TruthfulQA CSV", "t.csv", "a,b\n1,2\n", r"t.csv: not a TruthfulQA CSV file: missing column"),
    ("empty file", "t.csv", "", r"t.csv: not a CSV file \(no header row\)"),
    ("corrupt gzip", "t.csv.gz", b"\x1f\x8b\x08\x00garbage", r"t.csv.gz: starts like gzip but does not decompress"),
    (
        "every row rejected",
        "t.csv",
        HEADER + "Adversarial,Health,Q?,,Good,Bad,x\n",
        r"t.csv: no valid rows \(1 rejected, each with its reason in .*t.rej.parquet\)",
    ),
]


@pytest.mark.parametrize(
    ("name", "content", "error"), [c[1:] for c in TRUTHFULQA_ERRORS], ids=[c[0] for c in TRUTHFULQA_ERRORS]
)
def test_truthfulqa_bad_file_fails_naming_it(tmp_path, name, content, error):
    with pytest.raises(DataError, match=error):
        run_tqa(tmp_path, content, name)


def test_every_row_rejected_still_writes_the_rejected_file(tmp_path):
    with pytest.raises(DataError, match="no valid rows"):
        run_tqa(tmp_path, HEADER + "Adversarial,Health,Q?,,Good,Bad,x\n")
    assert pl.read_parquet(tmp_path / "t.rej.parquet")["row"].to_list() == [0]
    assert not (tmp_path / "t.parquet").exists()


def test_gz_name_without_gzip_content_is_read_and_logged(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        table, _ = run_tqa(tmp_path, HEADER + GOOD_ROW, "t.csv.gz")
    assert table.height == 1
    assert "t.csv.gz: named .gz but not gzip-compressed" in caplog.text


# (id, location, error): locations the loaders refuse before reading anything
LOCATION_ERRORS = [
    ("file URL", "file:///tmp/t.csv", r"file:// URLs are not supported; give the local path itself \('/tmp/t.csv'\)"),
    ("ftp URL", "ftp://example.org/t.csv", r"URL scheme 'ftp' is not supported"),
    ("s3 URL", "s3://bucket/t.csv", r"URL scheme 's3' is not supported"),
    ("missing file", "{tmp}/nowhere.csv", r"nowhere.csv: file not found"),
    ("a directory", "{tmp}", r": is a directory, not a file"),
]


@pytest.mark.parametrize(("location", "error"), [c[1:] for c in LOCATION_ERRORS], ids=[c[0] for c in LOCATION_ERRORS])
def test_unreadable_location_is_named(tmp_path, location, error):
    with pytest.raises(DataError, match=error):
        read_text(location.format(tmp=tmp_path))


# (id, items, rejected rows, words of the reason)
PAIRS_REJECTED = [
    ("Y_true == Y_false", [pair("A"), pair("B", y=("Paris ", "  paris"))], [1], ["Q_Y", "same text"]),
    ("H_true == H_false", [pair("A", h=("The  Red", "the red")), pair("B")], [0], ["Q_H", "same text"]),
    ("no context", [pair("A"), pair("B")], [1], ["no context for this title"]),
    (
        "Q_H is Q_Y",
        [pair("A"), {**pair("B"), "Q_H": {"question": " Q? ", "H_true": "red", "H_false": "blue"}}],
        [1],
        ["hidden question Q_H is the monitored question Q_Y"],
    ),
    (
        "same item, other title",
        [pair("A", h=("red", "blue")), pair("B"), pair("A (copy)", h=("Red.", "blue"))],
        [2],
        ["the same item as pair 0 ('A')"],
    ),
]


@pytest.mark.parametrize(
    ("items", "rows", "words"), [c[1:] for c in PAIRS_REJECTED], ids=[c[0] for c in PAIRS_REJECTED]
)
def test_pair_that_cannot_be_right_is_rejected_with_its_reason(tmp_path, items, rows, words):
    contexts = (
        {"A": "story A"} if "no context" in words[0] else {p["story_title"]: f"story {p['story_title']}" for p in items}
    )
    if "same item" in words[0]:
        contexts["A (copy)"] = "Story  A"  # the same text as A's (whitespace and case aside)
    table, rejected = run_gpqa(tmp_path, items, contexts)
    assert rejected["row"].to_list() == rows
    assert table.height == len(items) - len(rows)
    assert all(w in rejected["reason"][0] for w in words), rejected["reason"][0]
    assert rejected["file"][0].endswith("pairs.json")


# (id, items or raw bytes, error)
PAIRS_ERRORS = [
    ("duplicate story_title", [pair("A"), pair("B"), pair("A")], r"items 0 and 2 have the same story_title 'A'"),
    ("every pair rejected", [pair("A", y=("x", "X"))], r"pairs.json: no valid rows \(1 rejected, .*g.rej.parquet\)"),
    (
        "a field no item has",
        [{"story_title": "A", "Q_Y": {"question": "q"}}],
        r"pairs.json: no record has field 'Q_Y.Y_true': not a pairs file",
    ),
    ("not an array", {"a": 1}, r"expected a JSON array of pairs"),
    ("truncated JSON", b'[{"story_title": "A"', r"pairs.json: not valid JSON"),
    ("binary", b"\x00\x01\x02", r"pairs.json: not a JSON file \(binary content\)"),
]


@pytest.mark.parametrize(("items", "error"), [c[1:] for c in PAIRS_ERRORS], ids=[c[0] for c in PAIRS_ERRORS])
def test_bad_pairs_file_fails_naming_file_and_items(tmp_path, items, error):
    raw = items if isinstance(items, bytes) else None
    with pytest.raises(DataError, match=error):
        run_gpqa(tmp_path, [] if raw else items, {}, raw=raw)


# (id, stories file name, content, error)
STORIES_ERRORS = [
    ("bad JSON line", "s.jsonl", '{"story_title": "A", "article": "x"}\n{oops\n', r"s.jsonl: line 2 is not valid JSON"),
    ("no record has an article", "s.jsonl", '{"story_title": "A"}\n', r"s.jsonl: no record has field 'article'"),
    ("not a zip", "s.zip", "plain text", r"s.zip: not a zip file"),
]


@pytest.mark.parametrize(
    ("name", "content", "error"), [c[1:] for c in STORIES_ERRORS], ids=[c[0] for c in STORIES_ERRORS]
)
def test_bad_stories_file_fails_naming_it(tmp_path, name, content, error):
    pairs = tmp_path / "pairs.json.gz"
    pairs.write_bytes(gzip.compress(json.dumps([pair("A")]).encode()))
    (tmp_path / name).write_text(content)
    with pytest.raises(DataError, match=error):
        prepare_quality_h(str(pairs), str(tmp_path / name), tmp_path / "q.parquet", tmp_path / "q.rej.parquet")


def story(title, text):
    return json.dumps({"story_title": title, "article": text}) + "\n"


def release_zip(path, members: dict[str, list[tuple[str, str]]]) -> None:
    """A zip shaped like QuALITY's release: htmlstripped JSON lines members of {title, article} records."""
    with zipfile.ZipFile(path, "w") as archive:
        for member, records in members.items():
            archive.writestr(member, "".join(json.dumps({"title": t, "article": a}) + "\n" for t, a in records))


# (id, stories file name, how to write it, the error naming the title and both places, or (None and) what the
# log must say when the run goes on with the one text of pair A)
STORIES_REPEATED = [
    (
        "two texts in a JSONL file",
        "s.jsonl",
        lambda p: p.write_text(story("A", "one text") + story("B", "b") + "\n" + story("A", "another text")),
        r"s.jsonl: story_title 'A' has two different texts, at line 1 and line 4",
        None,
    ),
    (
        "two texts in the release zip",
        "s.zip",
        lambda p: release_zip(
            p,
            {
                "QuALITY.v1.0.1.htmlstripped.train": [("B", "b"), ("A", "one")],
                "QuALITY.v1.0.1.htmlstripped.dev": [("A", "two")],
            },
        ),
        r"s.zip: story_title 'A' has two different texts, at QuALITY.v1.0.1.htmlstripped.train line 2 and "
        r"QuALITY.v1.0.1.htmlstripped.dev line 1",
        None,
    ),
    (
        "same text twice in a JSONL file",
        "s.jsonl",
        lambda p: p.write_text(story("A", "one") + "\n" + story("A", "one")),
        None,
        "s.jsonl: story_title 'A' at line 1 and line 3 with the same text; used once",
    ),
    # QuALITY's release repeats every article once per question set: counted, not warned about one by one
    (
        "same text twice in the release zip",
        "s.zip",
        lambda p: release_zip(p, {"QuALITY.v1.0.1.htmlstripped.train": [("A", "one"), ("A", "one")]}),
        None,
        "s.zip: 1 repeated records with the same text as an earlier one of their title, each used once",
    ),
    (
        "two texts of a title no pair uses",
        "s.jsonl",
        lambda p: p.write_text(story("A", "one") + story("Z", "z1") + story("Z", "z2")),
        None,
        "",
    ),
]


@pytest.mark.parametrize(
    ("name", "write", "error", "said"), [c[1:] for c in STORIES_REPEATED], ids=[c[0] for c in STORIES_REPEATED]
)
def test_a_title_with_two_stories_fails_and_a_repeated_story_is_used_once(tmp_path, caplog, name, write, error, said):
    pairs = tmp_path / "pairs.json"
    pairs.write_text(json.dumps([pair("A")]))
    write(tmp_path / name)
    args = (str(pairs), str(tmp_path / name), tmp_path / "q.parquet", tmp_path / "q.rej.parquet")
    if error:
        with pytest.raises(DataError, match=error):
            prepare_quality_h(*args)
        return
    with caplog.at_level(logging.INFO):
        assert prepare_quality_h(*args)["context"].to_list() == ["one"]
    assert said in caplog.text


# (id, GPQA-H contexts file text, the error; None: the run goes on with the one text)
CONTEXTS_REPEATED = [
    (
        "two texts for one title",
        '{"A": "one", "B": "b", "A": "two"}',
        r"ctx.json: title 'A' has two different texts, at entry 0 and entry 2",
    ),
    ("same text twice", '{"A": "one", "A": "one"}', None),
]


@pytest.mark.parametrize(("text", "error"), [c[1:] for c in CONTEXTS_REPEATED], ids=[c[0] for c in CONTEXTS_REPEATED])
def test_a_repeated_title_in_a_contexts_object_is_not_resolved_silently(tmp_path, caplog, text, error):
    if error:
        with pytest.raises(DataError, match=error):
            run_gpqa(tmp_path, [pair("A")], raw_contexts=text)
        return
    with caplog.at_level(logging.WARNING):
        table, _ = run_gpqa(tmp_path, [pair("A")], raw_contexts=text)
    assert table["context"].to_list() == ["one"]
    assert "title 'A' at entry 0 and entry 1 with the same text; used once" in caplog.text


def release_row(title="s0", order="A=Y_true", debater_a="Y_false", turns=("a", "b")) -> dict:
    """A row shaped like the ER-Audit release's verifier rows: one pair in one answer order."""
    transcript = "\n".join(f'Debater {d}: """{t}"""' for d, t in zip("AB", turns))
    row = {
        "row_id": f"{title}|{order}",
        "orientation": order,
        "story_title": title,
        "debater_stances": {"Debater A": debater_a, "Debater B": "Y_true" if debater_a == "Y_false" else "Y_false"},
        "messages": [{"role": "user", "content": f"Question: q?\n<transcript>\n{transcript}\n</transcript>"}],
        "target": "Answer: A",
    }
    return {**row, "row_sha256": row_hash(row)}


# (id, the release's rows (one file, or a list of files), rejected (file index, row), words of the reason)
RELEASE_REJECTED = [
    ("both answer orders of a pair", [[release_row(), release_row(order="A=Y_false")]], [], []),
    (
        "a row twice in one file",
        [[release_row(), release_row(order="A=Y_false"), release_row()]],
        [(0, 2)],
        ["the same pair and answer order as", "rows.0.jsonl row 0", "repeated row"],
    ),
    (
        "a pair in the train and the eval file",
        [[release_row()], [release_row()]],
        [(1, 0)],
        ["the same pair and answer order as", "rows.0.jsonl row 0"],
    ),
    (
        "answer orders that disagree on who defends Y_true",
        [[release_row(), release_row(order="A=Y_false", debater_a="Y_true")]],
        [(0, 1)],
        ["other answer order has Debater B defend Y_true, this row Debater A", "contradict each other"],
    ),
]


@pytest.mark.parametrize(
    ("files", "rejected", "words"), [c[1:] for c in RELEASE_REJECTED], ids=[c[0] for c in RELEASE_REJECTED]
)
def test_release_row_that_repeats_or_contradicts_its_pair_is_rejected(tmp_path, files, rejected, words):
    pl.DataFrame(
        {"pair_id": [0], "story_title": ["s0"], "q_m": ["q?"], "y_true": ["x"], "y_false": ["y"]}
    ).write_parquet(tmp_path / "pairs.parquet")
    locations = []
    for n, rows in enumerate(files):
        locations.append(tmp_path / f"rows.{n}.jsonl")
        locations[-1].write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = import_release(
        locations,
        tmp_path / "pairs.parquet",
        tmp_path / "sel.parquet",
        tmp_path / "rej.parquet",
        dataset="d",
        mode="honest",
    )
    assert out["true_position"].to_list() == ["B"]  # the first row's stances
    found = pl.read_parquet(tmp_path / "rej.parquet")
    assert [(int(Path(f).name.split(".")[1]), r) for f, r in found.select("file", "row").iter_rows()] == rejected
    assert all(w in found["reason"][0] for w in words), found["reason"].to_list()


# The real releases keep every row they kept before these checks (measured before and after: the same
# tables, the same rejected rows); what the checks find in them is named here.
@pytest.mark.shared_data
@pytest.mark.parametrize("name", ["TruthfulQA.csv", "TruthfulQA_v0.csv"])
def test_real_truthfulqa_keeps_all_817_rows_and_never_defends_its_two_contested_answers(tmp_path, shared_data, name):
    table, rejected = run_tqa(tmp_path, (shared_data / "truthfulqa" / name).read_bytes())
    assert table.height == 817 and rejected.height == 0
    contested = table.filter(pl.col("contested_answers").list.len() > 0)
    assert contested.select("question_id", "contested_answers").rows() == [(347, ["Unknown"]), (354, ["Unknown"])]
    for seed in range(20):  # seed 1 drew "Unknown" for question 347 before
        questions = select_questions(tmp_path / "t.parquet", tmp_path / "q.parquet", subset=None, seed=seed)
        assert "Unknown" not in questions.filter(pl.col("question_id").is_in([347, 354]))["falsehood"].to_list()


@pytest.mark.shared_data
def test_real_er_audit_pairs_keep_every_pair(tmp_path, shared_data):
    quality = shared_data / "quality_h/QuALITY-H-pairs.json"
    kept = prepare_quality_h(
        str(quality),
        str(shared_data / "quality_h/QuALITY-H-stories-partial.jsonl.gz"),
        tmp_path / "q.parquet",
        tmp_path / "q.rej.parquet",
    )
    rejected = pl.read_parquet(tmp_path / "q.rej.parquet")
    assert kept.height == 89 and rejected.height == 133
    assert all(reason.startswith("no story text for this title") for reason in rejected["reason"])
    # With a story for every title (as with QuALITY's own zip) no pair-level check rejects any of the 222.
    stories = tmp_path / "stories.jsonl"
    stories.write_text(
        "".join(
            story(item["story_title"], f"The story of {item['story_title']}.")
            for item in json.loads(quality.read_text())
        )
    )
    assert (
        prepare_quality_h(str(quality), str(stories), tmp_path / "q.parquet", tmp_path / "q.rej.parquet").height == 222
    )
    gpqa = prepare_gpqa_h(
        str(shared_data / "gpqa_h/GPQA-H-pairs.json.gz"),
        str(shared_data / "gpqa_h/GPQA-H-title-story.json.gz"),
        tmp_path / "g.parquet",
        tmp_path / "g.rej.parquet",
    )
    assert gpqa.height == 101 and pl.read_parquet(tmp_path / "g.rej.parquet").height == 0


@pytest.mark.shared_data
@pytest.mark.parametrize(
    ("mode", "files", "pairs"),
    [
        ("honest", ["GPQA-verifier-fullft-train.jsonl.gz", "GPQA-verifier-fullft-eval.jsonl.gz"], 101),
        (
            "adversarial",
            ["GPQA-verifier-fullft-adversarial-train.jsonl.gz", "GPQA-verifier-fullft-adversarial-eval.jsonl.gz"],
            83,
        ),
    ],
)
def test_real_release_rows_import_once_and_a_file_given_twice_is_named(tmp_path, shared_data, mode, files, pairs):
    prepare_gpqa_h(
        str(shared_data / "gpqa_h/GPQA-H-pairs.json.gz"),
        str(shared_data / "gpqa_h/GPQA-H-title-story.json.gz"),
        tmp_path / "gpqa_h.parquet",
        tmp_path / "gpqa_h.rej.parquet",
    )
    locations = [shared_data / "er_audit_release" / f for f in files]
    args = (tmp_path / "gpqa_h.parquet", tmp_path / "sel.parquet", tmp_path / "rej.parquet")
    assert import_release(locations, *args, dataset="gpqa_h", mode=mode).height == pairs  # train + eval: no pair twice
    assert pl.read_parquet(tmp_path / "rej.parquet").height == 0
    import_release([locations[1], locations[1]], *args, dataset="gpqa_h", mode=mode)
    rejected = pl.read_parquet(tmp_path / "rej.parquet")
    assert rejected.height == 2 * (pairs - (80 if mode == "honest" else 66))  # every row of the second copy
    assert rejected["reason"].str.contains("a repeated row").all()


def test_directory_where_an_output_should_be_is_named(tmp_path):
    (tmp_path / "out.parquet").mkdir()
    with pytest.raises(DataError, match=r"out.parquet: a directory is where this output file should be"):
        write_parquet(pl.DataFrame({"a": [1]}), {"a": pl.Int64}, tmp_path / "out.parquet")


def test_runtime_table_reads_only_the_given_benchmark_files(tmp_path):
    bench = tmp_path / "benchmarks/rules"
    for job in ("audit/scores_x_base", "audit/scores_stale_base"):
        (bench / job).parent.mkdir(parents=True, exist_ok=True)
        (bench / f"{job}.tsv").write_text("s\th:m:s\tmax_rss\n12.5\t0:00:12\t100\n")
    jobs = runtime_table(
        benchmarks=bench,
        markdown=tmp_path / "t.md",
        csv=tmp_path / "t.csv",
        parquet=tmp_path / "t.parquet",
        files=[bench / "audit/scores_x_base.tsv"],
    )
    assert jobs["job"].to_list() == ["audit/scores_x_base"]
    assert "stale" not in (tmp_path / "t.md").read_text()


# ------------------------------------------------------------------------------------ config mistakes
BASE = yaml.safe_load((REPO / "config/config.yaml").read_text())
OPENAI = {"source": "openai", "id": "served"}
# an audit of a model you bring: the embedded model against a second entry of it (config_errors checks names)
BROUGHT = {"base": "smollm2-135m", "targets": ["smollm2-135m-v"], "datasets": ["gpqa_h"]}
BROUGHT_MODEL = {"models/smollm2-135m-v": BASE["models"]["smollm2-135m"]}


def with_changes(changes: dict) -> dict:
    """The default config with dotted keys set (a value of DROP deletes the key)."""
    config = copy.deepcopy(BASE)
    for dotted, value in changes.items():
        *parents, last = dotted.split("/")
        node = config
        for key in parents:
            node = node.setdefault(key, {})
        if value is DROP:
            node.pop(last, None)
        else:
            node[last] = value
    return config


DROP = object()
M = "models/smollm2-135m"
# (id, changes (keys separated by '/'), the error that must be reported: its key, then a part of the message)
CONFIG_ERRORS = [
    (
        "epsilon and percentile both null",
        {"audit/epsilon": None},
        "audit.epsilon / audit.epsilon_percentile: set exactly one",
    ),
    (
        "epsilon and percentile both set",
        {"audit/epsilon_percentile": 25},
        "audit.epsilon / audit.epsilon_percentile: set exactly one",
    ),
    ("negative epsilon", {"audit/epsilon": -0.5}, "audit.epsilon: -0.5 must be >= 0"),
    (
        "undefined CW-POR model",
        {"cwpor/models": ["nope"]},
        "cwpor.models[0]: model 'nope' is not defined under 'models:'",
    ),
    ("undefined judge", {"cwpor/judge_model": "nope"}, "cwpor.judge_model: model 'nope' is not defined"),
    ("undefined neutral", {"cwpor/neutral_model": "nope"}, "cwpor.neutral_model: model 'nope' is not defined"),
    (
        "price of an undefined model",
        {"prices": {"gpt-7-nova": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}},
        "prices.gpt-7-nova: model 'gpt-7-nova' is not defined under 'models:'",
    ),
    ("undefined persuasive", {"cwpor/persuasive_model": "nope"}, "cwpor.persuasive_model: model 'nope' is not defined"),
    ("undefined debater", {"debate/debater": "nope"}, "debate.debater: model 'nope' is not defined"),
    ("undefined verifier base", {"verifier/base_model": "nope"}, "verifier.base_model: model 'nope' is not defined"),
    (
        "undefined architecture",
        {"verifier/base_models": ["smollm2-135m", "nope"]},
        "verifier.base_models[1]: model 'nope' is not defined",
    ),
    (
        "no architecture",
        {"verifier/base_models": DROP},
        "verifier.base_models: name at least one verifier architecture",
    ),
    (
        "repeated architecture",
        {"verifier/base_models": ["smollm2-135m", "smollm2-135m"]},
        "verifier.base_models: ['smollm2-135m', 'smollm2-135m'] has non-unique elements",
    ),
    ("undefined selector", {"debate/selector": "nope"}, "debate.selector: model 'nope' is not defined"),
    (
        "zero word limit in a sweep",
        {"debate/word_limit": [50, 0]},
        "debate.word_limit: [50, 0] is not valid under any of the given schemas",
    ),
    (
        "negative qh weight in a sweep",
        {"verifier/loss_weights/qh": [1.0, -2.0]},
        "verifier.loss_weights.qh: [1.0, -2.0] is not valid under any of the given schemas",
    ),
    (
        "LoRA for no architecture of the run",
        {"verifier/lora/enabled": ["smollm2-135m", "gpt-x"]},
        "verifier.lora.enabled[1]: verifier architecture 'gpt-x' is not defined under verifier.base_models",
    ),
    (
        "LoRA given as text",
        {"verifier/lora/enabled": "yes"},
        "verifier.lora.enabled: 'yes' is not valid under any of the given schemas",
    ),
    (
        "unknown L_lm target",
        {"verifier/lm_target": "reason"},
        "verifier.lm_target: 'reason' is not one of ['adjudication', 'argument']",
    ),
    (
        "q_h-only rows need the bare readout",
        {"verifier/qh_readout": "transcript"},
        "verifier.org_training.qh_items: train trains L_qh on pairs without a transcript, so it needs verifier.qh_readout: bare",
    ),
    (
        "unknown V_org q_h items",
        {"verifier/org_training/qh_items": "all"},
        "verifier.org_training.qh_items: 'all' is not one of",
    ),
    (
        "undefined search generator",
        {"paraphrase/search/generator": "nope"},
        "paraphrase.search.generator: model 'nope' is not defined",
    ),
    (
        "undefined test generator",
        {"paraphrase/test/generators/gen-b/model": "nope"},
        "paraphrase.test.generators.gen-b.model: model 'nope'",
    ),
    (
        "device gpu",
        {f"{M}/device": "gpu"},
        "models.smollm2-135m.device: 'gpu' is not a device; use auto, cpu, cuda or cuda:N",
    ),
    ("device cuda:x", {f"{M}/device": "cuda:x"}, "models.smollm2-135m.device: 'cuda:x' is not a device"),
    ("batch size 0", {f"{M}/batch_size": 0}, "models.smollm2-135m.batch_size: 0 must be a positive integer or 'auto'"),
    (
        "batch size text",
        {f"{M}/batch_size": "big"},
        "models.smollm2-135m.batch_size: 'big' must be a positive integer or 'auto'",
    ),
    (
        "batch size float",
        {f"{M}/batch_size": 2.5},
        "models.smollm2-135m.batch_size: 2.5 must be a positive integer or 'auto'",
    ),
    (
        "schema type named",
        {"cluster/runtime/min_minutes": "lots"},
        "cluster.runtime.min_minutes: 'lots' is not of type 'integer'",
    ),
    (
        "openai without base_url",
        {"models/srv": OPENAI, "cwpor/judge_model": "srv"},
        "models.srv.base_url: source 'openai' needs the server's URL",
    ),
    (
        "provider model without key variable",
        {"models/srv": {**OPENAI, "provider": "openai", "base_url": "http://h/v1"}, "cwpor/judge_model": "srv"},
        "models.srv.api_key_env: a provider model (openai) needs the name of the variable holding its key",
    ),
    (
        "openai judge with a reply prefilled slot by slot",
        {"models/srv": {**OPENAI, "base_url": "http://h/v1", "api_key_env": "K"}, "cwpor/judge_model": "srv"},
        "cwpor.judge_template: 'v4' prefills the judge's reply slot by slot, which a chat endpoint cannot continue",
    ),
    (
        "endpoint without log-probabilities scoring answers",
        {
            "models/srv": {**OPENAI, "base_url": "http://h/v1", "api_key_env": "K", "logprobs": False},
            "verifier/base_model": "srv",
        },
        "verifier.base_model: model 'srv' cannot score answers, which needs log-probabilities: models.srv.logprobs "
        "is false",
    ),
    (
        "scoring on a server without one",
        {f"{M}/scoring_backend": "server"},
        "models.smollm2-135m.scoring_backend: 'server' scores on the model's generation server",
    ),
    (
        "openai base_url not http",
        {"models/srv": {**OPENAI, "base_url": "ftp://h/v1", "api_key_env": "K"}, "cwpor/judge_model": "srv"},
        "models.srv.base_url: 'ftp://h/v1' needs an http:// or https:// URL, not scheme 'ftp'",
    ),
    (
        "local model without directory",
        {"models/loc": {"source": "local", "path": "/nonexistent/m"}, "debate/debater": "loc"},
        "models.loc.path: /nonexistent/m: no such directory",
    ),
    (
        "truthfulqa path and hf_id",
        {"datasets/truthfulqa/hf_id": "truthfulqa/truthful_qa"},
        "datasets.truthfulqa: give exactly one of 'path'",
    ),
    ("truthfulqa neither", {"datasets/truthfulqa/path": None}, "datasets.truthfulqa: give exactly one of 'path'"),
    (
        "file URL",
        {"datasets/truthfulqa/path": "file:///data/t.csv"},
        "datasets.truthfulqa.path: file:///data/t.csv: file:// URLs are not supported",
    ),
    (
        "s3 URL",
        {"datasets/quality_h/pairs": "s3://bucket/p.json"},
        "datasets.quality_h.pairs: s3://bucket/p.json: URL scheme 's3' is not supported",
    ),
    (
        "missing local file",
        {"datasets/gpqa_h/contexts": "data/nowhere.json"},
        "datasets.gpqa_h.contexts: data/nowhere.json: file not found",
    ),
    (
        "a directory as dataset",
        {"datasets/gpqa_h/pairs": "data/demo"},
        "datasets.gpqa_h.pairs: data/demo: is a directory",
    ),
    (
        "unknown key",
        {"cwpor/verbosty": [30]},
        "cwpor: Additional properties are not allowed ('verbosty' was unexpected)",
    ),
    ("wrong type", {"cwpor/subset": "all"}, "cwpor.subset: 'all' is not of type 'integer', 'null'"),
    (
        "required pairs unset",
        {"datasets/quality_h/pairs": None},
        "datasets.quality_h.pairs: required (a local path or an http(s) URL), not null",
    ),
    # models you bring (audited_models) and your own dataset (datasets.own)
    (
        "undefined brought model",
        {"audited_models/mine": {**BROUGHT, "targets": ["nope"]}},
        "audited_models.mine.targets[0]: model 'nope' is not defined under 'models:'",
    ),
    (
        "brought target named like a verifier",
        {"models/honest": BASE["models"]["smollm2-135m"], "audited_models/mine": {**BROUGHT, "targets": ["honest"]}},
        "audited_models.mine.targets[0]: 'honest' is the name of one of the workflow's own verifiers",
    ),
    (
        "brought target is its base",
        {"audited_models/mine": {**BROUGHT, "targets": ["smollm2-135m"]}},
        "audited_models.mine.targets[0]: 'smollm2-135m' is the audit's base",
    ),
    (
        "brought audit on an unknown dataset",
        {"audited_models/mine": {**BROUGHT, "datasets": ["theirs"]}},
        "audited_models.mine.datasets[0]: 'theirs' is neither quality_h nor gpqa_h nor a dataset of datasets.own",
    ),
    (
        "brought audit named like an architecture",
        {"audited_models/smollm2-135m": BROUGHT},
        "audited_models.smollm2-135m: the audit's name is a path segment and its outputs' architecture label",
    ),
    (
        "brought audit without epsilon under a percentile",
        {"audit/epsilon": None, "audit/epsilon_percentile": 25, "audited_models/mine": BROUGHT},
        "audited_models.mine.epsilon: audit.epsilon_percentile sets epsilon from V_org's search maxima",
    ),
    (
        "epsilon reference not a target",
        {"audited_models/mine": {**BROUGHT, "epsilon_reference": "org"}},
        "audited_models.mine.epsilon_reference: 'org' is not one of its targets ['smollm2-135m-v']",
    ),
    ("brought audit without targets", {"audited_models/mine": {**BROUGHT, "targets": []}}, "should be non-empty"),
    (
        "brought audit with a misspelt key",
        {"audited_models/mine": {**BROUGHT, "dataset": ["gpqa_h"]}},
        "audited_models.mine: Additional properties are not allowed ('dataset' was unexpected)",
    ),
    (
        "own pairs file missing",
        {"datasets/own/mine/pairs": "data/nowhere.jsonl"},
        "datasets.own.mine.pairs: data/nowhere.jsonl: file not found",
    ),
    (
        "own dataset named like the workflow's",
        {"datasets/own/gpqa_h/pairs": "data/demo/own_pairs.jsonl"},
        "datasets.own.gpqa_h: not a name for your own dataset",
    ),
    # a run's name is a folder under runs/
    ("run name with a slash", {"run": "a/b"}, "run: 'a/b' is not a plain name"),
    ("run name with a space", {"run": "my run"}, "run: 'my run' is not a plain name"),
    ("run name up a folder", {"run": ".."}, "run: '..' is a path, not a name"),
    ("run name default", {"run": "default"}, "run: 'default' is how make compare names the unnamed run"),
    ("run name a number", {"run": 7}, "run: 7 is a number, not a name"),
    # a prompt template is named by its version (cwpor/prompts.py)
    ("unknown judge template", {"cwpor/judge_template": "v9"}, "cwpor.judge_template: unknown version 'v9'"),
    ("unknown debate template", {"cwpor/debate_template": "x"}, "cwpor.debate_template: unknown version 'x'"),
]


@pytest.mark.parametrize(("changes", "error"), [c[1:] for c in CONFIG_ERRORS], ids=[c[0] for c in CONFIG_ERRORS])
def test_config_mistake_is_reported_naming_the_key(monkeypatch, changes, error):
    monkeypatch.chdir(REPO)  # dataset paths are relative to the project
    errors = config_errors(with_changes(changes), SCHEMA)
    assert any(error in e for e in errors), errors


CONFIG_VALID = [
    ("default", {}),
    (
        "hf_id with path null (paper overlay)",
        {"datasets/truthfulqa/path": None, "datasets/truthfulqa/hf_id": "truthfulqa/truthful_qa"},
    ),
    ("device cuda:1", {f"{M}/device": "cuda:1"}),
    ("batch size auto", {f"{M}/batch_size": "auto"}),
    ("percentile instead of epsilon", {"audit/epsilon": None, "audit/epsilon_percentile": 25}),
    ("https URL", {"datasets/quality_h/pairs": "https://example.org/p.json"}),
    ("unused broken model", {"models/unused": OPENAI}),
    ("length and weight sweeps", {"debate/word_limit": [50, 150], "verifier/loss_weights/qh": [1.0, 2.0]}),
    ("LoRA for one architecture", {"verifier/lora/enabled": ["smollm2-135m"]}),
    (
        "V_org's L_qh on its attacks only, after the transcript (paper overlay)",
        {"verifier/qh_readout": "transcript", "verifier/org_training/qh_items": None},
    ),
    ("one base_model shorthand", {"verifier/base_model": "smollm2-135m", "verifier/base_models": DROP}),
    (
        "openai complete",
        {
            "models/srv": {**OPENAI, "base_url": "http://localhost:8000/v1", "api_key_env": "K"},
            "cwpor/judge_model": "srv",
            "cwpor/judge_template": "paper",  # a chat endpoint writes one free reply
        },
    ),
    ("named run", {"run": "lr-3x_v2.1"}),
    (
        "a brought pair on your own dataset and on GPQA-H",
        {
            **BROUGHT_MODEL,
            "datasets/own/mine/pairs": "data/demo/own_pairs.jsonl",
            "audited_models/mine": {**BROUGHT, "datasets": ["mine", "gpqa_h"], "readout": "plain", "epsilon": 0.5},
        },
    ),
    (
        "a brought pair under a percentile epsilon of its own model organism",
        {
            **BROUGHT_MODEL,
            "audit/epsilon": None,
            "audit/epsilon_percentile": 25,
            "audited_models/mine": {**BROUGHT, "epsilon_reference": "smollm2-135m-v"},
        },
    ),
    # part 1 off: its models are neither checked nor prepared
    ("ER-Audit part 1 off", {"verifier/datasets": [], "debate/debater": "nope", "verifier/base_models": ["nope"]}),
]


@pytest.mark.parametrize("changes", [c[1] for c in CONFIG_VALID], ids=[c[0] for c in CONFIG_VALID])
def test_valid_config_passes(monkeypatch, changes):
    monkeypatch.chdir(REPO)
    assert config_errors(with_changes(changes), SCHEMA) == []


def test_only_used_models_are_prepared():
    config = with_changes(
        {"models/unused": OPENAI, "models/judge": dict(BASE["models"]["smollm2-135m"]), "cwpor/judge_model": "judge"}
    )
    assert used_models(config) == ["smollm2-135m", "judge"]


def test_models_you_bring_are_used_and_part_1_off_uses_none_of_its_own():
    config = with_changes({**BROUGHT_MODEL, "audited_models/mine": BROUGHT})
    assert used_models(config) == ["smollm2-135m", "smollm2-135m-v"]
    off = with_changes({"models/debater": OPENAI, "debate/debater": "debater", "verifier/datasets": []})
    assert used_models(off) == ["smollm2-135m"]  # CW-POR's; no pools without an audit, no debater
    assert used_models({**off, "audited_models": {"mine": BROUGHT}}) == ["smollm2-135m", "smollm2-135m-v"]


def test_every_error_is_reported_at_once(monkeypatch):
    monkeypatch.chdir(REPO)
    errors = config_errors(
        with_changes({"audit/epsilon": -1.0, "debate/debater": "nope", f"{M}/device": "tpu"}), SCHEMA
    )
    keys = {e.split(":")[0] for e in errors}
    assert keys == {"debate.debater", "models.smollm2-135m.device", "audit.epsilon"}, errors


# ------------------------------------------------------------------------------------ the workflow itself
COPY = ["Snakefile", "rules", "workflow", "config", "profiles", "envs", "data/demo"]


@pytest.fixture
def workflow(tmp_path):
    for item in COPY:
        src, dst = REPO / item, tmp_path / item
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
    return tmp_path


def snakemake(workdir: Path, *args: str, overlay: dict | None = None) -> subprocess.CompletedProcess:
    configs = ["config/config.yaml"]
    if overlay is not None:
        (workdir / "overlay.yaml").write_text(yaml.safe_dump(overlay))
        configs.append("overlay.yaml")
    cmd = [str(BIN / "snakemake"), "--cores", "1", *args, "--configfile", *configs]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    return subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=300, env=env)


# (id, overlay, text the failing dry run must print): each stops before any job is planned
WORKFLOW_ERRORS = [
    (
        "missing dataset file",
        {"datasets": {"truthfulqa": {"path": "data/nowhere.csv"}}},
        "datasets.truthfulqa.path: data/nowhere.csv: file not found",
    ),
    (
        "epsilon both set",
        {"audit": {"epsilon_percentile": 25}},
        "audit.epsilon / audit.epsilon_percentile: set exactly one",
    ),
    (
        "undefined model",
        {"cwpor": {"judge_model": "nope"}},
        "cwpor.judge_model: model 'nope' is not defined under 'models:'",
    ),
    ("path and hf_id", {"datasets": {"truthfulqa": {"hf_id": "truthfulqa/truthful_qa"}}}, "give exactly one of 'path'"),
    (
        "undefined brought model",
        {"audited_models": {"mine": {**BROUGHT, "targets": ["nope"]}}},
        "audited_models.mine.targets[0]: model 'nope' is not defined under 'models:'",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize(("overlay", "error"), [c[1:] for c in WORKFLOW_ERRORS], ids=[c[0] for c in WORKFLOW_ERRORS])
def test_dry_run_stops_on_a_config_mistake_naming_the_key(workflow, overlay, error):
    result = snakemake(workflow, "-n", overlay=overlay)
    assert result.returncode != 0
    assert error in result.stdout + result.stderr, result.stderr[-3000:]


@pytest.mark.slow
def test_dry_run_names_a_directory_where_an_output_should_be(workflow):
    (workflow / "data/gpqa_h.parquet").mkdir(parents=True)
    result = snakemake(workflow, "-n")
    assert result.returncode != 0
    assert "data/gpqa_h.parquet: a directory where an output file should be" in result.stdout + result.stderr


@pytest.mark.slow
@pytest.mark.skipif(os.geteuid() == 0, reason="root reads and writes any file: an unreadable output cannot be made")
def test_dry_run_names_an_unreadable_output(workflow):
    out = workflow / "data/gpqa_h.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(b"x")
    out.chmod(0)
    result = snakemake(workflow, "-n")
    assert "data/gpqa_h.parquet: an output this user cannot read" in result.stdout + result.stderr


@pytest.mark.slow
def test_changed_or_missing_source_never_reuses_the_old_dataset(workflow, tmp_path_factory):
    first = snakemake(workflow, "data/truthfulqa.parquet")
    assert first.returncode == 0, first.stderr[-3000:]
    again = snakemake(workflow, "-n", "data/truthfulqa.parquet")
    assert "Nothing to be done" in again.stdout + again.stderr
    # Same file content, new location: the prepare rule reruns (its params hold the location).
    elsewhere = tmp_path_factory.mktemp("elsewhere") / "t.csv"
    shutil.copy2(workflow / "data/demo/truthfulqa.csv", elsewhere)
    moved = snakemake(
        workflow, "-n", "data/truthfulqa.parquet", overlay={"datasets": {"truthfulqa": {"path": str(elsewhere)}}}
    )
    assert "rule prepare_truthfulqa" in moved.stdout and "Params have changed" in moved.stdout, moved.stdout[-3000:]
    # Edited in place with an old mtime: the content hash reruns it all the same.
    csv = workflow / "data/demo/truthfulqa.csv"
    csv.write_text(csv.read_text() + GOOD_ROW)
    os.utime(csv, (0, 0))
    edited = snakemake(workflow, "-n", "data/truthfulqa.parquet")
    assert "rule prepare_truthfulqa" in edited.stdout and "Params have changed" in edited.stdout
    # Gone: the old data/truthfulqa.parquet is not reused; the path is named.
    gone = snakemake(
        workflow,
        "-n",
        "data/truthfulqa.parquet",
        overlay={"datasets": {"truthfulqa": {"path": str(elsewhere) + ".moved"}}},
    )
    assert (
        gone.returncode != 0
        and f"datasets.truthfulqa.path: {elsewhere}.moved: file not found" in gone.stdout + gone.stderr
    )


@pytest.mark.slow
def test_a_dataset_with_no_valid_row_fails_its_rule_naming_both_files(workflow):
    bad = workflow / "data/demo/truthfulqa.csv"
    bad.write_text(HEADER + "Adversarial,Health,Q?,,Good,Bad,x\n")
    result = snakemake(workflow, "data/truthfulqa.parquet")
    assert result.returncode != 0
    log = (workflow / "logs/data/prepare_truthfulqa.log").read_text()
    assert (
        "data/demo/truthfulqa.csv: no valid rows (1 rejected, each with its reason in data/truthfulqa.rejected.parquet)"
        in log
    )
    assert not (workflow / "data/truthfulqa.parquet").exists()


@pytest.mark.slow
def test_unused_model_is_neither_checked_nor_prepared(workflow):
    result = snakemake(workflow, "-n", overlay={"models": {"unused": OPENAI}})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "prepare_unused" not in result.stdout and "models/unused" not in result.stdout


@pytest.mark.slow
def test_runtime_table_depends_on_this_runs_benchmark_files_only(workflow):
    stale = workflow / "benchmarks/rules/cwpor/judge/old-model_v999.tsv"
    stale.parent.mkdir(parents=True)
    stale.write_text("s\n1\n")
    result = snakemake(workflow, "-n", "results/er_audit/audit/table3_runtime.md")
    job = result.stdout.split("rule audit_runtime:")[1].split("\n\n")[0]
    inputs = job.split("input: ")[1].split("\n")[0]
    assert "benchmarks/rules/audit/scores_smollm2-135m_quality_h_base.tsv" in inputs
    assert "benchmarks/rules/cwpor/judge/smollm2-135m_judge-smollm2-135m_v30.tsv" in inputs
    assert "old-model_v999" not in inputs
