"""A rebuttal round after the single-turn debate (issue 26), and what it changes.

Round 1 is the single-turn debate, unchanged. In round 2 each rebutting agent continues its own round-1
conversation (its instructions, its request, its round-1 text) with the opponent's round-1 text as the
judge saw it (never the opponent's instructions) and rebuts under a word limit; rounds are simultaneous
(Khan et al. 2024, ucl-dark/llm_debate). The judge then reads both turns of each agent under its letter,
in the same format, A/B positions kept. Protocols (PROTOCOLS):

- both:    both agents rebut, v words per turn;
- neutral: only the neutral agent rebuts (the paper's wording of a limited rebuttal);
- length:  both rebut, v // 2 words per turn (round 1 from the single-turn run at v // 2 words), so
           each agent writes as much as in the single-turn debate at v and extra words are not mistaken
           for the rebuttal's effect.

Effects against single-turn, per experiment model, judge, protocol and word limit (and pooled): POR and
CW-POR, the flip matrix of (question, word limit) pairs whose choice parsed in both (rescued: persuaded
before, correct after; corrupted: the reverse), an exact McNemar test of rescued against corrupted, and
paired bootstrap CIs (questions resampled, the same draws for both protocols) of the changes in CW-POR
and POR.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from debate_audit.data.io import DataError, write_parquet
from debate_audit.data.markdown import ci_cell, markdown_table
from debate_audit.models import GenerationParams
from debate_audit.models.loading import ModelRef, open_model

from .debates import RESPONSES_SCHEMA, ROLES
from .metrics import bootstrap_difference, ci_schema, ci_values, group_metrics, group_rng, per_question_sums
from .prompts import (
    cut_to_words,
    debate_template,
    neutral_messages,
    persuasive_messages,
    rebuttal_messages,
    rebuttal_template,
    template_id,
)

log = logging.getLogger(__name__)

SINGLE = "single"


@dataclass(frozen=True)
class Protocol:
    name: str
    rebutters: tuple[str, ...]  # roles that write a round 2
    halved: bool  # both turns at v // 2 words (the length control)

    def turn_words(self, verbosity: int) -> int:
        return verbosity // 2 if self.halved else verbosity


PROTOCOLS = {
    "both": Protocol("both", ("neutral", "persuasive"), False),
    "neutral": Protocol("neutral", ("neutral",), False),
    "length": Protocol("length", ("neutral", "persuasive"), True),
}


def protocol(name: str) -> Protocol:
    if name not in PROTOCOLS:
        raise ValueError(f"cwpor.rebuttal_protocols: unknown protocol {name!r}; known: {sorted(PROTOCOLS)}")
    return PROTOCOLS[name]


DEBATE_SCHEMA = {
    **RESPONSES_SCHEMA,  # "verbosity" is the cell's word limit v (the length control's turns have v // 2)
    "protocol": pl.Utf8,  # both, neutral or length (PROTOCOLS)
    "round": pl.Int64,  # 1: the single-turn response; 2: the rebuttal
    "turn_words": pl.Int64,  # the word limit of this turn
}


def generate_rebuttals(
    questions: str | Path,
    round1: str | Path,
    out: str | Path,
    *,
    model: str,
    protocol_name: str,
    verbosity: int,
    agents: dict[str, ModelRef],
    template: str,
    rebuttal: str,
    max_new_tokens: int,
    cache: str | Path | None,
) -> pl.DataFrame:
    """Both rounds of every question's debate under one protocol: round 1 as written by the single-turn
    stage (at the protocol's turn length), round 2 of each rebutting role."""
    proto = protocol(protocol_name)
    words = proto.turn_words(verbosity)
    qs = pl.read_parquet(questions).sort("question_id")
    first = pl.read_parquet(round1)
    if first.is_empty() or int(first["verbosity"][0]) != words:
        raise DataError(f"{round1}: round 1 of protocol {proto.name} at v={verbosity} needs {words}-word responses")
    by_role = {
        role: {r["question_id"]: r for r in first.filter(pl.col("role") == role).iter_rows(named=True)}
        for role in ROLES
    }
    missing = [q for q in qs["question_id"] if any(q not in by_role[role] for role in ROLES)]
    if missing:
        raise DataError(f"{round1}: no round-1 response for question_id(s) {missing[:10]}")
    tpl, rtpl = debate_template(template), rebuttal_template(rebuttal)
    params = GenerationParams(max_new_tokens=max_new_tokens, do_sample=False)
    texts: dict[str, list[str]] = {}
    for ref in dict.fromkeys(agents[r] for r in proto.rebutters):
        with open_model(ref, cache=cache) as lm:
            for role in (r for r in proto.rebutters if agents[r] == ref):
                other = "persuasive" if role == "neutral" else "neutral"
                build = neutral_messages if role == "neutral" else persuasive_messages
                conversations = [
                    rebuttal_messages(
                        build(tpl, q["question"], by_role[role][q["question_id"]]["stance"], words),
                        by_role[role][q["question_id"]]["response"],
                        by_role[other][q["question_id"]]["response"],
                        rtpl,
                        words,
                    )
                    for q in qs.iter_rows(named=True)
                ]
                outs = lm.generate(conversations, params, desc=f"{role} rebuttal ({proto.name}) v={verbosity}")
                texts[role] = [o[0] for o in outs]
    rows = []
    for role in ROLES:
        for q in qs.iter_rows(named=True):
            r1 = by_role[role][q["question_id"]]
            rows.append({**r1, "verbosity": verbosity, "protocol": proto.name, "round": 1, "turn_words": words})
        for q, raw in zip(qs.iter_rows(named=True), texts.get(role, [])):
            r1 = by_role[role][q["question_id"]]
            cut, n_words, truncated = cut_to_words(raw, words)
            rows.append(
                {
                    **r1,
                    "agent_model": agents[role].name,
                    "verbosity": verbosity,
                    "template": template_id("rebuttal", rebuttal),
                    "max_new_tokens": max_new_tokens,
                    "raw_response": raw,
                    "response": cut,
                    "n_words": n_words,
                    "truncated": truncated,
                    "protocol": proto.name,
                    "round": 2,
                    "turn_words": words,
                }
            )
    frame = pl.DataFrame(rows, schema=DEBATE_SCHEMA)
    second = frame.filter(pl.col("round") == 2)
    log.info(
        "%s %s v=%d: %d rebuttals of %d words (%s), cut: %d, empty: %d",
        model,
        proto.name,
        verbosity,
        len(second),
        words,
        ", ".join(proto.rebutters),
        second["truncated"].sum(),
        (second["n_words"] == 0).sum(),
    )
    write_parquet(frame, DEBATE_SCHEMA, out)
    return frame


def shown_text(turns: Sequence[str]) -> str:
    """What the judge reads under one agent's letter in a rebuttal debate: its turns, labelled (an agent
    that does not rebut shows its opening only, labelled the same way)."""
    return "\n\n".join(f"{label}: {text}" for label, text in zip(("Opening", "Rebuttal"), turns))


def shown_responses(responses: pl.DataFrame, keys: Sequence[str] = ("question_id", "role")) -> pl.DataFrame:
    """One row per `keys` (a question's agent) with `response` as the judge reads it and `truncated` (any
    turn cut): single-turn responses as they are; a rebuttal debate's turns joined by `shown_text`."""
    if "round" not in responses.columns:
        return responses
    columns = [*keys, "response", "truncated"]
    debates = (
        responses.filter(pl.col("round").is_not_null())
        .sort("round")
        .group_by(list(keys), maintain_order=True)
        .agg(pl.col("response"), pl.col("truncated").any())
        .with_columns(pl.col("response").map_elements(shown_text, return_dtype=pl.Utf8))
    )
    return pl.concat([responses.filter(pl.col("round").is_null()).select(columns), debates.select(columns)])


# ------------------------------------------------------------------ effects against single-turn
def mcnemar_exact(rescued: int, corrupted: int) -> float:
    """Two-sided exact McNemar p-value: the discordant pairs as Binomial(b + c, 1/2)."""
    n = rescued + corrupted
    if n == 0:
        return 1.0
    tail = sum(math.comb(n, i) for i in range(min(rescued, corrupted) + 1)) / 2**n
    return min(1.0, 2 * tail)


FLIP = {
    (False, False): "kept correct",
    (False, True): "corrupted",
    (True, False): "rescued",
    (True, True): "kept persuaded",
}
KEYS = ["model", "judge_model", "verbosity", "question_id"]

FLIPS_SCHEMA = {
    "model": pl.Utf8,  # experiment model m
    "judge_model": pl.Utf8,
    "protocol": pl.Utf8,  # the rebuttal protocol compared with single-turn
    "verbosity": pl.Int64,  # word limit v of the cell
    "question_id": pl.Int64,
    "single_override": pl.Boolean,  # single-turn: picked the persuasive answer (null: unparsed choice)
    "rebuttal_override": pl.Boolean,  # after the rebuttal round
    "flip": pl.Utf8,  # rescued, corrupted, kept correct, kept persuaded, or unparsed (either choice)
}

EFFECTS_SCHEMA = {
    "model": pl.Utf8,
    "judge_model": pl.Utf8,
    "protocol": pl.Utf8,  # single (the reference) or a rebuttal protocol
    "verbosity": pl.Int64,  # null: pooled over word limits
    "n": pl.Int64,  # judgments
    "n_parsed": pl.Int64,
    **ci_schema(),  # por_all, por, cw_por with their bootstrap CIs
    "kept_correct": pl.Int64,  # flip matrix against single-turn over (question, word limit) pairs with both choices parsed
    "corrupted": pl.Int64,  # correct in single-turn, persuaded after the rebuttal
    "rescued": pl.Int64,  # persuaded in single-turn, correct after
    "kept_persuaded": pl.Int64,
    "unparsed": pl.Int64,  # pairs with either choice unparsed (left out of the flip matrix)
    "mcnemar_p": pl.Float64,  # exact two-sided McNemar test of rescued vs corrupted
    "delta_cw_por": pl.Float64,  # CW-POR(protocol) - CW-POR(single), paired bootstrap over questions
    "delta_cw_por_ci_low": pl.Float64,
    "delta_cw_por_ci_high": pl.Float64,
    "delta_por_all": pl.Float64,  # the same for the paper's POR (of all N)
    "delta_por_all_ci_low": pl.Float64,
    "delta_por_all_ci_high": pl.Float64,
}


def flip_table(single: pl.DataFrame, rebutted: pl.DataFrame) -> pl.DataFrame:
    """Per (question, word limit) of one protocol: single-turn and rebuttal choice, and the flip."""
    joined = rebutted.select(*KEYS, "protocol", pl.col("override").alias("rebuttal_override")).join(
        single.select(*KEYS, pl.col("override").alias("single_override")), on=KEYS, how="left"
    )
    flips = [FLIP.get((s, r), "unparsed") for s, r in zip(joined["single_override"], joined["rebuttal_override"])]
    return joined.with_columns(pl.Series("flip", flips, dtype=pl.Utf8)).select(list(FLIPS_SCHEMA))


def _aligned_sums(frame: pl.DataFrame, questions: pl.DataFrame) -> pl.DataFrame:
    return questions.join(per_question_sums(frame), on="question_id", how="left").fill_null(0.0)


def effect_rows(single: pl.DataFrame, rebutted: pl.DataFrame, *, resamples: int, level: float, seed: int) -> list[dict]:
    """Effects rows of every model x judge x protocol x word limit (and pooled), single-turn rows first."""
    rows = []
    flips = flip_table(single, rebutted)
    cells = rebutted.select("model", "judge_model", "protocol").unique().sort("model", "judge_model", "protocol")
    references = set()
    for model, judge, name in cells.iter_rows():
        ref = single.filter((pl.col("model") == model) & (pl.col("judge_model") == judge))
        mine = rebutted.filter(
            (pl.col("model") == model) & (pl.col("judge_model") == judge) & (pl.col("protocol") == name)
        )
        mine_flips = flips.filter(
            (pl.col("model") == model) & (pl.col("judge_model") == judge) & (pl.col("protocol") == name)
        )
        for verbosity in [None, *sorted(mine["verbosity"].unique())]:
            pick = (lambda f: f) if verbosity is None else (lambda f, v=verbosity: f.filter(pl.col("verbosity") == v))
            if (model, judge, verbosity) not in references:
                references.add((model, judge, verbosity))
                rows.append(_protocol_row(pick(ref), model, judge, SINGLE, verbosity, resamples, level, seed))
            row = _protocol_row(pick(mine), model, judge, name, verbosity, resamples, level, seed)
            counts = dict(pick(mine_flips).group_by("flip").len().iter_rows())
            row |= {
                "kept_correct": counts.get("kept correct", 0),
                "corrupted": counts.get("corrupted", 0),
                "rescued": counts.get("rescued", 0),
                "kept_persuaded": counts.get("kept persuaded", 0),
                "unparsed": counts.get("unparsed", 0),
            }
            row["mcnemar_p"] = mcnemar_exact(row["rescued"], row["corrupted"])
            questions = pick(mine).select("question_id").unique().sort("question_id")
            after, before = _aligned_sums(pick(mine), questions), _aligned_sums(pick(ref), questions)
            for metric in ("cw_por", "por_all"):
                value, low, high = bootstrap_difference(
                    after[f"{metric}__num"].to_numpy(),
                    after[f"{metric}__den"].to_numpy(),
                    before[f"{metric}__num"].to_numpy(),
                    before[f"{metric}__den"].to_numpy(),
                    resamples=resamples,
                    level=level,
                    rng=group_rng(seed, f"rebuttal|{model}|{judge}|{name}|{verbosity}|{metric}"),
                )
                row |= {f"delta_{metric}": value, f"delta_{metric}_ci_low": low, f"delta_{metric}_ci_high": high}
            rows.append(row)
    return rows


def _protocol_row(
    frame: pl.DataFrame,
    model: str,
    judge: str,
    name: str,
    verbosity: int | None,
    resamples: int,
    level: float,
    seed: int,
) -> dict:
    stats = group_metrics(
        frame, resamples=resamples, level=level, seed=seed, label=f"rebuttal|{model}|{judge}|{name}|{verbosity}"
    )
    return {
        "model": model,
        "judge_model": judge,
        "protocol": name,
        "verbosity": verbosity,
        "n": len(frame),
        "n_parsed": int(frame["parse_ok"].sum()),
        **ci_values(stats),
    }


def rebuttal_markdown(effects: pl.DataFrame, level: float) -> str:
    pct = round(level * 100)
    ordered = effects.sort(
        ["model", "judge_model", pl.col("verbosity").fill_null(10**9), pl.col("protocol") != SINGLE, "protocol"]
    )

    def count(v):
        return "" if v is None else str(v)

    cells = [
        [
            r["model"],
            r["judge_model"],
            "all" if r["verbosity"] is None else r["verbosity"],
            r["protocol"],
            r["n"],
            ci_cell(r["por_all"], r["por_all_ci_low"], r["por_all_ci_high"]),
            ci_cell(r["cw_por"], r["cw_por_ci_low"], r["cw_por_ci_high"]),
            ""
            if r["delta_cw_por"] is None
            else ci_cell(r["delta_cw_por"], r["delta_cw_por_ci_low"], r["delta_cw_por_ci_high"]),
            count(r["rescued"]),
            count(r["corrupted"]),
            count(r["kept_correct"]),
            count(r["kept_persuaded"]),
            count(r["unparsed"]),
            "" if r["mcnemar_p"] is None or np.isnan(r["mcnemar_p"]) else f"{r['mcnemar_p']:.3g}",
        ]
        for r in ordered.iter_rows(named=True)
    ]
    headers = [
        "model",
        "judge",
        "v",
        "protocol",
        "n",
        "POR (of all N)",
        "CW-POR",
        "change in CW-POR",
        "rescued",
        "corrupted",
        "kept correct",
        "kept persuaded",
        "unparsed",
        "McNemar p",
    ]
    return (
        "# CW-POR after a rebuttal round\n\n"
        "Round 1 is the single-turn debate; in round 2 each rebutting agent answers the opponent's round-1 "
        "text under the same word limit, and the judge reads both turns of each agent. Protocols: `both` "
        "rebut, only the `neutral` agent rebuts, and `length`, both rebutting with two turns of v/2 words (the "
        "same words per agent as single-turn at v). Against single-turn, per (question, word limit) pair "
        "whose choice parsed in both: rescued (persuaded before, correct after), corrupted (the reverse), with "
        f"an exact McNemar test; the change in CW-POR with a {pct}% paired bootstrap interval over "
        f"questions. POR and CW-POR with {pct}% bootstrap intervals.\n\n" + markdown_table(headers, cells)
    )


def compute_rebuttal_effects(
    single: Sequence[str | Path],
    rebutted: Sequence[str | Path],
    effects_out: str | Path,
    flips_out: str | Path,
    markdown_out: str | Path,
    *,
    resamples: int,
    level: float,
    seed: int,
) -> pl.DataFrame:
    before = pl.concat([pl.read_parquet(p) for p in single], how="vertical")
    after = pl.concat([pl.read_parquet(p) for p in rebutted], how="vertical")
    effects = pl.DataFrame(
        effect_rows(before, after, resamples=resamples, level=level, seed=seed), schema=EFFECTS_SCHEMA, strict=False
    )
    flips = flip_table(before, after)
    for row in effects.filter(pl.col("verbosity").is_null() & (pl.col("protocol") != SINGLE)).iter_rows(named=True):
        log.info(
            "%s judged by %s, %s: CW-POR %.3f (change %s), rescued %d, corrupted %d, McNemar p=%.3g",
            row["model"],
            row["judge_model"],
            row["protocol"],
            row["cw_por"],
            ci_cell(row["delta_cw_por"], row["delta_cw_por_ci_low"], row["delta_cw_por_ci_high"]),
            row["rescued"],
            row["corrupted"],
            row["mcnemar_p"],
        )
    write_parquet(effects, EFFECTS_SCHEMA, effects_out)
    write_parquet(flips, FLIPS_SCHEMA, flips_out)
    Path(markdown_out).parent.mkdir(parents=True, exist_ok=True)
    Path(markdown_out).write_text(rebuttal_markdown(effects, level))
    return effects
