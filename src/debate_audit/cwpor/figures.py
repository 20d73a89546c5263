"""Stage 4b: the paper's CW-POR figures from metrics.parquet / breakdowns.parquet (PNG + SVG).

The POR drawn beside CW-POR is the headline one (`cwpor.headline_por`: over parsed choices or over all N).

fig2_category       CW-POR (and POR) by category with CIs, question share as a line (paper Fig. 2)
fig4_verbosity      CW-POR (and POR) vs word limit, one line per model (Fig. 4)
fig5_question_type  CW-POR (and POR) of Adversarial vs Non-Adversarial questions per model (Fig. 5)
fig6_confidence     mean LLC (top row) and rubric confidence (bottom row) vs word limit; solid: correct
                    picks, dashed: persuaded picks (Fig. 6)

Undefined values (no parsed judgment in a group) are marked "n/a", never drawn as zero. A model whose judge
returned no log-probabilities (an endpoint without them) has no LLC, so no CW-POR: its panels, lines and
labels say so (`NO_LLC`), and the summary names the key.
"""

from __future__ import annotations

import logging
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import polars as pl  # noqa: E402

from debate_audit.runtime.provenance import save_figure  # noqa: E402

from .metrics import POR_LABEL, POR_METRIC  # noqa: E402

log = logging.getLogger(__name__)


def _yerr(values, lows, highs) -> np.ndarray:
    v, lo, hi = (np.asarray(x, dtype=float) for x in (values, lows, highs))
    err = np.vstack([v - lo, hi - v])
    return np.nan_to_num(np.clip(err, 0, None))


def _bars(ax, x, rows: pl.DataFrame, width: float, color: str, label: str, hatch: str | None = None) -> None:
    """Bars with CI whiskers; a group whose value is undefined (NaN) gets an "n/a" mark, not a zero bar."""
    values = rows["value"].fill_null(float("nan")).to_numpy().astype(float)
    ax.bar(
        x,
        np.nan_to_num(values),
        width,
        yerr=_yerr(values, rows["ci_low"].fill_null(float("nan")), rows["ci_high"].fill_null(float("nan"))),
        color=color,
        alpha=0.8,
        capsize=3,
        ecolor="dimgray",
        hatch=hatch,
        label=label,
    )
    for xi, value in zip(np.atleast_1d(x), values):
        if np.isnan(value):
            ax.text(xi, 0.02, "n/a", ha="center", va="bottom", fontsize=7, rotation=90, color=color)


def _save(fig, out_dir: Path, name: str) -> None:
    for ext in ("png", "svg"):
        save_figure(fig, out_dir / f"{name}.{ext}", dpi=150, bbox_inches="tight")
    plt.close(fig)


NO_LLC = "n/a (its judge returned no log-probabilities; see summary.md)"


def without_llc(breakdowns: pl.DataFrame, model: str) -> bool:
    """Whether model's judgments have no LLC at all (metrics.LLC_METRICS are null, not NaN, then)."""
    overall = _metric(breakdowns, model, "overall", "mean_llc")
    return len(overall) > 0 and overall["value"].is_null().all()


def _metric(breakdowns: pl.DataFrame, model: str, dimension: str, metric: str) -> pl.DataFrame:
    return breakdowns.filter(
        (pl.col("model") == model) & (pl.col("dimension") == dimension) & (pl.col("metric") == metric)
    )


def fig_category(breakdowns: pl.DataFrame, models: list[str], level: float, out_dir: Path, por_metric: str) -> None:
    fig, axes = plt.subplots(
        len(models),
        1,
        figsize=(max(7.0, 0.55 * _n_levels(breakdowns, "category") + 3), 4.2 * len(models)),
        squeeze=False,
    )
    for ax, model in zip(axes[:, 0], models):
        rows = _metric(breakdowns, model, "category", "cw_por").sort(
            ["value", "level"], descending=[True, False], nulls_last=True
        )
        por = _metric(breakdowns, model, "category", por_metric)
        por = rows.select("level").join(por, on="level", how="left", maintain_order="left")
        x = np.arange(len(rows))
        _bars(ax, x - 0.2, rows, 0.4, "tab:red", f"CW-POR ({round(level * 100)}% CI)")
        _bars(ax, x + 0.2, por, 0.4, "tab:orange", POR_LABEL[por_metric], hatch="//")
        ax.set_xticks(x, rows["level"].to_list(), rotation=40, ha="right")
        ax.set_ylabel("override rate")
        ax.set_xlabel("TruthfulQA category")
        ax.set_ylim(0, 1.05)
        note = f"\nCW-POR {NO_LLC}" if without_llc(breakdowns, model) else ""
        ax.set_title(f"{model}: CW-POR and POR by category (all word limits pooled; n/a: no parsed judgment){note}")
        share = ax.twinx()
        share.plot(
            x,
            rows["share"].to_numpy() * 100,
            color="tab:blue",
            marker="D",
            linestyle=":",
            linewidth=1.5,
            label="question share",
        )
        share.set_ylabel("share of questions (%)")
        share.set_ylim(0, max(5.0, float(rows["share"].max() or 0) * 100 * 1.3))
        handles = ax.get_legend_handles_labels()[0] + share.get_legend_handles_labels()[0]
        ax.legend(handles, [h.get_label() for h in handles], loc="upper right", fontsize=8)
    fig.tight_layout()
    _save(fig, out_dir, "fig2_category")


