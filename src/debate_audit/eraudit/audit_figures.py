"""Audit figures (paper Fig. 2 left/right, Fig. 3, Fig. 4) and the Markdown summary. Every figure is written
as PNG and SVG. Table 3 (runtime) is in runtime.py."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402

from debate_audit.markdown import cell, frame_table, markdown_table  # noqa: E402
from debate_audit.provenance import save_figure  # noqa: E402

from .grid import LABEL_SCHEMA, panel  # noqa: E402
from .verifiers import VERIFIERS, color, label  # noqa: E402
from .versioning import rule_id  # noqa: E402

log = logging.getLogger(__name__)

def _read(paths: Sequence[str | Path]) -> pl.DataFrame:
    return pl.concat([pl.read_parquet(p) for p in paths], how="vertical_relaxed")


def _panels(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with a `panel` column: the dataset, plus the architecture / length / L_qh weight when the run
    has several (one bar group or panel per grid cell, as the paper's per-architecture figures)."""
    return frame.with_columns(panel(frame, "dataset").alias("panel")) if frame.height else \
        frame.with_columns(pl.lit(None, dtype=pl.Utf8).alias("panel"))


# Grid labels first in every table of summary.md (eraudit/grid.py).
KEYS = [*LABEL_SCHEMA, "dataset"]


def _save(fig, outs: str | Path | Sequence[str | Path]) -> None:
    """Save `fig` to every path of `outs` (the format follows the suffix: the rule declares each file)."""
    fig.tight_layout()
    for out in [outs] if isinstance(outs, (str, Path)) else outs:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        save_figure(fig, out, dpi=150)
    plt.close(fig)


