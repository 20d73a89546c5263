"""Judges from other families (issue 26): the debater x judge matrix of POR and CW-POR, and the contrast of
self-judging, same-family and other-family judges.

Every judge reads the same debates (one set of responses per experiment model), so the pairs differ only in
who judges. The contrast pools all judgments of a relation class (roles.relation) and compares classes with
a paired bootstrap over questions: every class judged the same questions.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import polars as pl

from debate_audit.data.io import write_parquet
from debate_audit.data.markdown import ci_cell, markdown_table

from .metrics import (
    HEADLINE_METRICS,
    POR_LABEL,
    bootstrap_difference,
    bootstrap_ratio,
    ci_schema,
    ci_values,
    group_metrics,
    group_rng,
    per_question_sums,
)
from .roles import OTHER_FAMILY, SAME_FAMILY, SELF, UNKNOWN_FAMILY, relation
from .tables import llc_notes

log = logging.getLogger(__name__)

MATRIX_METRICS = HEADLINE_METRICS

MATRIX_SCHEMA = {
    "model": pl.Utf8,  # experiment model m: whose debates were judged
    "model_family": pl.Utf8,  # its family (cwpor.families), null when not given
    "judge_model": pl.Utf8,  # the judge
    "judge_family": pl.Utf8,
    "relation": pl.Utf8,  # self, same-family, other-family, unknown-family (roles.relation)
    "verbosity": pl.Int64,  # word limit v; null: pooled over word limits
    "n": pl.Int64,  # judgments
    "n_parsed": pl.Int64,  # with choice and confidence parsed
    **ci_schema(MATRIX_METRICS),  # por_all, por, cw_por with their bootstrap CIs
}

CONTRAST_SCHEMA = {
    "comparison": pl.Utf8,  # a relation class (self, same-family, other-family) or a difference "a - b" of two
    "metric": pl.Utf8,  # por_all (the paper's POR), por (parsed choices) or cw_por
    "value": pl.Float64,  # pooled over every judgment of the class (ratio of sums), or the difference
    "ci_low": pl.Float64,  # percentile bootstrap over questions (paired for a difference)
    "ci_high": pl.Float64,
    "n_pairs": pl.Int64,  # (debater, judge) pairs in the class (a difference: in its first class)
    "n": pl.Int64,  # judgments in the class (a difference: in its first class)
}

CLASSES = (SELF, SAME_FAMILY, OTHER_FAMILY, UNKNOWN_FAMILY)
DIFFERENCES = ((OTHER_FAMILY, SAME_FAMILY), (OTHER_FAMILY, SELF), (SAME_FAMILY, SELF))


def with_relation(frame: pl.DataFrame, families: Mapping[str, str]) -> pl.DataFrame:
    pairs = frame.select("model", "judge_model").unique()
    rel = pairs.with_columns(
        pl.struct("model", "judge_model")
        .map_elements(lambda p: relation(families, p["model"], p["judge_model"]), return_dtype=pl.Utf8)
        .alias("relation"),
        pl.col("model").replace_strict(dict(families), default=None, return_dtype=pl.Utf8).alias("model_family"),
        pl.col("judge_model").replace_strict(dict(families), default=None, return_dtype=pl.Utf8).alias("judge_family"),
    )
    return frame.join(rel, on=["model", "judge_model"], how="left")


def judge_matrix(
    frame: pl.DataFrame, families: Mapping[str, str], *, resamples: int, level: float, seed: int
) -> pl.DataFrame:
    """One row per debater x judge (x word limit, and pooled): POR both ways and CW-POR with CIs."""
    frame = with_relation(frame, families)
    rows = []
    for (model, judge), pair in sorted(frame.group_by(["model", "judge_model"]), key=lambda g: g[0]):
        first = pair.row(0, named=True)
        groups = [(None, pair)] + [
            (int(v), pair.filter(pl.col("verbosity") == v)) for v in sorted(pair["verbosity"].unique())
        ]
        for verbosity, group in groups:
            stats = group_metrics(
                group, resamples=resamples, level=level, seed=seed, label=f"cross|{model}|{judge}|{verbosity}"
            )
            rows.append(
                {
                    "model": model,
                    "model_family": first["model_family"],
                    "judge_model": judge,
                    "judge_family": first["judge_family"],
                    "relation": first["relation"],
                    "verbosity": verbosity,
                    "n": len(group),
                    "n_parsed": int(group["parse_ok"].sum()),
                    **ci_values(stats, MATRIX_METRICS),
                }
            )
    return pl.DataFrame(rows, schema=MATRIX_SCHEMA, strict=False)


def _class_sums(frame: pl.DataFrame, questions: pl.DataFrame) -> pl.DataFrame:
    """Per question (every question of the run, in one order), the metrics' numerator and denominator sums."""
    sums = per_question_sums(frame)
    return questions.join(sums, on="question_id", how="left").fill_null(0.0)


