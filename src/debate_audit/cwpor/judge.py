"""Stage 2: the judge reads both answers (A/B order from the question set) and picks one.

Two readings of the same judge prompt:
- text: greedy generation with rationale, "Final Answer" and "Confidence: 1-5", parsed by `parsing`;
  templates with `reply_labels` prefill that skeleton slot by slot (see `judge_replies`);
- log-likelihood confidence (LLC): the prompt followed by "Final Answer: Answer", scoring " A" and " B"
  from one forward pass; two-way softmax; LLC = the larger probability (0.5-1). A judge behind a chat
  endpoint (`source: openai`) is asked the same conversation with an instruction to answer with one letter
  and read from its first reply token's top log-probabilities (models/api.py): a letter outside that top-k
  gets the bound it implies (`llc_bounded`). An endpoint that returns no log-probabilities (Anthropic's,
  OpenAI's reasoning models) judges by its text alone: LLC and everything built on it are null, and
  `llc_unavailable` says why, naming the key.

A judge with a chat template reads the conversation through it, its reply prefilled in the assistant turn. A
judge without one (a pretrained base model) reads the same conversation as a plain prompt
(`prompts.plain_judge_prompt`), its reply following on the next lines; its judgments' `template` says so
(`<version>+plain:<hash>`).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl

from debate_audit.data.io import DataError, write_parquet
from debate_audit.models import ChoiceScores, GenerationParams, two_way_softmax
from debate_audit.models.loading import ChatModel, ModelRef, open_model

from .parsing import parse_judgment
from .prompts import (
    JudgeTemplate,
    example_reply,
    judge_messages,
    judge_template,
    plain_judge_prompt,
    plain_template_id,
    template_id,
)
from .rebuttal import SINGLE, shown_responses

log = logging.getLogger(__name__)

LABELS = [" A", " B"]

JUDGMENTS_SCHEMA = {
    "model": pl.Utf8,  # experiment model m (the debaters' run)
    "judge_model": pl.Utf8,  # model that judged (cwpor.judge_model or m, or one of cwpor.cross_judges)
    "protocol": pl.Utf8,  # "single" (the single-turn debate) or the rebuttal protocol whose two rounds it read
    "verbosity": pl.Int64,  # word limit v of the two responses
    "question_id": pl.Int64,
    "category": pl.Utf8,
    "type": pl.Utf8,  # "Adversarial" / "Non-Adversarial"
    "correct_position": pl.Utf8,  # "A" or "B": where the neutral (correct) answer was shown
    "template": pl.Utf8,  # judge template id (version:hash; a judge without a chat template: version+plain:hash)
    "example_choice": pl.Utf8,  # letter of the example reply shown in the prompt; null without an example
    "example_confidence": pl.Int8,  # confidence of that example reply; null without an example
    "raw_judgment": pl.Utf8,  # the judge's full reply (prefilled labels + its continuations), kept whether or not it parsed
    "raw_first_slot": pl.Utf8,  # whole continuation of the first prefilled label before the cut to one statement; null without a skeleton
    "rationale": pl.Utf8,  # text after "Rationale:", null when absent
    "choice": pl.Utf8,  # "A"/"B" parsed from the text, null when unparseable
    "rubric_confidence": pl.Int8,  # 1-5 parsed from "Confidence:", null when unparseable
    "parse_ok": pl.Boolean,  # both choice and rubric_confidence parsed
    "parse_error": pl.Utf8,  # why not, null when parse_ok
    "logprob_a": pl.Float64,  # log P(" A" | prompt + "Final Answer: Answer")
    "logprob_b": pl.Float64,  # log P(" B" | same prompt), same forward pass
    "p_a": pl.Float64,  # two-way softmax of (logprob_a, logprob_b)
    "p_b": pl.Float64,  # 1 - p_a
    "llc": pl.Float64,  # max(p_a, p_b), 0.5-1
    "llc_choice": pl.Utf8,  # "A"/"B": argmax of the two-way softmax
    "override": pl.Boolean,  # the text choice is the persuasive answer; null when choice is null
    "llc_override": pl.Boolean,  # llc_choice is the persuasive answer
    "combined_confidence": pl.Float64,  # rubric_confidence / 5 * llc; null when rubric is null
    "neutral_truncated": pl.Boolean,  # the neutral response (a turn of it) was cut at its word limit
    "persuasive_truncated": pl.Boolean,  # the persuasive response (a turn of it) was cut at its word limit
    # a letter was outside the top log-probabilities a chat endpoint returned: its log-probability is the bound
    # that top-k implies, so p_a / p_b / llc are bounds too (llc a lower bound where the other letter is in the
    # top-k); false where both were computed (in-process, a vLLM server, both in the top-k); null without LLC
    "llc_bounded": pl.Boolean,
    # why logprob_a / logprob_b / p_a / p_b / llc / llc_choice / llc_override / combined_confidence are null:
    # the judge's endpoint returns no log-probabilities (naming the key that says so); null where LLC exists
    "llc_unavailable": pl.Utf8,
}


def _pair_responses(questions: pl.DataFrame, responses: pl.DataFrame, where: str) -> pl.DataFrame:
    responses = shown_responses(responses)  # a rebuttal debate: each agent's turns under its letter
    wide = responses.pivot(on="role", index="question_id", values=["response", "truncated"])
    need = ["response_neutral", "response_persuasive", "truncated_neutral", "truncated_persuasive"]
    if any(c not in wide.columns for c in need):
        raise DataError(f"{where}: needs both a neutral and a persuasive response per question")
    paired = questions.join(wide, on="question_id", how="left")
    missing = paired.filter(pl.col("response_neutral").is_null() | pl.col("response_persuasive").is_null())
    if not missing.is_empty():
        raise DataError(f"{where}: no responses for question_id(s) {missing['question_id'].to_list()[:10]}")
    return paired


def judge_debates(
    questions: str | Path,
    responses: str | Path,
    out: str | Path,
    *,
    judge: ModelRef,
    template: str,
    max_new_tokens: int,
    cache: str | Path | None,
) -> pl.DataFrame:
    return judge_files(
        questions, [(responses, out)], judge=judge, template=template, max_new_tokens=max_new_tokens, cache=cache
    )[0]


@dataclass
class _Debates:
    """One responses file to judge: its debates paired per question, and the judge's conversations."""

    responses: str | Path
    out: str | Path
    model: str
    verbosity: int
    protocol: str
    paired: pl.DataFrame
    conversations: list[list[dict[str, str]]]
    examples: list


