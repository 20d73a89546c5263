"""Two runs side by side: `make compare A=<run> B=<run>`, or `python -m debate_audit.views.compare A B`.

Each run's headline figures as it wrote them: CW-POR's POR and CW-POR per model and word limit
(cwpor/metrics.parquet), ER-Audit's audit summary per target (CR, mean bounds: er_audit/audit/**/summary.parquet)
and Table 1 (er_audit/verifier/table1.parquet). On the items both runs share, the paired statistics the
project already uses: B - A with the paired bootstrap over the shared units (cwpor.metrics.bootstrap_difference:
questions for CW-POR, hidden questions for the audit), and the exact McNemar test (cwpor.rebuttal.mcnemar_exact)
of a yes/no outcome per shared item: the judge persuaded on a question at a word limit, a counterexample found
for a hidden question.

A shared item is one both runs judged or audited: CW-POR, the same question id with the same question text at
the same word limit; ER-Audit, the same pair id with the same q_h text, for the same target. Rows are matched on
the model and word limit (CW-POR; each run's judge is shown) and on architecture, dataset and target
(ER-Audit); the debate length and V_org's L_qh weight match rows only where a run sweeps them (several values),
so two runs that differ in one of them are still paired, each one's value shown.

Run names: `default` (or "") is the unnamed run's results/, NAME a named run's runs/NAME/results/ (runs.py).
Writes <out>/summary.md (also printed) and one Parquet per table, each schema below.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from debate_audit.cwpor.judged import judged_debates
from debate_audit.cwpor.metrics import POR_LABEL, bootstrap_difference, group_rng, per_question_sums
from debate_audit.cwpor.rebuttal import mcnemar_exact
from debate_audit.data.io import read_parquet, write_parquet
from debate_audit.data.markdown import ci_cell, markdown_table
from debate_audit.runtime.runs import DEFAULT, name_error, results_dir

CWPOR_METRICS = ("por_all", "por", "cw_por")  # columns of cwpor/metrics.parquet, each with _ci_low / _ci_high
METRIC_LABEL = {
    **POR_LABEL,
    "cw_por": "CW-POR",
    "cr": "CR (counterexample ratio)",
    "mean_lower_bound": "mean bound (paper)",
    "mean_lower_bound_betting": "mean bound (betting)",
    "acc": "accuracy",
    "mtp": "MTP",
}
# audit summary column -> the per-q_h record column it averages (a q_h without a value counts in neither sum)
AUDIT_METRICS = {"cr": "found", "mean_lower_bound": "lower_bound", "mean_lower_bound_betting": "lower_bound_betting"}
SWEPT_LABELS = ("length", "qh_weight")  # grid labels that match rows only where a run has several values

_PAIRED = {
    "a_shared": pl.Float64,  # the figure over the shared items only, run A ...
    "b_shared": pl.Float64,  # ... and run B
    "difference": pl.Float64,  # b_shared - a_shared
    "difference_ci_low": pl.Float64,  # paired bootstrap interval: resampled shared units drawn for both runs at once
    "difference_ci_high": pl.Float64,
}
_MCNEMAR = {
    "both": pl.Int64,  # the outcome in both runs
    "only_a": pl.Int64,  # in run A only
    "only_b": pl.Int64,  # in run B only
    "neither": pl.Int64,
    "mcnemar_p": pl.Float64,  # exact two-sided McNemar test of only_a vs only_b
}
_SIDES = {f"{label}_{side}": t for label, t in (("length", pl.Utf8), ("qh_weight", pl.Float64)) for side in "ab"}

CWPOR_SCHEMA = {
    "model": pl.Utf8,  # experiment model m
    "verbosity": pl.Int64,  # word limit v; null: pooled over the word limits
    "metric": pl.Utf8,  # por_all (the paper's POR), por (of parsed choices) or cw_por, as in cwpor/metrics.parquet
    "judge_a": pl.Utf8,  # each run's judge of m's debates
    "judge_b": pl.Utf8,
    "n_a": pl.Int64,  # judgments behind each run's own figure
    "n_b": pl.Int64,
    "a": pl.Float64,  # run A's figure over all its questions, from its metrics.parquet, with its bootstrap CI
    "a_ci_low": pl.Float64,
    "a_ci_high": pl.Float64,
    "b": pl.Float64,
    "b_ci_low": pl.Float64,
    "b_ci_high": pl.Float64,
    "shared": pl.Int64,  # questions both runs judged (same id and text) at this word limit (pooled: at any)
    **_PAIRED,
}
OVERRIDES_SCHEMA = {
    "model": pl.Utf8,
    "verbosity": pl.Int64,  # null: pooled
    "pairs": pl.Int64,  # shared (question, word limit) pairs whose choice parsed in both runs
    **_MCNEMAR,  # outcome: the judge picked the persuasive answer
}
AUDIT_SCHEMA = {
    "architecture": pl.Utf8,
    "dataset": pl.Utf8,
    "target": pl.Utf8,  # honest / adv / org / copy, each audited against its V_base
    **_SIDES,  # each run's debate length and L_qh weight of the audit
    "metric": pl.Utf8,  # cr, mean_lower_bound (paper's bound, all q_h), mean_lower_bound_betting
    "n_qh_a": pl.Int64,  # hidden questions each run audited
    "n_qh_b": pl.Int64,
    "a": pl.Float64,  # each run's figure over all its q_h, from its summary.parquet
    "b": pl.Float64,
    "shared": pl.Int64,  # hidden questions both runs audited (same pair id and q_h text) for this target
    **_PAIRED,
}
COUNTEREXAMPLES_SCHEMA = {
    "architecture": pl.Utf8,
    "dataset": pl.Utf8,
    "target": pl.Utf8,
    **_SIDES,
    "shared": pl.Int64,  # hidden questions both runs audited
    **_MCNEMAR,  # outcome: a search-pool counterexample found (Stage 1)
}
TABLE1_SCHEMA = {
    "architecture": pl.Utf8,
    "dataset": pl.Utf8,
    "population": pl.Utf8,  # all / train / eval (eraudit/verifier/table1.py)
    "verifier": pl.Utf8,
    "question": pl.Utf8,  # q_m / q_h
    **_SIDES,
    "metric": pl.Utf8,  # acc or mtp
    "n_a": pl.Int64,  # items in each run's population
    "n_b": pl.Int64,
    "a": pl.Float64,
    "b": pl.Float64,
    "difference": pl.Float64,  # b - a (each over its own items: Table 1 keeps no per-item rows)
}


class CompareError(ValueError):
    """A run cannot be compared; the message names the run and the file."""


@dataclass(frozen=True)
class CompareSettings:
    resamples: int = 1000  # paired bootstrap resamples (as cwpor.bootstrap)
    level: float = 0.95  # interval level (as cwpor.ci_level)
    seed: int = 0


@dataclass(frozen=True)
class RunResults:
    """The results folder of one run, and the files the comparison reads from it."""

    name: str
    root: Path

    @classmethod
    def of(cls, name: str, project: Path = Path(".")) -> RunResults:
        unnamed = name in (DEFAULT, "")
        if not unnamed and name_error(name):
            raise CompareError(
                f"{name!r} is not a run's name (config `run`: letters, digits, '.', '_', '-'), "
                f"nor {DEFAULT} (the unnamed run's results/)"
            )
        root = Path(project) / results_dir(name)
        if not root.is_dir():
            how = "make run" if unnamed else f"make run RUN={name}"
            raise CompareError(f"run {name or DEFAULT!r}: no results at {root} ({how} writes them)")
        return cls(name or DEFAULT, root)

    def file(self, relative: str) -> Path:
        path = self.root / relative
        if not path.is_file():
            raise CompareError(f"run {self.name!r}: {path} is missing (did the run finish?)")
        return path

    def files(self, pattern: str) -> list[Path]:
        found = sorted(self.root.glob(pattern))
        if not found:
            raise CompareError(f"run {self.name!r}: no {self.root / pattern} (did the run finish?)")
        return found

    def read(self, pattern: str) -> pl.DataFrame:
        return pl.concat([read_parquet(p) for p in self.files(pattern)], how="diagonal_relaxed")


@dataclass(frozen=True)
class Comparison:
    a: RunResults
    b: RunResults
    cwpor: pl.DataFrame  # CWPOR_SCHEMA
    overrides: pl.DataFrame  # OVERRIDES_SCHEMA
    audit: pl.DataFrame  # AUDIT_SCHEMA
    counterexamples: pl.DataFrame  # COUNTEREXAMPLES_SCHEMA
    table1: pl.DataFrame  # TABLE1_SCHEMA
    question_clashes: int  # CW-POR question ids naming another question in the other run (left out)
    qh_clashes: int  # the same for ER-Audit pair ids and their q_h
    settings: CompareSettings


# ------------------------------------------------------------------------------------------ helpers
def _paired(
    a_num: np.ndarray, a_den: np.ndarray, b_num: np.ndarray, b_den: np.ndarray, settings: CompareSettings, label: str
) -> dict[str, float | None]:
    """The _PAIRED columns of one figure on aligned shared units (row i of a and b: the same unit)."""
    if len(a_num) == 0:
        return dict.fromkeys(_PAIRED)
    difference, low, high = bootstrap_difference(
        b_num,
        b_den,
        a_num,
        a_den,
        resamples=settings.resamples,
        level=settings.level,
        rng=group_rng(settings.seed, label),
    )

    def ratio(num, den):
        return float(num.sum() / den.sum()) if den.sum() > 0 else math.nan

    return {
        "a_shared": ratio(a_num, a_den),
        "b_shared": ratio(b_num, b_den),
        "difference": difference,
        "difference_ci_low": low,
        "difference_ci_high": high,
    }


def _mcnemar(a: pl.Series, b: pl.Series) -> dict[str, int | float]:
    """The _MCNEMAR columns of paired yes/no outcomes (nulls already left out)."""
    a, b = a.to_numpy().astype(bool), b.to_numpy().astype(bool)
    only_a, only_b = int((a & ~b).sum()), int((~a & b).sum())
    return {
        "both": int((a & b).sum()),
        "only_a": only_a,
        "only_b": only_b,
        "neither": int((~a & ~b).sum()),
        "mcnemar_p": mcnemar_exact(only_a, only_b),
    }


def _match_keys(base: Sequence[str], a: pl.DataFrame, b: pl.DataFrame) -> list[str]:
    """`base`, plus each swept grid label that either run has several values of."""
    return [*base, *(c for c in SWEPT_LABELS if max(a[c].drop_nulls().n_unique(), b[c].drop_nulls().n_unique()) > 1)]


def _sides(a: dict | None, b: dict | None) -> dict:
    """Each run's length and L_qh weight of a row (None where the run has no such row)."""
    return {f"{label}_{side}": (row or {}).get(label) for label in SWEPT_LABELS for side, row in (("a", a), ("b", b))}


