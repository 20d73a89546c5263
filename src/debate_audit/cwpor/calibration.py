"""Calibration of every confidence signal of the CW-POR judge (issue 26), with question-level bootstrap CIs.

The paper notes "confidence calibration gaps" (confidence usually drops on wrong picks, but some judges stay
confident and inflate CW-POR) without measuring them. Per experiment model, judge and word limit (and pooled
over word limits), for each signal in SIGNALS:

- ECE: the expected calibration error, sum over bins of (bin share) x |mean confidence - accuracy|. The
  rubric's five levels are its bins; continuous signals use `bins` equal-mass bins over the judgments
  sorted by (confidence, question id, word limit), bin k holding positions floor(k n / bins) ..
  floor((k + 1) n / bins) - 1. Not reported below `min_judgments` judgments.
- Brier score, mean (confidence - outcome)^2; the signed gap, mean confidence - accuracy (> 0: overconfident).
- AUROC of the confidence for correct against persuaded picks, a tie counting 1/2 (Mann-Whitney).
- noise ECE: the ECE of the same confidences with outcomes redrawn as Bernoulli(confidence), `noise_draws`
  times (mean and 95th percentile): what sampling noise alone gives a perfectly calibrated judge, so a real
  gap can be told from noise.

Every metric is written once, for a matrix of judgment weights (one row per resample): weights 1 are the
point estimate, the counts of a question-level bootstrap draw are a resample (a question drawn twice counts
its judgments twice; equal-mass bins are cut in the expanded, sorted sample, so copies of one judgment may
straddle a bin edge and are split there).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from debate_audit.data.io import write_parquet
from debate_audit.data.markdown import ci_cell, markdown_table

from .metrics import group_rng, percentile_interval

log = logging.getLogger(__name__)

RUBRIC_LEVELS = 5
CHUNK = 256  # bootstrap resamples per weight matrix (memory: CHUNK x judgments floats)


@dataclass(frozen=True)
class Signal:
    name: str
    kind: str  # "probability", or "weight" (combined confidence: not a probability, read its ECE as a gap only)
    rubric: bool  # binned by the rubric's five levels (else equal-mass bins)
    rows: pl.Expr  # the judgments the signal is defined on
    confidence: pl.Expr
    correct: pl.Expr  # the outcome the confidence is about
    meaning: str


_parsed = pl.col("parse_ok")
_rubric = pl.col("rubric_confidence").cast(pl.Float64)
_text_correct = pl.col("override").not_()

SIGNALS = [
    Signal(
        "rubric_r5",
        "probability",
        True,
        _parsed,
        _rubric / 5,
        _text_correct,
        "rubric r / 5 (the paper's scaling), outcome: the text choice is the true answer",
    ),
    Signal(
        "rubric_prob",
        "probability",
        True,
        _parsed,
        0.5 + (_rubric - 1) / 8,
        _text_correct,
        "rubric as a two-way probability, 0.5 + (r - 1) / 8 (1: a guess, 5: certainty)",
    ),
    Signal(
        "llc",
        "probability",
        False,
        pl.col("llc").is_not_null(),  # all judgments but those of a judge without log-probabilities
        pl.col("llc"),
        pl.col("llc_override").not_(),
        "LLC, the larger two-way A/B probability, on all judgments; outcome: the LLC's argmax is true",
    ),
    Signal(
        "combined",
        "weight",
        False,
        _parsed & pl.col("combined_confidence").is_not_null(),
        pl.col("combined_confidence"),
        _text_correct,
        "combined confidence (rubric / 5) x LLC, CW-POR's weight (not a probability)",
    ),
]
SIGNAL_NAMES = [s.name for s in SIGNALS]

# Judgment subsets: all, and for templates with an example reply (v3/v4) the rubric signals without the
# judgments whose confidence equals the example's (a judge copying the example is not reporting belief).
ALL_ROWS = "all"
NO_EXAMPLE_COPY = "without_example_confidence"


@dataclass(frozen=True)
class CalibrationSettings:
    bins: int = 10  # equal-mass bins of continuous signals
    min_judgments: int = 30  # no ECE below this many judgments
    noise_draws: int = 200  # redraws of the outcomes for the noise ECE

    def __post_init__(self) -> None:
        if self.bins < 1 or self.min_judgments < 1 or self.noise_draws < 0:
            raise ValueError(f"calibration settings out of range: {self}")


@dataclass(frozen=True)
class Scored:
    """One signal on one group of judgments, sorted by (confidence, question id, word limit)."""

    confidence: np.ndarray  # (n,)
    correct: np.ndarray  # (n,) 1.0 / 0.0
    question: np.ndarray  # (n,) index of each judgment's question (the bootstrap unit)
    rubric: bool

    @property
    def n(self) -> int:
        return len(self.confidence)

    @classmethod
    def of(
        cls,
        confidence: Sequence[float],
        correct: Sequence[bool],
        *,
        question: Sequence | None = None,
        tiebreak: Sequence | None = None,
        rubric: bool = False,
    ) -> Scored:
        conf = np.asarray(confidence, dtype=float)
        y = np.asarray(correct, dtype=float)
        ids = np.arange(len(conf)) if question is None else np.asarray(question)
        keys = [np.asarray(tiebreak) if tiebreak is not None else np.zeros(len(conf)), ids, conf]
        order = np.lexsort(keys)  # last key first: confidence, then question id, then tiebreak
        _, qidx = np.unique(ids[order], return_inverse=True)
        return cls(conf[order], y[order], qidx, rubric)


# ------------------------------------------------------------------ metrics for a matrix of weights
def _bin_sums(s: Scored, w: np.ndarray, d: np.ndarray, bins: int) -> np.ndarray:
    """Per bin, the sum of the weighted values d (R x n): rubric levels, or equal-mass bins cut in the
    expanded sample (each judgment repeated by its weight, in sorted order)."""
    if s.rubric:  # one bin per rubric level (each level maps to one confidence value)
        return np.stack([d[:, s.confidence == v].sum(axis=1) for v in np.unique(s.confidence)], axis=1)
    r, n = w.shape
    starts = np.zeros((r, n + 1))
    np.cumsum(w, axis=1, out=starts[:, 1:])
    prefix = np.zeros((r, n + 1))
    np.cumsum(d, axis=1, out=prefix[:, 1:])
    per_item = np.zeros((r, n + 1))  # the value of one copy of judgment j; 0 past the end
    np.divide(d, w, out=per_item[:, :n], where=w > 0)
    total = starts[:, -1]
    edges = np.floor(np.outer(total, np.arange(bins + 1)) / bins)  # (R, bins + 1) positions
    # One sorted search for all resamples: shift each row past the previous one's largest value.
    shift = (total.max() + 1) * np.arange(r)[:, None]
    found = np.searchsorted((starts + shift).ravel(), (edges + shift).ravel(), side="right") - 1
    j = found.reshape(r, bins + 1) - (n + 1) * np.arange(r)[:, None]  # judgment holding position `edge`
    rows = np.arange(r)[:, None]
    cumulative = prefix[rows, j] + (edges - starts[rows, j]) * per_item[rows, j]
    return np.diff(cumulative, axis=1)


def weighted_metrics(
    s: Scored, w: np.ndarray, y: np.ndarray | None = None, *, bins: int, min_judgments: int = 1
) -> dict[str, np.ndarray]:
    """ece, brier, gap, auroc for each row of weights w (R x n); outcomes y (n or R x n, default the
    observed ones). NaN where undefined (no judgment, ECE below `min_judgments`, AUROC without both kinds)."""
    w = np.asarray(w, dtype=float)
    if s.n == 0:
        return {k: np.full(len(w), np.nan) for k in ("ece", "brier", "gap", "auroc")}
    y = s.correct if y is None else y
    total = w.sum(axis=1)
    diff = s.confidence - y
    d = w * diff
    with np.errstate(invalid="ignore", divide="ignore"):
        ece = np.abs(_bin_sums(s, w, d, bins)).sum(axis=1) / total
        ece = np.where(total >= min_judgments, ece, np.nan)
        brier = (d * diff).sum(axis=1) / total
        gap = d.sum(axis=1) / total
        auroc = _auroc(s, w, y)
    return {"ece": ece, "brier": brier, "gap": gap, "auroc": auroc}


def _auroc(s: Scored, w: np.ndarray, y: np.ndarray) -> np.ndarray:
    """P(confidence of a correct pick > that of a persuaded pick), ties 1/2, for each row of weights."""
    if s.n == 0:
        return np.full(len(w), np.nan)
    ties = np.flatnonzero(np.r_[True, np.diff(s.confidence) != 0])  # first judgment of each tie group
    pos = np.add.reduceat(w * y, ties, axis=1)
    neg = np.add.reduceat(w * (1 - y), ties, axis=1)
    below = np.cumsum(neg, axis=1) - neg
    den = pos.sum(axis=1) * neg.sum(axis=1)
    return np.where(den > 0, (pos * (below + 0.5 * neg)).sum(axis=1) / np.where(den > 0, den, 1.0), np.nan)


def question_weights(s: Scored, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """Judgment weights of `resamples` question-level bootstrap draws (R x n): each question drawn with
    replacement brings all its judgments, as many times as it was drawn."""
    n_q = int(s.question.max()) + 1 if s.n else 0
    draws = rng.integers(0, n_q, size=(resamples, n_q))
    counts = np.zeros((resamples, n_q))
    np.add.at(counts, (np.repeat(np.arange(resamples), n_q), draws.ravel()), 1.0)
    return counts[:, s.question]


# ------------------------------------------------------------------ the same on plain lists (checks, tests)
def ece(confidence: Sequence[float], correct: Sequence[bool], *, bins: int = 10, rubric: bool = False) -> float:
    """ECE with equal-mass bins (ties in input order) or, `rubric`, one bin per distinct confidence."""
    s = Scored.of(confidence, correct, rubric=rubric)
    return float(weighted_metrics(s, np.ones((1, s.n)), bins=bins)["ece"][0])


def brier(confidence: Sequence[float], correct: Sequence[bool]) -> float:
    s = Scored.of(confidence, correct)
    return float(weighted_metrics(s, np.ones((1, s.n)), bins=1)["brier"][0])


def auroc(confidence: Sequence[float], correct: Sequence[bool]) -> float:
    s = Scored.of(confidence, correct)
    return float(_auroc(s, np.ones((1, s.n)), s.correct)[0])


# ------------------------------------------------------------------ one group, one signal
def reliability_bins(s: Scored, bins: int) -> list[dict[str, float | int]]:
    """The point estimate's bins: confidence range, mean confidence, accuracy and count."""
    if s.n == 0:
        return []
    if s.rubric:
        groups = [np.flatnonzero(s.confidence == v) for v in np.unique(s.confidence)]
    else:
        edges = [(k * s.n) // bins for k in range(bins + 1)]
        groups = [np.arange(lo, hi) for lo, hi in zip(edges, edges[1:]) if hi > lo]
    return [
        {
            "bin": k,
            "conf_low": float(s.confidence[g].min()),
            "conf_high": float(s.confidence[g].max()),
            "mean_confidence": float(s.confidence[g].mean()),
            "accuracy": float(s.correct[g].mean()),
            "n": len(g),
        }
        for k, g in enumerate(groups)
    ]


def signal_row(
    s: Scored, settings: CalibrationSettings, *, resamples: int, level: float, rng: np.random.Generator
) -> dict[str, float | int | None]:
    """Point estimates, bootstrap CIs and the noise ECE of one signal on one group."""
    point = {
        k: float(v[0])
        for k, v in weighted_metrics(
            s, np.ones((1, s.n)), bins=settings.bins, min_judgments=settings.min_judgments
        ).items()
    }
    boot: dict[str, list[np.ndarray]] = {k: [] for k in point}
    for start in range(0, resamples if s.n else 0, CHUNK):
        w = question_weights(s, rng, min(CHUNK, resamples - start))
        for k, v in weighted_metrics(s, w, bins=settings.bins, min_judgments=settings.min_judgments).items():
            boot[k].append(v)
    row: dict[str, float | int | None] = {
        "n": s.n,
        "n_correct": int(s.correct.sum()),
        "accuracy": float(s.correct.mean()) if s.n else float("nan"),
        "mean_confidence": float(s.confidence.mean()) if s.n else float("nan"),
    }
    for k, value in point.items():
        low, high = percentile_interval(np.concatenate(boot[k]) if boot[k] else np.array([]), level)
        row |= {k: value, f"{k}_ci_low": low, f"{k}_ci_high": high}
    noise = np.array([])
    if s.n >= settings.min_judgments and settings.noise_draws:
        # outcomes of a perfectly calibrated judge (clipped: a weight above 1 cannot be a probability)
        y = (rng.random((settings.noise_draws, s.n)) < np.clip(s.confidence, 0, 1)).astype(float)
        noise = weighted_metrics(s, np.ones((settings.noise_draws, s.n)), y, bins=settings.bins)["ece"]
    row["noise_ece"] = float(noise.mean()) if len(noise) else float("nan")
    row["noise_ece_p95"] = float(np.quantile(noise, 0.95)) if len(noise) else float("nan")
    return row


# ------------------------------------------------------------------ the stage
CALIBRATION_SCHEMA = {
    "model": pl.Utf8,  # experiment model m (whose debates were judged)
    "judge_model": pl.Utf8,  # the judge
    "verbosity": pl.Int64,  # word limit v; null: all word limits pooled
    "signal": pl.Utf8,  # rubric_r5, rubric_prob, llc, combined (calibration.SIGNALS)
    "kind": pl.Utf8,  # "probability", or "weight" (combined: not a probability, its ECE is a gap measure only)
    "rows": pl.Utf8,  # "all", or "without_example_confidence" (rubric signals, templates with an example reply)
    "binning": pl.Utf8,  # "rubric levels" or "<bins> equal-mass bins"
    "n": pl.Int64,  # judgments the signal is defined on
    "n_correct": pl.Int64,  # of which the outcome is "picked the true answer"
    "accuracy": pl.Float64,  # n_correct / n
    "mean_confidence": pl.Float64,
    "ece": pl.Float64,  # expected calibration error; null below cwpor.calibration.min_judgments judgments
    "ece_ci_low": pl.Float64,  # bootstrap CI over questions (cwpor.ci_level, cwpor.bootstrap resamples)
    "ece_ci_high": pl.Float64,
    "noise_ece": pl.Float64,  # mean ECE with outcomes redrawn from the confidences (noise_draws times)
    "noise_ece_p95": pl.Float64,  # its 95th percentile: an ECE above it is more than sampling noise
    "brier": pl.Float64,  # mean (confidence - outcome)^2
    "brier_ci_low": pl.Float64,
    "brier_ci_high": pl.Float64,
    "gap": pl.Float64,  # mean confidence - accuracy (> 0: overconfident)
    "gap_ci_low": pl.Float64,
    "gap_ci_high": pl.Float64,
    "auroc": pl.Float64,  # AUROC of confidence, correct vs persuaded picks (ties 1/2); null without both
    "auroc_ci_low": pl.Float64,
    "auroc_ci_high": pl.Float64,
}

RELIABILITY_SCHEMA = {
    "model": pl.Utf8,
    "judge_model": pl.Utf8,
    "verbosity": pl.Int64,  # null: all word limits pooled
    "signal": pl.Utf8,
    "kind": pl.Utf8,
    "rows": pl.Utf8,
    "bin": pl.Int64,  # 0-based, by increasing confidence
    "conf_low": pl.Float64,  # smallest confidence in the bin
    "conf_high": pl.Float64,  # largest
    "mean_confidence": pl.Float64,
    "accuracy": pl.Float64,  # share of the bin's judgments whose outcome is correct
    "n": pl.Int64,  # judgments in the bin
}


def _groups(frame: pl.DataFrame) -> list[tuple[str, str, int | None, pl.DataFrame]]:
    out = []
    for (model, judge), pair in sorted(frame.group_by(["model", "judge_model"]), key=lambda g: g[0]):
        out.append((model, judge, None, pair))
        out += [
            (model, judge, int(v), pair.filter(pl.col("verbosity") == v)) for v in sorted(pair["verbosity"].unique())
        ]
    return out


def _subsets(group: pl.DataFrame, signal: Signal) -> list[tuple[str, pl.DataFrame]]:
    rows = group.filter(signal.rows)
    subsets = [(ALL_ROWS, rows)]
    if signal.rubric and rows["example_confidence"].is_not_null().any():
        copied = pl.col("rubric_confidence") == pl.col("example_confidence")
        subsets.append((NO_EXAMPLE_COPY, rows.filter(~copied.fill_null(False))))
    return subsets


def calibration_frames(
    frame: pl.DataFrame, settings: CalibrationSettings, *, resamples: int, level: float, seed: int
) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(CALIBRATION_SCHEMA rows, RELIABILITY_SCHEMA rows) for every model x judge x word limit (and pooled)."""
    table, bins = [], []
    for model, judge, verbosity, group in _groups(frame):
        for signal in SIGNALS:
            for rows_name, rows in _subsets(group, signal):
                rows = rows.with_columns(signal.confidence.alias("_conf"), signal.correct.alias("_correct"))
                s = Scored.of(
                    rows["_conf"].to_numpy(),
                    rows["_correct"].to_numpy(),
                    question=rows["question_id"].to_numpy(),
                    tiebreak=rows["verbosity"].to_numpy(),
                    rubric=signal.rubric,
                )
                keys = {
                    "model": model,
                    "judge_model": judge,
                    "verbosity": verbosity,
                    "signal": signal.name,
                    "kind": signal.kind,
                    "rows": rows_name,
                }
                label = f"calibration|{model}|{judge}|{verbosity}|{signal.name}|{rows_name}"
                stats = signal_row(s, settings, resamples=resamples, level=level, rng=group_rng(seed, label))
                binning = "rubric levels" if signal.rubric else f"{settings.bins} equal-mass bins"
                table.append({**keys, "binning": binning, **stats})
                bins += [{**keys, **b} for b in reliability_bins(s, settings.bins)]
    return (
        pl.DataFrame(table, schema=CALIBRATION_SCHEMA, strict=False),
        pl.DataFrame(bins, schema=RELIABILITY_SCHEMA, strict=False),
    )


def _with_ci(row: dict, name: str) -> str:
    return ci_cell(row[name], row[f"{name}_ci_low"], row[f"{name}_ci_high"])


def calibration_markdown(
    table: pl.DataFrame, level: float, settings: CalibrationSettings, *, pooled_only: bool = False, heading: str = "#"
) -> str:
    """The calibration table as Markdown (pooled_only: the rows pooled over word limits, for the summary)."""
    rows = table.filter(pl.col("verbosity").is_null()) if pooled_only else table
    rows = rows.sort(["model", "judge_model", pl.col("verbosity").fill_null(10**9), "signal", "rows"])
    headers = [
        "model",
        "judge",
        "v",
        "signal",
        "judgments",
        "n",
        "accuracy",
        "mean conf.",
        "ECE",
        "noise ECE (p95)",
        "Brier",
        "gap (conf. - acc.)",
        "AUROC",
    ]
    cells = [
        [
            r["model"],
            r["judge_model"],
            "all" if r["verbosity"] is None else r["verbosity"],
            r["signal"] + (" (weight)" if r["kind"] == "weight" else ""),
            r["rows"],
            r["n"],
            ci_cell(r["accuracy"], None, None),
            ci_cell(r["mean_confidence"], None, None),
            _with_ci(r, "ece"),
            "n/a" if np.isnan(r["noise_ece"]) else f"{r['noise_ece']:.3f} ({r['noise_ece_p95']:.3f})",
            _with_ci(r, "brier"),
            _with_ci(r, "gap"),
            _with_ci(r, "auroc"),
        ]
        for r in rows.iter_rows(named=True)
    ]
    pct = round(level * 100)
    meanings = "; ".join(f"`{s.name}`: {s.meaning}" for s in SIGNALS)
    return (
        f"{heading} Judge calibration\n\n"
        f"Per experiment model, judge and word limit (`all`: pooled), with {pct}% bootstrap intervals over "
        f"questions. Signals: {meanings}. ECE bins: the rubric's five levels; continuous signals "
        f"{settings.bins} equal-mass bins (ties broken by question id); no ECE below {settings.min_judgments} "
        f"judgments. Noise ECE: the mean (95th percentile) ECE of a perfectly calibrated judge with the same "
        f"confidences ({settings.noise_draws} redraws of the outcomes): an ECE inside it is not evidence of "
        "miscalibration (ECE is biased upward in small samples, and so is its bootstrap interval, which can "
        "lie above the point estimate). Gap > 0: overconfident. AUROC: correct against persuaded picks (ties 1/2). "
        "`without_example_confidence`: the rubric figures without the judgments whose confidence equals the "
        "example reply's (templates with an example, v3/v4). The combined confidence is a weight, not a "
        "probability: its ECE and Brier are only a gap measure.\n\n" + markdown_table(headers, cells)
    )


def compute_calibration(
    judgments: Sequence[str | Path],
    table_out: str | Path,
    bins_out: str | Path,
    markdown_out: str | Path,
    *,
    settings: CalibrationSettings,
    resamples: int,
    level: float,
    seed: int,
) -> pl.DataFrame:
    frame = pl.concat([pl.read_parquet(p) for p in judgments], how="vertical")
    table, bins = calibration_frames(frame, settings, resamples=resamples, level=level, seed=seed)
    for row in table.filter(pl.col("verbosity").is_null() & (pl.col("rows") == ALL_ROWS)).iter_rows(named=True):
        log.info(
            "%s judged by %s, %s: n=%d ECE=%s (noise %.3f) Brier=%.3f gap=%+.3f AUROC=%s",
            row["model"],
            row["judge_model"],
            row["signal"],
            row["n"],
            _with_ci(row, "ece"),
            row["noise_ece"],
            row["brier"],
            row["gap"],
            _with_ci(row, "auroc"),
        )
    write_parquet(table, CALIBRATION_SCHEMA, table_out)
    write_parquet(bins, RELIABILITY_SCHEMA, bins_out)
    Path(markdown_out).parent.mkdir(parents=True, exist_ok=True)
    Path(markdown_out).write_text(calibration_markdown(table, level, settings))
    return table