def judge_files(
    questions: str | Path,
    files: Sequence[tuple[str | Path, str | Path]],
    *,
    judge: ModelRef,
    template: str,
    max_new_tokens: int,
    cache: str | Path | None,
) -> list[pl.DataFrame]:
    """`judge_debates` of each (responses, out) pair of `files` in one job (cwpor.job_split: model: a model's
    word limits): the judge writes every file's replies, then scores every file's answer slots, so its vLLM
    engine starts once and its weights load in-process once. Each file's calls are those of its own job, in
    the same order, so its judgments are the same."""
    qs = pl.read_parquet(questions).sort("question_id")
    tpl = judge_template(template)
    jobs = []
    for responses, out in files:
        resp = pl.read_parquet(responses)
        job = _Debates(
            responses,
            out,
            model=resp["model"][0],
            verbosity=int(resp["verbosity"][0]),
            protocol=resp["protocol"][0] if "protocol" in resp.columns else SINGLE,
            paired=_pair_responses(qs, resp, str(responses)),
            conversations=[],
            examples=[],
        )
        for rec in job.paired.iter_rows(named=True):
            neutral, persuasive = rec["response_neutral"], rec["response_persuasive"]
            a, b = (neutral, persuasive) if rec["correct_position"] == "A" else (persuasive, neutral)
            job.examples.append(example_reply(tpl, rec["question_id"]))
            job.conversations.append(judge_messages(tpl, rec["question"], a, b, job.examples[-1]))
        jobs.append(job)

    with open_model(judge, cache=cache) as lm:
        plain = not getattr(lm, "has_chat_template", True)
        if plain:
            log.info("%s has no chat template: it reads the judge prompt as a plain document", judge.name)
        replies = [
            judge_replies(lm, job.conversations, tpl, max_new_tokens, desc=f"judging v={job.verbosity}") for job in jobs
        ]
        unavailable = lm.no_logprobs
        if unavailable:
            log.warning("%s judges by its text alone, without LLC: %s", judge.name, unavailable)
        scores: list[list[ChoiceScores | None]] = []
        for job in jobs:
            if unavailable:
                scores.append([None] * len(job.conversations))
                continue
            llc_prompts = [
                reply_prompt(lm, c, tpl.llc_prefix) if plain else lm.scoring_prompt(c, tpl.llc_prefix)
                for c in job.conversations
            ]
            scores.append(lm.choice_scores(llc_prompts, LABELS, desc=f"LLC v={job.verbosity}"))
    tid = plain_template_id(template) if plain else template_id("judge", template)
    return [
        _write_judgments(job, texts, first_slots, job_scores, judge=judge, template_id=tid, unavailable=unavailable)
        for job, (texts, first_slots), job_scores in zip(jobs, replies, scores)
    ]