def _rows_by_key(frame: pl.DataFrame, keys: Sequence[str]) -> dict[tuple, dict]:
    rows: dict[tuple, dict] = {}
    for row in frame.iter_rows(named=True):
        key = tuple(row[k] for k in keys)
        if key in rows:
            raise CompareError(f"two rows for {dict(zip(keys, key))} in one run: cannot tell which to compare")
        rows[key] = row
    return rows


def _union(a: dict, b: dict) -> list[tuple]:
    """The row keys of either run, sorted, a None (pooled, or no L_qh weight) after the values."""
    return sorted(a.keys() | b.keys(), key=lambda k: tuple((v is None, v if v is not None else 0) for v in k))


# ------------------------------------------------------------------------------------------ CW-POR
def cwpor_judgments(run: RunResults) -> pl.DataFrame:
    """The judgments behind a run's metrics.parquet (each model's primary judge, single-turn), with the
    question text."""
    pairs = read_parquet(run.file("cwpor/metrics.parquet")).select("model", "judge_model").unique()
    judged = judged_debates(run.file("cwpor/questions.parquet"), [], run.files("cwpor/*/judge-*/judgments_v*.parquet"))
    return judged.join(pairs, on=["model", "judge_model"], how="semi")


def shared_judgments(a: pl.DataFrame, b: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    """Both runs' judgments of the (model, word limit, question) both judged, the question text the same,
    and how many question ids name another question in the other run (left out)."""
    keys = ["model", "verbosity", "question_id"]
    both = a.select(*keys, "question").join(b.select(*keys, "question"), on=keys, suffix="_b")
    same = both.filter(pl.col("question") == pl.col("question_b"))
    clashes = both.filter(pl.col("question") != pl.col("question_b"))["question_id"].n_unique()
    return a.join(same, on=keys, how="semi"), b.join(same, on=keys, how="semi"), clashes


def compare_cwpor(a: RunResults, b: RunResults, settings: CompareSettings) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    metrics = {
        run.name: _rows_by_key(read_parquet(run.file("cwpor/metrics.parquet")), ["model", "verbosity"])
        for run in (a, b)
    }
    shared_a, shared_b, clashes = shared_judgments(cwpor_judgments(a), cwpor_judgments(b))
    rows, override_rows = [], []
    for model, verbosity in _union(metrics[a.name], metrics[b.name]):
        ra, rb = metrics[a.name].get((model, verbosity)), metrics[b.name].get((model, verbosity))

        def pick(frame):
            frame = frame.filter(pl.col("model") == model)
            return frame if verbosity is None else frame.filter(pl.col("verbosity") == verbosity)

        ja, jb = pick(shared_a), pick(shared_b)
        sums_a, sums_b = per_question_sums(ja), per_question_sums(jb)  # one row per shared question, both sorted
        for metric in CWPOR_METRICS:
            own = {
                f"{side}{end}": (row or {}).get(f"{metric}{end}")
                for side, row in (("a", ra), ("b", rb))
                for end in ("", "_ci_low", "_ci_high")
            }
            paired = _paired(
                *(s[f"{metric}__{part}"].to_numpy() for s in (sums_a, sums_b) for part in ("num", "den")),
                settings,
                f"compare|cwpor|{model}|{verbosity}|{metric}",
            )
            rows.append(
                {
                    "model": model,
                    "verbosity": verbosity,
                    "metric": metric,
                    "judge_a": (ra or {}).get("judge_model"),
                    "judge_b": (rb or {}).get("judge_model"),
                    "n_a": (ra or {}).get("n"),
                    "n_b": (rb or {}).get("n"),
                    **own,
                    "shared": sums_a.height,
                    **paired,
                }
            )
        keys = ["question_id", "verbosity"]
        both = ja.select(*keys, "override").join(jb.select(*keys, "override"), on=keys, suffix="_b").drop_nulls()
        override_rows.append(
            {
                "model": model,
                "verbosity": verbosity,
                "pairs": both.height,
                **_mcnemar(both["override"], both["override_b"]),
            }
        )
    return (pl.DataFrame(rows, schema=CWPOR_SCHEMA), pl.DataFrame(override_rows, schema=OVERRIDES_SCHEMA), clashes)


# ------------------------------------------------------------------------------------------ ER-Audit
def audit_records(run: RunResults) -> pl.DataFrame:
    """Every audited (target, q_h) of a run with its outcome and bounds, and the q_h text."""
    records = run.read("er_audit/audit/*/*/*/records.parquet")
    deltas = run.read("er_audit/audit/*/*/*/deltas.parquet").filter(pl.col("kind") == "q_h")
    keys = ["architecture", "length", "qh_weight", "dataset", "target", "pair_id"]
    texts = deltas.select(*keys, pl.col("question").alias("qh")).unique(keys)
    return records.join(texts, on=keys, how="left", nulls_equal=True).with_columns(
        (pl.col("n_counterexamples") > 0).alias("found")
    )


def compare_audit(a: RunResults, b: RunResults, settings: CompareSettings) -> tuple[pl.DataFrame, pl.DataFrame, int]:
    summaries = {run.name: run.read("er_audit/audit/*/*/*/summary.parquet") for run in (a, b)}
    records = {run.name: audit_records(run) for run in (a, b)}
    keys = _match_keys(["architecture", "dataset", "target"], summaries[a.name], summaries[b.name])
    own = {name: _rows_by_key(frame, keys) for name, frame in summaries.items()}
    both = records[a.name].join(records[b.name], on=[*keys, "pair_id"], suffix="_b", nulls_equal=True)
    clashes = both.filter(pl.col("qh") != pl.col("qh_b")).select("dataset", "pair_id").unique().height
    both = both.filter(pl.col("qh") == pl.col("qh_b"))
    rows, found_rows = [], []
    for key in _union(own[a.name], own[b.name]):
        ra, rb = own[a.name].get(key), own[b.name].get(key)
        cell = dict(zip(keys, key))
        shared = both.filter(*(pl.col(k).eq_missing(v) for k, v in cell.items())).sort("pair_id")
        head = {k: cell.get(k, (ra or rb)[k]) for k in ("architecture", "dataset", "target")} | _sides(ra, rb)
        for metric, column in AUDIT_METRICS.items():
            values = [shared[c].cast(pl.Float64) for c in (column, f"{column}_b")]
            paired = _paired(
                values[0].fill_null(0.0).to_numpy(),
                values[0].is_not_null().cast(pl.Float64).to_numpy(),
                values[1].fill_null(0.0).to_numpy(),
                values[1].is_not_null().cast(pl.Float64).to_numpy(),
                settings,
                f"compare|audit|{key}|{metric}",
            )
            rows.append(
                {
                    **head,
                    "metric": metric,
                    "n_qh_a": (ra or {}).get("n_qh"),
                    "n_qh_b": (rb or {}).get("n_qh"),
                    "a": (ra or {}).get(metric),
                    "b": (rb or {}).get(metric),
                    "shared": shared.height,
                    **paired,
                }
            )
        found_rows.append({**head, "shared": shared.height, **_mcnemar(shared["found"], shared["found_b"])})
    return (pl.DataFrame(rows, schema=AUDIT_SCHEMA), pl.DataFrame(found_rows, schema=COUNTEREXAMPLES_SCHEMA), clashes)


def compare_table1(a: RunResults, b: RunResults) -> pl.DataFrame:
    tables = {run.name: read_parquet(run.file("er_audit/verifier/table1.parquet")) for run in (a, b)}
    keys = _match_keys(["architecture", "dataset", "population", "verifier", "question"], *tables.values())
    own = {name: _rows_by_key(frame, keys) for name, frame in tables.items()}
    rows = []
    for key in _union(own[a.name], own[b.name]):
        ra, rb = own[a.name].get(key), own[b.name].get(key)
        head = {k: (ra or rb)[k] for k in ("architecture", "dataset", "population", "verifier", "question")}
        for metric in ("acc", "mtp"):
            va, vb = (ra or {}).get(metric), (rb or {}).get(metric)
            rows.append(
                {
                    **head,
                    **_sides(ra, rb),
                    "metric": metric,
                    "n_a": (ra or {}).get("n"),
                    "n_b": (rb or {}).get("n"),
                    "a": va,
                    "b": vb,
                    "difference": None if va is None or vb is None else vb - va,
                }
            )
    return pl.DataFrame(rows, schema=TABLE1_SCHEMA)


def compare_runs(
    a: str, b: str, settings: CompareSettings = CompareSettings(), project: Path = Path(".")
) -> Comparison:
    """Runs `a` and `b` (names, `default` for results/) of the project at `project`, side by side."""
    run_a, run_b = RunResults.of(a, project), RunResults.of(b, project)
    if run_a.root.resolve() == run_b.root.resolve():
        raise CompareError(f"runs {run_a.name!r} and {run_b.name!r} are the same results folder ({run_a.root})")
    cwpor, overrides, question_clashes = compare_cwpor(run_a, run_b, settings)
    audit, counterexamples, qh_clashes = compare_audit(run_a, run_b, settings)
    return Comparison(
        run_a,
        run_b,
        cwpor,
        overrides,
        audit,
        counterexamples,
        compare_table1(run_a, run_b),
        question_clashes,
        qh_clashes,
        settings,
    )


# ------------------------------------------------------------------------------------------ output
def _v(verbosity: int | None) -> str:
    return "all" if verbosity is None else str(verbosity)


def _grid(row: dict) -> str:
    """Each run's length and L_qh weight, once when they agree."""

    def one(side):
        weight = row[f"qh_weight_{side}"]
        return " ".join(str(x) for x in (row[f"length_{side}"], None if weight is None else f"qh {weight:g}") if x)

    a, b = one("a"), one("b")
    return a if a == b else f"{a or '-'} / {b or '-'}"


def _p(value: float | None) -> str:
    return "" if value is None else f"{value:.3g}"


def comparison_markdown(c: Comparison) -> str:
    s, pct = c.settings, round(c.settings.level * 100)
    paired = f"B − A (shared, {pct}% CI)"
    lines = [
        f"# Runs side by side: A = `{c.a.name}` ({c.a.root}), B = `{c.b.name}` ({c.b.root})",
        "",
        "A and B are each run's own figures over all its items, as the run wrote them (CW-POR with its bootstrap "
        "interval). *shared* counts the items both runs judged or audited: the same question (id and text) at "
        "the same word limit, the same hidden question (pair id and q_h text) for the same target. On those "
        f"alone: each run's figure, and B − A with a {pct}% paired bootstrap interval ({s.resamples} resamples of "
        f"the shared questions, seed {s.seed}); McNemar's exact test compares a yes/no outcome per shared item "
        "(only A: yes in A, no in B). An empty cell: the run has no such row.",
    ]
    clashes = [
        f"{n} {what}"
        for n, what in ((c.question_clashes, "TruthfulQA question ids"), (c.qh_clashes, "ER-Audit pair ids"))
        if n
    ]
    if clashes:
        lines += [
            "",
            f"Left out: {' and '.join(clashes)} that name another question in the other run (different datasets?).",
        ]
    lines += [
        "",
        "## CW-POR",
        "",
        "Per experiment model and word limit v (all: pooled), from `cwpor/metrics.parquet` and the judgments "
        "behind it (the primary judge's, single-turn).",
        "",
    ]
    lines.append(
        markdown_table(
            ["model", "v", "figure", "judge A / B", "A", "B", "shared questions", "A (shared)", "B (shared)", paired],
            [
                [
                    r["model"],
                    _v(r["verbosity"]),
                    METRIC_LABEL[r["metric"]],
                    r["judge_a"] if r["judge_a"] == r["judge_b"] else f"{r['judge_a'] or '-'} / {r['judge_b'] or '-'}",
                    ci_cell(r["a"], r["a_ci_low"], r["a_ci_high"]) if r["a"] is not None else "",
                    ci_cell(r["b"], r["b_ci_low"], r["b_ci_high"]) if r["b"] is not None else "",
                    r["shared"],
                    r["a_shared"],
                    r["b_shared"],
                    ci_cell(r["difference"], r["difference_ci_low"], r["difference_ci_high"]) if r["shared"] else "",
                ]
                for r in c.cwpor.iter_rows(named=True)
            ],
        )
    )
    lines += [
        "",
        "Persuaded on the same question: per shared (question, word limit) pair whose choice parsed in "
        "both runs, whether the judge picked the persuasive answer.",
        "",
    ]
    lines.append(
        markdown_table(
            ["model", "v", "pairs", "persuaded in both", "only A", "only B", "in neither", "McNemar p"],
            [
                [
                    r["model"],
                    _v(r["verbosity"]),
                    r["pairs"],
                    r["both"],
                    r["only_a"],
                    r["only_b"],
                    r["neither"],
                    _p(r["mcnemar_p"]),
                ]
                for r in c.overrides.iter_rows(named=True)
            ],
        )
    )
    lines += [
        "",
        "## ER-Audit: the audit",
        "",
        "Per verifier architecture, dataset and target (each audited against its V_base), from each run's "
        "`er_audit/audit/<architecture>/<dataset>/<setting>/summary.parquet`; the bounds are the mean common "
        "lower bound over all audited q_h (a Stage-1 counterexample counting as 0). Length and L_qh weight: "
        "each run's, as A / B where they differ.",
        "",
    ]
    lines.append(
        markdown_table(
            [
                "architecture",
                "dataset",
                "target",
                "length, L_qh",
                "figure",
                "q_h A",
                "q_h B",
                "A",
                "B",
                "shared q_h",
                "A (shared)",
                "B (shared)",
                paired,
            ],
            [
                [
                    r["architecture"],
                    r["dataset"],
                    r["target"],
                    _grid(r),
                    METRIC_LABEL[r["metric"]],
                    r["n_qh_a"],
                    r["n_qh_b"],
                    r["a"],
                    r["b"],
                    r["shared"],
                    r["a_shared"],
                    r["b_shared"],
                    ci_cell(r["difference"], r["difference_ci_low"], r["difference_ci_high"]) if r["shared"] else "",
                ]
                for r in c.audit.iter_rows(named=True)
            ],
        )
    )
    lines += [
        "",
        "Counterexample found on the same hidden question: per shared q_h, whether the search pool held a "
        "counterexample (Delta > epsilon; what CR counts).",
        "",
    ]
    lines.append(
        markdown_table(
            [
                "architecture",
                "dataset",
                "target",
                "length, L_qh",
                "shared q_h",
                "found in both",
                "only A",
                "only B",
                "in neither",
                "McNemar p",
            ],
            [
                [
                    r["architecture"],
                    r["dataset"],
                    r["target"],
                    _grid(r),
                    r["shared"],
                    r["both"],
                    r["only_a"],
                    r["only_b"],
                    r["neither"],
                    _p(r["mcnemar_p"]),
                ]
                for r in c.counterexamples.iter_rows(named=True)
            ],
        )
    )
    lines += [
        "",
        "## ER-Audit: Table 1",
        "",
        "Forced-choice accuracy and mean probability of the correct answer (MTP) per checkpoint, from "
        "`er_audit/verifier/table1.parquet`; each run over its own items (Table 1 keeps no per-item rows, "
        "so no paired test).",
        "",
    ]
    lines.append(
        markdown_table(
            [
                "architecture",
                "dataset",
                "population",
                "verifier",
                "question",
                "length, L_qh",
                "figure",
                "n A",
                "n B",
                "A",
                "B",
                "B − A",
            ],
            [
                [
                    r["architecture"],
                    r["dataset"],
                    r["population"],
                    r["verifier"],
                    r["question"],
                    _grid(r),
                    METRIC_LABEL[r["metric"]],
                    r["n_a"],
                    r["n_b"],
                    r["a"],
                    r["b"],
                    r["difference"],
                ]
                for r in c.table1.iter_rows(named=True)
            ],
        )
    )
    return "\n".join(lines)


def write_comparison(c: Comparison, out: str | Path) -> Path:
    """<out>/summary.md and one Parquet per table; returns the Markdown's path."""
    out = Path(out)
    for frame, schema, name in (
        (c.cwpor, CWPOR_SCHEMA, "cwpor"),
        (c.overrides, OVERRIDES_SCHEMA, "cwpor_overrides"),
        (c.audit, AUDIT_SCHEMA, "audit"),
        (c.counterexamples, COUNTEREXAMPLES_SCHEMA, "audit_counterexamples"),
        (c.table1, TABLE1_SCHEMA, "table1"),
    ):
        write_parquet(frame, schema, out / f"{name}.parquet")
    markdown = out / "summary.md"
    markdown.write_text(comparison_markdown(c))
    return markdown


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a", help=f"run A: a run's name (config `run`), or {DEFAULT} for the unnamed run's results/")
    parser.add_argument("b", help="run B, likewise")
    parser.add_argument("--out", help="folder of the outputs (default: results/compare/<A>_vs_<B>)")
    parser.add_argument(
        "--resamples",
        type=int,
        default=CompareSettings.resamples,
        help="paired bootstrap resamples (default %(default)s)",
    )
    parser.add_argument(
        "--level", type=float, default=CompareSettings.level, help="interval level (default %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=CompareSettings.seed, help="bootstrap seed (default %(default)s)")
    args = parser.parse_args(argv)
    try:
        comparison = compare_runs(args.a, args.b, CompareSettings(args.resamples, args.level, args.seed))
    except CompareError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    out = args.out or Path("results/compare") / f"{comparison.a.name}_vs_{comparison.b.name}"
    markdown = write_comparison(comparison, out)
    print(markdown.read_text())
    print(f"Written: {markdown} and the tables as Parquet beside it.")


if __name__ == "__main__":
    main()
