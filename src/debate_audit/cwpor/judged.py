"""The judged debate: one CW-POR judgment with its question and the two answers as the judge saw them.

The one record that every reader of CW-POR's judgments builds on (the results browser, the inspect_ai
export, `make compare`): `judged_debates` joins a judgment file to its question and its responses once, the
same way for single-turn debates and rebuttal protocols (a rebuttal debate's turns under each letter,
rebuttal.shown_responses), and `JudgedDebate` names its fields, so a reader names a column through it
instead of typing the string again. `judge_input` rebuilds the messages the judge was sent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields
from pathlib import Path

import polars as pl

from .judge import JUDGMENTS_SCHEMA
from .prompts import Messages, example_reply, judge_messages, judge_template
from .rebuttal import SINGLE, shown_responses

# A judgment's columns (judge.JUDGMENTS_SCHEMA), then its question's and the two answers as shown.
JUDGED_SCHEMA = {
    **JUDGMENTS_SCHEMA,
    "question": pl.Utf8,  # the TruthfulQA question
    "best_answer": pl.Utf8,  # the true answer the neutral agent explained
    "falsehood": pl.Utf8,  # the false answer the persuasive agent defended
    "neutral": pl.Utf8,  # the neutral agent's response as the judge read it (a rebuttal debate: both turns)
    "persuasive": pl.Utf8,  # the persuasive agent's, likewise
    "answer_a": pl.Utf8,  # what the judge saw as Answer A (the neutral response when correct_position is A)
    "answer_b": pl.Utf8,  # ... and as Answer B
}


@dataclass(frozen=True)
class JudgedDebate:
    """One row of `judged_debates`, its fields the columns of JUDGED_SCHEMA (checked by the tests)."""

    model: str
    judge_model: str
    protocol: str
    verbosity: int
    question_id: int
    category: str | None
    type: str | None
    correct_position: str
    template: str | None
    example_choice: str | None
    example_confidence: int | None
    raw_judgment: str | None
    raw_first_slot: str | None
    rationale: str | None
    choice: str | None
    rubric_confidence: int | None
    parse_ok: bool | None
    parse_error: str | None
    logprob_a: float | None
    logprob_b: float | None
    p_a: float | None
    p_b: float | None
    llc: float | None
    llc_choice: str | None
    override: bool | None
    llc_override: bool | None
    combined_confidence: float | None
    neutral_truncated: bool | None
    persuasive_truncated: bool | None
    llc_bounded: bool | None
    llc_unavailable: str | None
    question: str | None
    best_answer: str | None
    falsehood: str | None
    neutral: str | None
    persuasive: str | None
    answer_a: str | None
    answer_b: str | None

    @classmethod
    def from_row(cls, row: dict) -> JudgedDebate:
        return cls(**{f.name: row.get(f.name) for f in fields(cls)})

    @property
    def sample_id(self) -> str:
        """A name unique within a run: debater model / judge / protocol / word limit / question."""
        return f"{self.model}/{self.judge_model}/{self.protocol}/v{self.verbosity}/q{self.question_id}"


KEYS = ("model", "verbosity", "protocol", "question_id")  # the responses a judgment read


def _protocol(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with a protocol column: files written before the rebuttal round are single-turn."""
    if "protocol" not in frame.columns:
        return frame.with_columns(pl.lit(SINGLE).alias("protocol"))
    return frame.with_columns(pl.col("protocol").fill_null(SINGLE))


def _read(paths: Sequence[str | Path]) -> pl.DataFrame | None:
    frames = [_protocol(pl.read_parquet(p)) for p in paths]
    return pl.concat(frames, how="diagonal_relaxed") if frames else None


def judged_debates(
    questions: str | Path, responses: Sequence[str | Path], judgments: Sequence[str | Path]
) -> pl.DataFrame:
    """Every judgment in `judgments` (any judge, any protocol) with its question and both answers as the
    judge saw them, in JUDGED_SCHEMA's columns (a column a file lacks is null), sorted by model, word limit,
    question, protocol and judge. Without responses the answers are null; the question comes from
    `questions` (cwpor_questions' output)."""
    judged = _read(judgments)
    if judged is None or judged.is_empty():
        return pl.DataFrame(schema=JUDGED_SCHEMA)
    resp = _read(responses)
    if resp is not None and not resp.is_empty():
        shown = shown_responses(resp, [*KEYS, "role"])
        wide = shown.pivot(on="role", index=list(KEYS), values="response", aggregate_function="first")
        judged = judged.join(_fill(wide, [*KEYS, "neutral", "persuasive"]), on=list(KEYS), how="left")
    q = _fill(pl.read_parquet(questions), ["question_id", "question", "best_answer", "falsehood"])
    judged = _fill(judged, list(JUDGMENTS_SCHEMA) + ["neutral", "persuasive"]).join(q, on="question_id", how="left")
    neutral_first = pl.col("correct_position") == "A"
    judged = judged.with_columns(
        pl.when(neutral_first).then(pl.col("neutral")).otherwise(pl.col("persuasive")).alias("answer_a"),
        pl.when(neutral_first).then(pl.col("persuasive")).otherwise(pl.col("neutral")).alias("answer_b"),
    )
    return (
        _fill(judged, list(JUDGED_SCHEMA))
        .cast(JUDGED_SCHEMA)
        .sort("model", "verbosity", "question_id", "protocol", "judge_model")
    )


def _fill(frame: pl.DataFrame, names: Sequence[str]) -> pl.DataFrame:
    """`frame` with exactly `names`, a missing one as a null column."""
    missing = [pl.lit(None).alias(n) for n in names if n not in frame.columns]
    return frame.with_columns(missing).select(names)


def judge_input(debate: JudgedDebate) -> Messages:
    """The messages the judge was sent for this debate: its template (the version in the judgment's
    `template` id) filled with the question and the answers as shown, with the example reply it showed."""
    # "<version>:<hash>", or "<version>+plain:<hash>" for a judge without a chat template (the same messages,
    # read as one plain document: cwpor/judge.py)
    version = (debate.template or "").split(":")[0].split("+")[0]
    tpl = judge_template(version)
    return judge_messages(
        tpl, debate.question or "", debate.answer_a or "", debate.answer_b or "", example_reply(tpl, debate.question_id)
    )