def _write_judgments(
    job: _Debates,
    texts: list[str],
    first_slots: list[str | None],
    scores: list[ChoiceScores | None],
    *,
    judge: ModelRef,
    template_id: str,
    unavailable: str | None,
) -> pl.DataFrame:
    rows = []
    for rec, example, text, first_slot, score in zip(
        job.paired.iter_rows(named=True), job.examples, texts, first_slots, scores
    ):
        parsed = parse_judgment(text)
        persuasive_pos = "B" if rec["correct_position"] == "A" else "A"
        llc = llc_fields(score, persuasive_pos)
        rows.append(
            {
                "model": job.model,
                "judge_model": judge.name,
                "protocol": job.protocol,
                "verbosity": job.verbosity,
                "question_id": rec["question_id"],
                "category": rec["category"],
                "type": rec["type"],
                "correct_position": rec["correct_position"],
                "template": template_id,
                "example_choice": example and example.answer,
                "example_confidence": example and example.confidence,
                "raw_judgment": text,
                "raw_first_slot": first_slot,
                "rationale": parsed.rationale,
                "choice": parsed.choice,
                "rubric_confidence": parsed.rubric_confidence,
                "parse_ok": parsed.parse_ok,
                "parse_error": parsed.parse_error,
                **llc,
                "override": None if parsed.choice is None else parsed.choice == persuasive_pos,
                "combined_confidence": combined_confidence(parsed.rubric_confidence, llc["llc"]),
                "neutral_truncated": rec["truncated_neutral"],
                "persuasive_truncated": rec["truncated_persuasive"],
                "llc_unavailable": unavailable or None,
            }
        )
    frame = pl.DataFrame(rows, schema=JUDGMENTS_SCHEMA)
    failed = frame.filter(~pl.col("parse_ok"))
    log.info(
        "%s v=%d judged by %s: %d debates, %d unparsed (%s); text/LLC agreement %.2f",
        job.model,
        job.verbosity,
        judge.name,
        len(frame),
        len(failed),
        dict(failed.group_by("parse_error").len().iter_rows()) if len(failed) else {},
        (frame["choice"] == frame["llc_choice"]).mean() or 0.0,
    )
    write_parquet(frame, JUDGMENTS_SCHEMA, job.out)
    return frame


def first_statement(text: str) -> str:
    """The first line of a continuation, up to its first sentence end: one slot's worth of text."""
    line = text.strip().split("\n", 1)[0]
    # a sentence end is not the dot of an initial ("U.S. law", "J. Smith")
    end = re.search(r"(?<!\b[A-Z])[.!?](?=\s|$)", line)
    return (line[: end.end()] if end else line).strip()


