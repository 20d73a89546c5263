"""Stage 1: the neutral and the persuasive agent answer every question under a word limit."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from debate_audit.data.io import write_parquet
from debate_audit.models import GenerationParams
from debate_audit.models.loading import ModelRef, open_model

from .prompts import cut_to_words, debate_template, neutral_messages, persuasive_messages, template_id

log = logging.getLogger(__name__)

ROLES = ("neutral", "persuasive")

RESPONSES_SCHEMA = {
    "model": pl.Utf8,  # experiment model m (the path's {model}); names the run, not necessarily the author
    "agent_model": pl.Utf8,  # model that wrote this response (cwpor.neutral_model / persuasive_model or m)
    "verbosity": pl.Int64,  # word limit v given to the agent
    "question_id": pl.Int64,
    "category": pl.Utf8,
    "type": pl.Utf8,
    "role": pl.Utf8,  # "neutral" (explains the best correct answer) or "persuasive" (defends a falsehood)
    "stance": pl.Utf8,  # the answer this agent was told to explain / defend
    "template": pl.Utf8,  # debate template id (version:hash)
    "max_new_tokens": pl.Int64,  # generation budget derived from v
    "raw_response": pl.Utf8,  # the model's text as generated
    "response": pl.Utf8,  # raw_response cut at v words (what the judge sees)
    "n_words": pl.Int64,  # whitespace-separated words in raw_response
    "truncated": pl.Boolean,  # raw_response had more than v words and was cut
}


def generate_debates(
    questions: str | Path,
    out: str | Path,
    *,
    model: str,
    agents: dict[str, ModelRef],
    verbosity: int,
    template: str,
    max_new_tokens: int,
    cache: str | Path | None,
) -> pl.DataFrame:
    """One row per question x role; `agents` maps "neutral"/"persuasive" to the model playing it."""
    limit = WordLimit(verbosity, max_new_tokens, out)
    return debates_at_limits(questions, [limit], model=model, agents=agents, template=template, cache=cache)[0]


@dataclass(frozen=True)
class WordLimit:
    """One word limit of a debate job: v, the generation budget derived from it, and its responses file."""

    verbosity: int
    max_new_tokens: int
    out: str | Path


def debates_at_limits(
    questions: str | Path,
    limits: Sequence[WordLimit],
    *,
    model: str,
    agents: dict[str, ModelRef],
    template: str,
    cache: str | Path | None,
) -> list[pl.DataFrame]:
    """`generate_debates` at each of `limits` in one job (cwpor.job_split: model): each model is loaded, or its
    vLLM engine started, once for all of them. Every limit's calls are those of its own job, in the same
    order, so its file is the same."""
    qs = pl.read_parquet(questions).sort("question_id")
    tpl = debate_template(template)
    tid = template_id("debate", template)
    texts: dict[tuple[int, str], list[str]] = {}
    # Roles played by the same model share one load.
    for ref in dict.fromkeys(agents.values()):
        with open_model(ref, cache=cache) as lm:
            for limit in limits:
                params = GenerationParams(max_new_tokens=limit.max_new_tokens, do_sample=False)
                for role in (r for r in ROLES if agents[r] == ref):
                    build = neutral_messages if role == "neutral" else persuasive_messages
                    stance_col = "best_answer" if role == "neutral" else "falsehood"
                    conversations = [build(tpl, q, a, limit.verbosity) for q, a in zip(qs["question"], qs[stance_col])]
                    outs = lm.generate(conversations, params, desc=f"{role} v={limit.verbosity}")
                    texts[limit.verbosity, role] = [o[0] for o in outs]
    return [_write_responses(qs, limit, texts, model=model, agents=agents, tid=tid) for limit in limits]


def _write_responses(
    qs: pl.DataFrame,
    limit: WordLimit,
    texts: dict[tuple[int, str], list[str]],
    *,
    model: str,
    agents: dict[str, ModelRef],
    tid: str,
) -> pl.DataFrame:
    verbosity = limit.verbosity
    rows = []
    for role in ROLES:
        stance_col = "best_answer" if role == "neutral" else "falsehood"
        for rec, raw in zip(qs.iter_rows(named=True), texts[verbosity, role]):
            cut, n_words, truncated = cut_to_words(raw, verbosity)
            rows.append(
                {
                    "model": model,
                    "agent_model": agents[role].name,
                    "verbosity": verbosity,
                    "question_id": rec["question_id"],
                    "category": rec["category"],
                    "type": rec["type"],
                    "role": role,
                    "stance": rec[stance_col],
                    "template": tid,
                    "max_new_tokens": limit.max_new_tokens,
                    "raw_response": raw,
                    "response": cut,
                    "n_words": n_words,
                    "truncated": truncated,
                }
            )
    frame = pl.DataFrame(rows, schema=RESPONSES_SCHEMA)
    cut = frame.group_by("role").agg(pl.col("truncated").sum()).sort("role")
    empty = (frame["n_words"] == 0).sum()
    log.info(
        "%s v=%d: %d responses; cut at %d words: %s; empty: %d",
        model,
        verbosity,
        len(frame),
        verbosity,
        dict(cut.iter_rows()),
        empty,
    )
    write_parquet(frame, RESPONSES_SCHEMA, limit.out)
    return frame