def _n_levels(breakdowns: pl.DataFrame, dimension: str) -> int:
    return breakdowns.filter(pl.col("dimension") == dimension)["level"].n_unique()


def fig_verbosity(breakdowns: pl.DataFrame, models: list[str], level: float, out_dir: Path, por_metric: str) -> None:
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, model in enumerate(models):
        color = f"C{i}"
        cw = (
            _metric(breakdowns, model, "verbosity", "cw_por").with_columns(pl.col("level").cast(pl.Int64)).sort("level")
        )
        por = (
            _metric(breakdowns, model, "verbosity", por_metric)
            .with_columns(pl.col("level").cast(pl.Int64))
            .sort("level")
        )
        cw_label = f"{model} CW-POR" + (f" {NO_LLC}" if without_llc(breakdowns, model) else "")
        ax.plot(cw["level"], cw["value"], marker="o", color=color, label=cw_label)
        ax.fill_between(
            cw["level"].to_numpy(), cw["ci_low"].to_numpy(), cw["ci_high"].to_numpy(), color=color, alpha=0.15
        )
        ax.plot(
            por["level"],
            por["value"],
            marker="s",
            linestyle="--",
            color=color,
            alpha=0.7,
            label=f"{model} {POR_LABEL[por_metric]}",
        )
    ax.set_xlabel("word limit v (words per response)")
    ax.set_ylabel("override rate")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"CW-POR vs verbosity (band: {round(level * 100)}% bootstrap CI)")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    _save(fig, out_dir, "fig4_verbosity")


def fig_question_type(
    breakdowns: pl.DataFrame, models: list[str], level: float, out_dir: Path, por_metric: str
) -> None:
    fig, ax = plt.subplots(figsize=(max(6.0, 1.8 * len(models) + 2), 4.5))
    width = 0.2
    x = np.arange(len(models))
    for j, (kind, color) in enumerate([("Adversarial", "tab:red"), ("Non-Adversarial", "tab:blue")]):
        for k, (metric, hatch, alpha_label) in enumerate(
            [("cw_por", None, "CW-POR"), (por_metric, "//", POR_LABEL[por_metric])]
        ):
            rows = pl.concat(
                [
                    _metric(breakdowns, model, "type", metric)
                    .filter(pl.col("level") == kind)
                    .select("value", "ci_low", "ci_high")
                    .vstack(
                        pl.DataFrame({"value": [float("nan")], "ci_low": [float("nan")], "ci_high": [float("nan")]})
                    )
                    .head(1)
                    for model in models
                ]
            )
            _bars(ax, x + (2 * j + k - 1.5) * width, rows, width, color, f"{kind} {alpha_label}", hatch=hatch)
    ax.set_xticks(x, [m + ("\n(CW-POR n/a: no LLC)" if without_llc(breakdowns, m) else "") for m in models])
    ax.set_xlabel("experiment model")
    ax.set_ylabel(f"override rate (hatched: {POR_LABEL[por_metric]})")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"Adversarial vs non-adversarial questions ({round(level * 100)}% CI)")
    ax.legend(title="question type", fontsize=8)
    fig.tight_layout()
    _save(fig, out_dir, "fig5_question_type")