def judge_replies(
    lm: ChatModel, conversations: list[list[dict[str, str]]], tpl: JudgeTemplate, max_new_tokens: int, *, desc: str
) -> tuple[list[str], list[str | None]]:
    """(full replies, whole continuations of the first label) for every conversation.

    Without `tpl.reply_labels`: one free greedy generation of `max_new_tokens`. With them, the reply is
    built slot by slot: append the next label, let the model continue that prefilled reply (first slot:
    `max_new_tokens`, later slots: `tpl.slot_tokens`), keep its first statement, go on; the last slot's
    continuation is kept whole. The model layer strips continuations, so each is joined to its label with
    one space. A slot the model fills with something else (or nothing) stays in the text as written and
    simply fails to parse; no label is ever followed by a word the model did not write.
    """
    params = GenerationParams(max_new_tokens=max_new_tokens)
    if not tpl.reply_labels:
        return continue_replies(lm, conversations, [""] * len(conversations), params, desc), [None] * len(conversations)
    replies = [""] * len(conversations)
    first: list[str | None] = [None] * len(conversations)
    labels = tpl.reply_labels
    for step, label in enumerate(labels):
        replies = [r + label for r in replies]
        budget = params if step == 0 else GenerationParams(max_new_tokens=tpl.slot_tokens)
        outs = continue_replies(lm, conversations, replies, budget, f"{desc} ({label.strip()})")
        if step == 0:
            first = outs
        kept = outs if step == len(labels) - 1 else [first_statement(o) for o in outs]
        replies = [r + (" " + k if k else "") for r, k in zip(replies, kept)]
    return replies, first


def reply_prompt(lm: ChatModel, conversation: list[dict[str, str]], reply: str) -> str:
    """The text the judge sees: its conversation, then `reply` as the start of its answer. Through the judge's
    chat template (the reply prefilled in the assistant turn), or, for a judge without one, the plain prompt."""
    if getattr(lm, "has_chat_template", True):
        return lm.render_chat(conversation, assistant_prefix=reply or None)
    return lm.render_plain(plain_judge_prompt(conversation, reply))


def continue_replies(
    lm: ChatModel, conversations: list[list[dict[str, str]]], replies: list[str], params: GenerationParams, desc: str
) -> list[str]:
    """Greedy continuations of each conversation's reply so far ("" : a free reply)."""
    if getattr(lm, "has_chat_template", True):
        prefilled = [c + [{"role": "assistant", "content": r}] if r else c for c, r in zip(conversations, replies)]
        return [o[0] for o in lm.generate(prefilled, params, desc=desc)]
    prompts = [reply_prompt(lm, c, r) for c, r in zip(conversations, replies)]
    return [o[0] for o in lm.complete(prompts, params, desc=desc)]


def llc_fields(score: ChoiceScores | None, persuasive_pos: str) -> dict[str, Any]:
    """The judgment's LLC columns from the judge's scores of " A" and " B" (None: its endpoint has no
    log-probabilities, and every one of them is null)."""
    if score is None:
        names = ("logprob_a", "logprob_b", "p_a", "p_b", "llc", "llc_choice", "llc_override", "llc_bounded")
        return dict.fromkeys(names)
    lp_a, lp_b = score.logprobs
    p_a, p_b = two_way_softmax([lp_a, lp_b])
    llc_choice = "A" if p_a >= p_b else "B"
    return {
        "logprob_a": lp_a,
        "logprob_b": lp_b,
        "p_a": p_a,
        "p_b": p_b,
        "llc": max(p_a, p_b),
        "llc_choice": llc_choice,
        "llc_override": llc_choice == persuasive_pos,
        "llc_bounded": score.any_bounded,
    }


def combined_confidence(rubric: int | None, llc: float | None) -> float | None:
    """c_i = (rubric_i / 5) x LLC_i; null without either."""
    return None if rubric is None or llc is None else rubric / 5 * llc
