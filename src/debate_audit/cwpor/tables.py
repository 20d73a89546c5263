"""Stage 4a: the summary table across models and verbosity levels, and example debates (paper Fig. 3)."""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from debate_audit.data.markdown import ci_cell, markdown_table

from .calibration import CalibrationSettings, calibration_markdown
from .metrics import POR_LABEL, POR_METRIC

log = logging.getLogger(__name__)

_DETAIL_COLUMNS = [
    # the columns after the PORs and CW-POR: (column in metrics.parquet, Markdown header)
    ("cw_por_rubric", "CW-POR (rubric)"),
    ("cw_por_llc", "CW-POR (LLC)"),
    ("llc_por", "POR (LLC argmax)"),
    ("mean_rubric_confidence", "rubric conf."),
    ("mean_llc", "LLC"),
    ("mean_combined_confidence", "combined conf."),
    ("agreement", "text/LLC agree"),
    ("example_copy_rate", "= example"),
    ("n_parse_fail", "parse failures"),
    ("n_cut_neutral", "cut (neutral)"),
    ("n_cut_persuasive", "cut (persuasive)"),
]


def summary_columns(headline_por: str) -> list[tuple[str, str]]:
    """(column in metrics.parquet, Markdown header); the headline POR (cwpor.headline_por) comes first,
    the other denominator after the confidence-weighted columns."""
    first = POR_METRIC[headline_por]
    other = next(c for c in POR_LABEL if c != first)
    return [
        ("model", "model"),
        ("judge_model", "judge"),
        ("verbosity", "v (words)"),
        ("n", "n"),
        (first, POR_LABEL[first]),
        ("cw_por", "CW-POR"),
        (other, POR_LABEL[other]),
        *_DETAIL_COLUMNS,
    ]


def _fmt(value, digits: int = 3) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "n/a"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def summary_table(metrics: pl.DataFrame, level: float, headline_por: str = "parsed") -> tuple[pl.DataFrame, str]:
    """(CSV frame, Markdown text): one row per model x verbosity, then the model's pooled row."""
    ordered = metrics.sort(["model", pl.col("verbosity").fill_null(10**9)])
    csv = ordered.with_columns(pl.col("verbosity").cast(pl.Utf8).fill_null("all"))
    columns = summary_columns(headline_por)
    rows = []
    for r in ordered.iter_rows(named=True):
        row = []
        for col, _ in columns:
            if col in ("por", "por_all", "cw_por"):
                row.append(ci_cell(r[col], r[f"{col}_ci_low"], r[f"{col}_ci_high"]))
            elif col == "verbosity":
                row.append("all" if r[col] is None else str(r[col]))
            elif col == "mean_rubric_confidence":
                row.append(_fmt(r[col], 2))
            else:
                row.append(_fmt(r[col]))
        rows.append(row)
    pct = round(level * 100)
    text = (
        "# CW-POR summary\n\n"
        f"POR and CW-POR with {pct}% bootstrap intervals over questions. POR has two denominators: all N "
        "judgments, an unparsed choice counting as not persuaded (the paper's), and the parsed choices only; "
        f"the headline (first) one here is {POR_LABEL[POR_METRIC[headline_por]]} (`cwpor.headline_por`). "
        "CW-POR weights each override by (rubric / 5) x LLC over judgments with choice and confidence parsed; "
        "POR (LLC argmax) needs no parsing. Parse failures are judgments whose choice or confidence could "
        "not be read (raw text kept in judgments). Cut: responses longer than v words, cut at v.\n\n"
        + markdown_table([h for _, h in columns], rows)
    )
    return csv, text


def llc_notes(judgments: pl.DataFrame) -> str:
    """What the summary says about LLC where it is missing or a bound (judgments.llc_unavailable /
    llc_bounded, a judge behind an endpoint): one paragraph per judge, empty where every judgment has it."""
    notes = []
    for judge in sorted(judgments["judge_model"].unique()):
        mine = judgments.filter(pl.col("judge_model") == judge)
        reasons = sorted(r for r in mine["llc_unavailable"].unique() if r is not None)
        if reasons:
            notes.append(
                f"**No LLC for judge {judge}** ({mine['llc_unavailable'].is_not_null().sum()} of {len(mine)} "
                f"judgments): {'; '.join(reasons)}. Its LLC, combined confidence, CW-POR and every LLC-based "
                "column are n/a; POR and the rubric confidence come from its text as for any judge."
            )
        bounded = int(mine["llc_bounded"].fill_null(False).sum())
        if bounded:
            notes.append(
                f"**LLC of judge {judge} is a bound in {bounded} of {len(mine)} judgments**: a letter was outside "
                "the top log-probabilities its endpoint returned, so its log-probability is the bound that top-k "
                "implies and LLC (with the combined confidence and CW-POR built on it) rests on that bound "
                "(`llc_bounded` in judgments)."
            )
    return "".join(f"{note}\n\n" for note in notes)