def fig_confidence(breakdowns: pl.DataFrame, models: list[str], out_dir: Path) -> None:
    fig, axes = plt.subplots(2, len(models), figsize=(4.8 * len(models) + 1, 7), squeeze=False, sharex="col")
    rows = [("llc", "LLC (max two-way probability)", (0.45, 1.02)), ("rubric", "rubric confidence (1-5)", (0.8, 5.2))]
    for col, model in enumerate(models):
        for r, (prefix, label, ylim) in enumerate(rows):
            ax = axes[r, col]
            for kind, style, color in [("correct", "-", "tab:green"), ("persuaded", "--", "tab:red")]:
                d = (
                    _metric(breakdowns, model, "verbosity", f"{prefix}_{kind}_picks")
                    .with_columns(pl.col("level").cast(pl.Int64))
                    .sort("level")
                )
                ax.plot(d["level"], d["value"], linestyle=style, marker="o", color=color, label=f"{kind} picks")
            ax.set_ylim(*ylim)
            ax.grid(alpha=0.3)
            if col == 0:
                ax.set_ylabel(label)
            if r == 0:
                ax.set_title(model + (f"\nLLC {NO_LLC}" if without_llc(breakdowns, model) else ""))
            if r == 1:
                ax.set_xlabel("word limit v (words per response)")
            ax.legend(fontsize=8)
    fig.suptitle("Judge confidence vs verbosity: solid = correct picks, dashed = persuaded picks")
    fig.tight_layout()
    _save(fig, out_dir, "fig6_confidence")


def draw_figures(
    *, metrics: str | Path, breakdowns: str | Path, out_dir: str | Path, level: float, headline_por: str
) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    models = sorted(pl.read_parquet(metrics)["model"].unique().to_list())
    frame = pl.read_parquet(breakdowns)
    por_metric = POR_METRIC[headline_por]
    fig_category(frame, models, level, out, por_metric)
    fig_verbosity(frame, models, level, out, por_metric)
    fig_question_type(frame, models, level, out, por_metric)
    fig_confidence(frame, models, out)
    log.info("figures for %d model(s) written to %s", len(models), out)


# ------------------------------------------------------------------ calibration (issue 26)
def reliability_figure(table: pl.DataFrame, bins: pl.DataFrame, signal: str, out_dir: Path) -> None:
    """Reliability diagram of one signal: a panel per model x judge (word limits pooled, all judgments),
    each bin's mean confidence against its accuracy with its count; the diagonal is perfect calibration."""
    rows = table.filter((pl.col("signal") == signal) & pl.col("verbosity").is_null() & (pl.col("rows") == "all"))
    pairs = rows.select("model", "judge_model").rows()
    fig, axes = plt.subplots(1, max(1, len(pairs)), figsize=(4.6 * max(1, len(pairs)) + 0.6, 4.6), squeeze=False)
    for ax, (model, judge) in zip(axes[0], pairs or [(None, None)]):
        ax.plot([0, 1], [0, 1], color="gray", linestyle=":", linewidth=1, label="perfect calibration")
        ax.set_xlim(0, 1.02)
        ax.set_ylim(-0.02, 1.05)
        ax.grid(alpha=0.3)
        if model is None:
            ax.text(0.5, 0.5, "no judgments", ha="center")
            continue
        row = rows.filter((pl.col("model") == model) & (pl.col("judge_model") == judge)).row(0, named=True)
        b = bins.filter(
            (pl.col("model") == model)
            & (pl.col("judge_model") == judge)
            & (pl.col("signal") == signal)
            & pl.col("verbosity").is_null()
            & (pl.col("rows") == "all")
        ).sort("bin")
        x, y, n = b["mean_confidence"].to_numpy(), b["accuracy"].to_numpy(), b["n"].to_numpy()
        ax.plot(x, y, color="tab:blue", marker="o", label="bins (mean confidence, accuracy)")
        for xi, yi, ni in zip(x, y, n):
            ax.annotate(f"n={ni}", (xi, yi), textcoords="offset points", xytext=(3, -11), fontsize=7)
        ece = "n/a" if row["ece"] is None or np.isnan(row["ece"]) else f"{row['ece']:.3f}"
        noise = "n/a" if np.isnan(row["noise_ece"]) else f"{row['noise_ece']:.3f}"
        ax.set_title(f"{model} judged by {judge}\nn={row['n']}, ECE {ece} (noise alone {noise})", fontsize=9)
        ax.set_xlabel(f"{signal}" + (" (a weight, not a probability)" if row["kind"] == "weight" else " confidence"))
        ax.set_ylabel("accuracy (picked the true answer)")
        ax.legend(fontsize=7, loc="upper left")
    fig.suptitle(f"Reliability of {signal} (all word limits pooled)")
    fig.tight_layout()
    _save(fig, out_dir, f"reliability_{signal}")


def draw_reliability(*, table: str | Path, bins: str | Path, signals: list[str], out_dir: str | Path) -> None:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    frame, bin_frame = pl.read_parquet(table), pl.read_parquet(bins)
    for signal in signals:
        reliability_figure(frame, bin_frame, signal, out)
    log.info("reliability diagrams of %s written to %s", ", ".join(signals), out)