def family_contrast(
    frame: pl.DataFrame, families: Mapping[str, str], *, resamples: int, level: float, seed: int
) -> pl.DataFrame:
    """Each relation class pooled, and the paired differences other - same family, other - self, same - self."""
    frame = with_relation(frame, families)
    questions = frame.select("question_id").unique().sort("question_id")
    present = [c for c in CLASSES if (frame["relation"] == c).any()]
    sums = {c: _class_sums(frame.filter(pl.col("relation") == c), questions) for c in present}
    sizes = {
        c: (
            frame.filter(pl.col("relation") == c).select("model", "judge_model").n_unique(),
            int((frame["relation"] == c).sum()),
        )
        for c in present
    }
    rows = []
    for c in present:
        for m in MATRIX_METRICS:
            num, den = (sums[c][f"{m}__{k}"].to_numpy() for k in ("num", "den"))
            value = num.sum() / den.sum() if den.sum() > 0 else float("nan")
            low, high = bootstrap_ratio(
                num, den, resamples=resamples, level=level, rng=group_rng(seed, f"contrast|{c}|{m}")
            )
            rows.append(
                {
                    "comparison": c,
                    "metric": m,
                    "value": float(value),
                    "ci_low": low,
                    "ci_high": high,
                    "n_pairs": sizes[c][0],
                    "n": sizes[c][1],
                }
            )
    for a, b in DIFFERENCES:
        if a not in sums or b not in sums:
            continue
        for m in MATRIX_METRICS:
            value, low, high = bootstrap_difference(
                *(sums[a][f"{m}__{k}"].to_numpy() for k in ("num", "den")),
                *(sums[b][f"{m}__{k}"].to_numpy() for k in ("num", "den")),
                resamples=resamples,
                level=level,
                rng=group_rng(seed, f"contrast|{a}-{b}|{m}"),
            )
            rows.append(
                {
                    "comparison": f"{a} - {b}",
                    "metric": m,
                    "value": value,
                    "ci_low": low,
                    "ci_high": high,
                    "n_pairs": sizes[a][0],
                    "n": sizes[a][1],
                }
            )
    return pl.DataFrame(rows, schema=CONTRAST_SCHEMA, strict=False)


def cross_judge_markdown(matrix: pl.DataFrame, contrast: pl.DataFrame, level: float) -> str:
    pct = round(level * 100)
    pooled = matrix.filter(pl.col("verbosity").is_null())
    judges = list(dict.fromkeys(pooled.sort("judge_model")["judge_model"]))
    sections = []
    for metric in MATRIX_METRICS:
        label = POR_LABEL.get(metric, "CW-POR")
        cells = []
        for model in sorted(set(pooled["model"])):
            row = [f"{model} ({pooled.filter(pl.col('model') == model)['model_family'][0] or '?'})"]
            for judge in judges:
                hit = pooled.filter((pl.col("model") == model) & (pl.col("judge_model") == judge))
                row.append(
                    "-"
                    if hit.is_empty()
                    else ci_cell(*hit.select(metric, f"{metric}_ci_low", f"{metric}_ci_high").row(0))
                )
            cells.append(row)
        families = {r["judge_model"]: r["judge_family"] for r in pooled.iter_rows(named=True)}
        headers = ["debater \\ judge", *(f"{j} ({families[j] or '?'})" for j in judges)]
        sections.append(f"## {label}, debater x judge\n\n" + markdown_table(headers, cells))
    contrast_rows = [
        [
            r["comparison"],
            POR_LABEL.get(r["metric"], "CW-POR"),
            ci_cell(r["value"], r["ci_low"], r["ci_high"]),
            r["n_pairs"],
            r["n"],
        ]
        for r in contrast.iter_rows(named=True)
    ]
    return (
        "# CW-POR across judges\n\n"
        f"Every judge read the same debates of each experiment model (debater); {pct}% bootstrap intervals "
        "over questions, all word limits pooled (per word limit: `cross_judge.parquet`). Families from "
        "`cwpor.families` (`?`: not given). Relation classes: `self` (a model judging its own debates), "
        "`same-family`, `other-family`; a difference `a - b` is the paired bootstrap over the questions both "
        "classes judged.\n\n"
        + "\n".join(sections)
        + "\n## Same-family / other-family contrast\n\n"
        + markdown_table(["comparison", "metric", "value", "pairs", "judgments"], contrast_rows)
    )


def compute_cross_judge(
    judgments: Sequence[str | Path],
    matrix_out: str | Path,
    contrast_out: str | Path,
    markdown_out: str | Path,
    *,
    families: Mapping[str, str],
    resamples: int,
    level: float,
    seed: int,
) -> tuple[pl.DataFrame, pl.DataFrame]:
    frame = pl.concat([pl.read_parquet(p) for p in judgments], how="vertical")
    matrix = judge_matrix(frame, families, resamples=resamples, level=level, seed=seed)
    contrast = family_contrast(frame, families, resamples=resamples, level=level, seed=seed)
    for row in matrix.filter(pl.col("verbosity").is_null()).iter_rows(named=True):
        log.info(
            "%s judged by %s (%s): n=%d POR(all)=%.3f CW-POR=%s",
            row["model"],
            row["judge_model"],
            row["relation"],
            row["n"],
            row["por_all"],
            ci_cell(row["cw_por"], row["cw_por_ci_low"], row["cw_por_ci_high"]),
        )
    write_parquet(matrix, MATRIX_SCHEMA, matrix_out)
    write_parquet(contrast, CONTRAST_SCHEMA, contrast_out)
    Path(markdown_out).parent.mkdir(parents=True, exist_ok=True)
    notes = llc_notes(frame)  # judges without LLC, or with LLC resting on an endpoint's top-k bound
    Path(markdown_out).write_text(cross_judge_markdown(matrix, contrast, level) + ("\n" + notes if notes else ""))
    return matrix, contrast