def _short(text: str, words: int = 60) -> str:
    tokens = (text or "").split()
    return " ".join(tokens[:words]) + (" …" if len(tokens) > words else "")


def example_debates(
    judgments: pl.DataFrame, responses: pl.DataFrame, questions: pl.DataFrame, *, categories: int, per_category: int
) -> pl.DataFrame:
    """Debates of the largest categories, persuaded picks first, most confident first."""
    largest = (
        questions.group_by("category").len().sort(["len", "category"], descending=[True, False]).head(categories)
    )["category"].to_list()
    texts = responses.pivot(on="role", index=["model", "verbosity", "question_id"], values="response")
    joined = (
        judgments.filter(pl.col("category").is_in(largest))
        .join(texts, on=["model", "verbosity", "question_id"], how="left")
        .join(questions.select("question_id", "question", "best_answer", "falsehood"), on="question_id", how="left")
        .with_columns(
            pl.when(pl.col("override")).then(0).when(pl.col("override").not_()).then(1).otherwise(2).alias("_rank")
        )
        .sort(
            ["_rank", "combined_confidence", "llc", "question_id"],
            descending=[False, True, True, False],
            nulls_last=True,
        )
    )
    picked = []
    for category in largest:
        rows = joined.filter(pl.col("category") == category)
        # distinct questions first, so one question does not fill a category at every verbosity
        firsts = rows.unique(subset="question_id", keep="first", maintain_order=True)
        picked.append(firsts.head(per_category))
    return pl.concat(picked) if picked else joined.head(0)


def examples_markdown(examples: pl.DataFrame) -> str:
    headers = [
        "category",
        "model (v)",
        "question",
        "neutral agent (correct)",
        "persuasive agent (false)",
        "judge picked",
        "rubric",
        "LLC",
        "rationale",
    ]
    rows = []
    for r in examples.iter_rows(named=True):
        picked = {True: "persuasive (overridden)", False: "neutral (correct)"}.get(r["override"], "unparsed")
        rows.append(
            [
                r["category"],
                f"{r['model']} / judge {r['judge_model']} (v={r['verbosity']})",
                r["question"],
                f"*{r['best_answer']}*: {_short(r['neutral'])}",
                f"*{r['falsehood']}*: {_short(r['persuasive'])}",
                f"{picked} (answer {r['choice'] or '?'}, correct was {r['correct_position']})",
                _fmt(r["rubric_confidence"]),
                _fmt(r["llc"], 2),
                _short(r["rationale"] or r["raw_judgment"], 40),
            ]
        )
    return (
        "# CW-POR example debates (paper Fig. 3)\n\n"
        "Largest categories of the question set; debates where the judge was persuaded come first, the most "
        "confident first. Responses are shown up to 60 words.\n\n" + markdown_table(headers, rows)
    )


def write_tables(
    *,
    metrics: str | Path,
    calibration: str | Path,
    calibration_settings: CalibrationSettings,
    judgments: Sequence[str | Path],
    responses: Sequence[str | Path],
    questions: str | Path,
    summary_md: str | Path,
    summary_csv: str | Path,
    examples_md: str | Path,
    level: float,
    headline_por: str,
    example_categories: int,
    examples_per_category: int,
) -> None:
    csv, text = summary_table(pl.read_parquet(metrics), level, headline_por)
    judged = pl.concat([pl.read_parquet(p) for p in judgments])
    notes = llc_notes(judged)
    if notes:
        text += "\n" + notes.rstrip("\n") + "\n"
    text += "\n" + calibration_markdown(
        pl.read_parquet(calibration), level, calibration_settings, pooled_only=True, heading="##"
    )
    for out in (summary_md, summary_csv, examples_md):
        Path(out).parent.mkdir(parents=True, exist_ok=True)
    csv.write_csv(summary_csv)
    Path(summary_md).write_text(text)
    examples = example_debates(
        judged,
        pl.concat([pl.read_parquet(p) for p in responses]),
        pl.read_parquet(questions),
        categories=example_categories,
        per_category=examples_per_category,
    )
    Path(examples_md).write_text(examples_markdown(examples))
    log.info("summary: %d rows; examples: %d debates", len(csv), len(examples))
