"""The judged debate (cwpor/judged.py): the one record the browser, the inspect export and make compare read."""

from dataclasses import fields

import polars as pl

from debate_audit.cwpor.judge import JUDGMENTS_SCHEMA
from debate_audit.cwpor.judged import JUDGED_SCHEMA, JudgedDebate, judge_input, judged_debates
from debate_audit.cwpor.prompts import judge_template, template_id
from debate_audit.views.browse import CWPOR_COLUMNS


def test_the_record_and_the_schema_name_the_same_columns_and_the_browser_reads_only_them():
    assert [f.name for f in fields(JudgedDebate)] == list(JUDGED_SCHEMA)
    assert set(JUDGMENTS_SCHEMA) <= set(JUDGED_SCHEMA)
    assert set(CWPOR_COLUMNS) <= set(JUDGED_SCHEMA)


def _files(tmp_path, correct_position):
    pl.DataFrame(
        {"question_id": [3], "question": ["Why?"], "best_answer": ["Because."], "falsehood": ["No reason."]}
    ).write_parquet(tmp_path / "questions.parquet")
    pl.DataFrame(
        {
            "model": ["m", "m"],
            "verbosity": [30, 30],
            "question_id": [3, 3],
            "role": ["neutral", "persuasive"],
            "response": ["true text", "false text"],
            "truncated": [False, True],
        }
    ).write_parquet(tmp_path / "responses.parquet")
    row = {name: None for name in JUDGMENTS_SCHEMA}
    row |= {"model": "m", "judge_model": "j", "verbosity": 30, "question_id": 3, "correct_position": correct_position,
            "template": template_id("judge", "v4"), "raw_judgment": "Final Answer: B"}  # fmt: skip
    pl.DataFrame([row], schema=JUDGMENTS_SCHEMA).drop("protocol").write_parquet(tmp_path / "judgments.parquet")
    return tmp_path / "questions.parquet", [tmp_path / "responses.parquet"], [tmp_path / "judgments.parquet"]


def test_the_answers_sit_under_the_letters_the_judge_saw(tmp_path):
    for position, (a, b) in (("A", ("true text", "false text")), ("B", ("false text", "true text"))):
        frame = judged_debates(*_files(tmp_path, position))
        assert frame.schema == pl.Schema(JUDGED_SCHEMA)
        debate = JudgedDebate.from_row(frame.row(0, named=True))
        assert (debate.answer_a, debate.answer_b) == (a, b)
        assert debate.protocol == "single"  # a file written before the rebuttal round
        assert debate.question == "Why?" and debate.falsehood == "No reason."
        assert debate.sample_id == "m/j/single/v30/q3"


def test_the_judge_input_is_what_judge_debates_sends():
    from debate_audit.cwpor.prompts import example_reply, judge_messages

    debate = JudgedDebate.from_row(
        {"template": template_id("judge", "v4"), "question": "Q?", "answer_a": "a", "answer_b": "b", "question_id": 9}
    )
    tpl = judge_template("v4")
    assert judge_input(debate) == judge_messages(tpl, "Q?", "a", "b", example_reply(tpl, 9))


def test_no_judgment_gives_an_empty_frame_of_the_schema(tmp_path):
    questions, _, _ = _files(tmp_path, "A")
    assert judged_debates(questions, [], []).schema == pl.Schema(JUDGED_SCHEMA)