def plot_cr(summary: pl.DataFrame, out: str | Path | Sequence[str | Path]) -> None:
    """Fig. 2 left: counterexample ratio of each target per dataset (and architecture / setting)."""
    summary = _panels(summary)
    datasets = summary["panel"].unique(maintain_order=True).to_list()
    targets = summary["target"].unique(maintain_order=True).to_list()
    width = 0.8 / max(len(targets), 1)
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(datasets), 3.2))
    for k, target in enumerate(targets):
        rows = summary.filter(pl.col("target") == target)
        values = [rows.filter(pl.col("panel") == d)["cr"].first() or 0.0 for d in datasets]
        xs = [i + (k - (len(targets) - 1) / 2) * width for i in range(len(datasets))]
        ax.bar(xs, values, width, label=label(target), color=color(target))
    ax.set_xticks(range(len(datasets)), datasets, rotation=20 if len(datasets) > 2 else 0, fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("dataset")
    ax.set_ylabel("counterexample ratio (CR)")
    ax.legend(frameon=False)
    _save(fig, out)


def _per_dataset_lines(frame: pl.DataFrame, x: str, y: str, xlabel: str, ylabel: str,
                       out: str | Path | Sequence[str | Path],
                       logx: bool = False, y_dashed: str | None = None, labels: tuple[str, str] = ("", "")) -> None:
    """One panel per dataset (and grid cell), one line per target; `y_dashed`: a second column drawn dashed
    in the same colour (labels: suffixes that tell the two lines apart in the legend)."""
    frame = _panels(frame)
    datasets = frame["panel"].unique(maintain_order=True).to_list()
    fig, axes = plt.subplots(1, max(len(datasets), 1), figsize=(4.2 * max(len(datasets), 1), 3.4), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        sub = frame.filter(pl.col("panel") == dataset)
        for target in sub["target"].unique(maintain_order=True).to_list():
            rows = sub.filter(pl.col("target") == target).sort(x)
            ax.plot(rows[x].to_list(), rows[y].to_list(), marker="o", label=label(target) + labels[0],
                    color=color(target))
            if y_dashed is not None and y_dashed in rows.columns:
                ax.plot(rows[x].to_list(), rows[y_dashed].to_list(), marker="x", linestyle="--",
                        label=label(target) + labels[1], color=color(target))
        if logx:
            ax.set_xscale("symlog", linthresh=1.0)
        ax.set_title(dataset)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_ylim(-0.02, 1.02)
        ax.legend(frameon=False, fontsize=7 if y_dashed else None)
    _save(fig, out)


# Labels of the two averages of the common bound (summary.md, Fig. 2 right, Fig. 4).
AVERAGE_LABELS = (", all q_h (counterexample = 0)", ", Stage-1 survivors only")


def plot_scatter(records: pl.DataFrame, out: str | Path | Sequence[str | Path]) -> None:
    """Fig. 3: per q_h, the target's P(a_h | q_h) against the largest Delta over the search pool (one panel
    per dataset and grid cell)."""
    records = _panels(records)
    datasets = records["panel"].unique(maintain_order=True).to_list()
    fig, axes = plt.subplots(1, max(len(datasets), 1), figsize=(4.2 * max(len(datasets), 1), 3.4), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        sub = records.filter((pl.col("panel") == dataset) & pl.col("delta_max").is_not_null())
        for target in sub["target"].unique(maintain_order=True).to_list():
            rows = sub.filter(pl.col("target") == target)
            ax.scatter(rows["p_target_qh"].to_list(), rows["delta_max"].to_list(), label=label(target),
                       color=color(target), alpha=0.75, s=22)
        eps = sub["epsilon"].first()
        if eps is not None:
            ax.axhline(eps, color="grey", linestyle="--", linewidth=1, label=f"epsilon = {eps:.3g}")
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_title(dataset)
        ax.set_xlabel("P_target(a_h | q_h)")
        ax.set_ylabel("max Delta over search pool")
        ax.legend(frameon=False, fontsize=8)
    _save(fig, out)


def audit_figures(
    *,
    summaries: Sequence[str | Path],
    records: Sequence[str | Path],
    confidence: Sequence[str | Path],
    epsilon: Sequence[str | Path],
    pool_reports: Sequence[str | Path],
    cr_png: str | Path,
    confidence_png: str | Path,
    scatter_png: str | Path,
    epsilon_png: str | Path,
    report_md: str | Path,
    summary_csv: str | Path,
    cr_svg: str | Path,
    confidence_svg: str | Path,
    scatter_svg: str | Path,
    epsilon_svg: str | Path,
) -> None:
    """The four figures (each as PNG and SVG), summary.md and summary.csv: every path is a declared output."""
    summary = _read(summaries)
    rec = _read(records)
    conf = _read(confidence)
    eps = _read(epsilon)
    pools = _read(pool_reports)
    plot_cr(summary, [cr_png, cr_svg])
    # Fig. 2 right and Fig. 4: solid = average over all q_h, dashed = over the Stage-1 survivors.
    _per_dataset_lines(conf, "confidence", "mean_lower_bound", "confidence level 1 - eta",
                       "average lower bound", [confidence_png, confidence_svg], y_dashed="mean_lower_bound_survivors",
                       labels=AVERAGE_LABELS)
    plot_scatter(rec, [scatter_png, scatter_svg])
    _per_dataset_lines(eps, "epsilon", "mean_lower_bound", "epsilon", "average lower bound",
                       [epsilon_png, epsilon_svg], logx=True, y_dashed="mean_lower_bound_survivors", labels=AVERAGE_LABELS)
    Path(summary_csv).parent.mkdir(parents=True, exist_ok=True)
    summary.write_csv(summary_csv)

    reject_cols = [c for c in pools.columns if c.startswith("rejected_")]
    flag_cols = [c for c in pools.columns if c.startswith("flagged_")]  # paraphrase.filter report: kept anyway
    pool_table = pools.group_by("dataset", "pool", "generator", maintain_order=True).agg(
        pl.len().alias("q_h"), pl.col("size").first(), pl.col("generated").sum(), pl.col("kept").sum(),
        *[pl.col(c).sum().alias(c.removeprefix("rejected_")) for c in reject_cols],
        *[pl.col(c).sum() for c in flag_cols],
        pl.col("duplicates_kept").sum(),
        (pl.col("shortfall") > 0).sum().alias("pools_short"), pl.col("shortfall").sum(),
    )
    status = rec.group_by(*KEYS, "target", "status", maintain_order=True).len().sort(*KEYS, "target", "status",
                                                                                       nulls_last=True)
    by_split = rec.filter(pl.col("split").is_not_null()).group_by(*KEYS, "target", "split").agg(
        pl.len().alias("n_qh"), (pl.col("n_counterexamples") > 0).mean().alias("cr"),
        pl.col("lower_bound").mean().alias("mean_lower_bound"),
        pl.col("lower_bound").filter(pl.col("n_counterexamples") == 0).mean().alias("mean_lower_bound_survivors"),
    ).sort(*KEYS, "target", "split", nulls_last=True)
    conf_wide = conf.select(*KEYS, "target", "confidence", "mean_lower_bound").sort("confidence").pivot(
        on="confidence", index=[*KEYS, "target"], values="mean_lower_bound")
    conf_survivors = conf.select(*KEYS, "target", "confidence", "mean_lower_bound_survivors").sort(
        "confidence").pivot(on="confidence", index=[*KEYS, "target"], values="mean_lower_bound_survivors")
    sources = summary.select(*KEYS, "epsilon", "epsilon_source").unique(maintain_order=True)
    text = [
        "# ER-Audit summary",
        "",
        "Two-stage black-box audit of each fine-tuned verifier against V_base on every audited hidden question.",
        "Stage 1 searches the search pool for a counterexample (Delta > epsilon); Stage 2 runs the anytime-valid",
        "sequential test on each generator's independent test pool; the common bound is the minimum over generators.",
        "",
        "## Threshold epsilon per dataset (`epsilon_source`: a configured value, or the percentile of the",
        "per-q_h maxima s_h = max over the search pool of V_org's Delta, as in the paper's App. D.2)",
        "",
        frame_table(sources, floats=4),
        "",
        "## Counterexample ratio, statuses and average lower bound",
        "",
        "Two averages of the common bound: `mean_lower_bound` over **all** audited q_h (a Stage-1",
        "counterexample counts as bound 0) and `mean_lower_bound_survivors` over the `n_stage1_survivors` q_h",
        "without a search-pool counterexample only (the release's number). They differ whenever CR > 0.",
        "",
        frame_table(summary.select(*KEYS, "target", "n_qh", "cr", "n_degraded", "n_certified",
                                 "n_budget_exhausted", "n_stage1_survivors", "mean_lower_bound",
                                 "mean_lower_bound_survivors", "mean_lower_bound_tv", "epsilon",
                                 "epsilon_source", "eta", "tau", "tv_r")),
        "",
        "## By split (train: the pair's debates were in fine-tuning; eval: held out)",
        "",
        frame_table(by_split) if by_split.height else "(no split information)",
        "",
        "## Statuses",
        "",
        frame_table(status),
        "",
        "## Average lower bound by confidence level (epsilon fixed), over all q_h (counterexample = 0)",
        "",
        frame_table(conf_wide),
        "",
        "## Average lower bound by confidence level (epsilon fixed), over the Stage-1 survivors only",
        "",
        frame_table(conf_survivors),
        "",
        "## Average lower bound and CR by epsilon (eta fixed)",
        "",
        frame_table(eps.select(*KEYS, "target", "epsilon", "epsilon_source", "cr", "mean_lower_bound",
                             "mean_lower_bound_survivors")),
        "",
        "## Paraphrase pools (generated / kept / rejected by reason / kept but flagged by a check / shortfall, "
        "summed over q_h)",
        "",
        frame_table(pool_table),
        "",
        "Figures: `figures/cr.png` (Fig. 2 left), `figures/bound_vs_confidence.png` (Fig. 2 right; solid: all",
        "q_h, dashed: Stage-1 survivors only, also in Fig. 4),",
        "`figures/p_qh_vs_delta_max.png` (Fig. 3), `figures/bound_vs_epsilon.png` (Fig. 4); PNG and SVG.",
        "",
    ]
    Path(report_md).write_text("\n".join(text))
    log.info("wrote %s and four figures", report_md)


# Content id of the figures and summary.md (rule params carry it).
FIGURES_VERSION = rule_id("audit-figures", plot_cr, _per_dataset_lines, plot_scatter, frame_table, markdown_table,
                          cell, audit_figures, AVERAGE_LABELS, VERIFIERS, _panels, panel, KEYS)
