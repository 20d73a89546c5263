"""Audit figures (paper Fig. 2 left/right, Fig. 3, Fig. 4), the Markdown summary and the runtime table
(Table 3) from Snakemake benchmark files. Every figure is written as PNG and SVG."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402

from debate_audit.data.io import write_parquet  # noqa: E402

log = logging.getLogger(__name__)

TARGET_LABELS = {"honest": "V_honest", "adv": "V_adv", "org": "V_org"}
TARGET_COLORS = {"honest": "tab:blue", "adv": "tab:red", "org": "tab:purple"}


def _read(paths: Sequence[str | Path]) -> pl.DataFrame:
    return pl.concat([pl.read_parquet(p) for p in paths], how="vertical_relaxed")


def _save(fig, png: str | Path) -> None:
    png = Path(png)
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(png, dpi=150)
    fig.savefig(png.with_suffix(".svg"))
    plt.close(fig)


def _label(target: str) -> str:
    return TARGET_LABELS.get(target, target)


def plot_cr(summary: pl.DataFrame, out: str | Path) -> None:
    """Fig. 2 left: counterexample ratio of each target per dataset."""
    datasets = summary["dataset"].unique(maintain_order=True).to_list()
    targets = summary["target"].unique(maintain_order=True).to_list()
    width = 0.8 / max(len(targets), 1)
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(datasets), 3.2))
    for k, target in enumerate(targets):
        rows = summary.filter(pl.col("target") == target)
        values = [rows.filter(pl.col("dataset") == d)["cr"].first() or 0.0 for d in datasets]
        xs = [i + (k - (len(targets) - 1) / 2) * width for i in range(len(datasets))]
        ax.bar(xs, values, width, label=_label(target), color=TARGET_COLORS.get(target))
    ax.set_xticks(range(len(datasets)), datasets)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("dataset")
    ax.set_ylabel("counterexample ratio (CR)")
    ax.legend(frameon=False)
    _save(fig, out)


def _per_dataset_lines(frame: pl.DataFrame, x: str, y: str, xlabel: str, ylabel: str, out: str | Path,
                       logx: bool = False) -> None:
    datasets = frame["dataset"].unique(maintain_order=True).to_list()
    fig, axes = plt.subplots(1, max(len(datasets), 1), figsize=(4.2 * max(len(datasets), 1), 3.4), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        sub = frame.filter(pl.col("dataset") == dataset)
        for target in sub["target"].unique(maintain_order=True).to_list():
            rows = sub.filter(pl.col("target") == target).sort(x)
            ax.plot(rows[x].to_list(), rows[y].to_list(), marker="o", label=_label(target),
                    color=TARGET_COLORS.get(target))
        if logx:
            ax.set_xscale("symlog", linthresh=1.0)
        ax.set_title(dataset)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel)
        ax.set_ylim(-0.02, 1.02)
        ax.legend(frameon=False)
    _save(fig, out)


def plot_scatter(records: pl.DataFrame, out: str | Path) -> None:
    """Fig. 3: per q_h, the target's P(a_h | q_h) against the largest Delta over the search pool."""
    datasets = records["dataset"].unique(maintain_order=True).to_list()
    fig, axes = plt.subplots(1, max(len(datasets), 1), figsize=(4.2 * max(len(datasets), 1), 3.4), squeeze=False)
    for ax, dataset in zip(axes[0], datasets):
        sub = records.filter((pl.col("dataset") == dataset) & pl.col("delta_max").is_not_null())
        for target in sub["target"].unique(maintain_order=True).to_list():
            rows = sub.filter(pl.col("target") == target)
            ax.scatter(rows["p_target_qh"].to_list(), rows["delta_max"].to_list(), label=_label(target),
                       color=TARGET_COLORS.get(target), alpha=0.75, s=22)
        eps = sub["epsilon"].first()
        if eps is not None:
            ax.axhline(eps, color="grey", linestyle="--", linewidth=1, label=f"epsilon = {eps:.3g}")
        ax.set_yscale("symlog", linthresh=1.0)
        ax.set_title(dataset)
        ax.set_xlabel("P_target(a_h | q_h)")
        ax.set_ylabel("max Delta over search pool")
        ax.legend(frameon=False, fontsize=8)
    _save(fig, out)


def _markdown(frame: pl.DataFrame, floats: int = 3) -> str:
    cols = frame.columns
    lines = ["| " + " | ".join(cols) + " |", "| " + " | ".join("---" for _ in cols) + " |"]
    for row in frame.iter_rows():
        cells = [f"{v:.{floats}f}" if isinstance(v, float) else ("" if v is None else str(v)) for v in row]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


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
) -> None:
    summary = _read(summaries)
    rec = _read(records)
    conf = _read(confidence)
    eps = _read(epsilon)
    pools = _read(pool_reports)
    plot_cr(summary, cr_png)
    _per_dataset_lines(conf, "confidence", "mean_lower_bound", "confidence level 1 - eta",
                       "average lower bound", confidence_png)
    plot_scatter(rec, scatter_png)
    _per_dataset_lines(eps, "epsilon", "mean_lower_bound", "epsilon", "average lower bound", epsilon_png, logx=True)
    Path(summary_csv).parent.mkdir(parents=True, exist_ok=True)
    summary.write_csv(summary_csv)

    reject_cols = [c for c in pools.columns if c.startswith("rejected_")]
    pool_table = pools.group_by("dataset", "pool", "generator", maintain_order=True).agg(
        pl.len().alias("q_h"), pl.col("size").first(), pl.col("generated").sum(), pl.col("kept").sum(),
        *[pl.col(c).sum().alias(c.removeprefix("rejected_")) for c in reject_cols],
        (pl.col("shortfall") > 0).sum().alias("pools_short"), pl.col("shortfall").sum(),
    )
    status = rec.group_by("dataset", "target", "status", maintain_order=True).len().sort("dataset", "target", "status")
    by_split = rec.filter(pl.col("split").is_not_null()).group_by("dataset", "target", "split").agg(
        pl.len().alias("n_qh"), (pl.col("n_counterexamples") > 0).mean().alias("cr"),
        pl.col("lower_bound").mean().alias("mean_lower_bound"),
    ).sort("dataset", "target", "split")
    conf_wide = conf.select("dataset", "target", "confidence", "mean_lower_bound").sort("confidence").pivot(
        on="confidence", index=["dataset", "target"], values="mean_lower_bound")
    text = [
        "# ER-Audit summary",
        "",
        "Two-stage black-box audit of each fine-tuned verifier against V_base on every audited hidden question.",
        "Stage 1 searches the search pool for a counterexample (Delta > epsilon); Stage 2 runs the anytime-valid",
        "sequential test on each generator's independent test pool; the common bound is the minimum over generators.",
        "",
        "## Counterexample ratio, statuses and average lower bound",
        "",
        _markdown(summary.select("dataset", "target", "n_qh", "cr", "n_degraded", "n_certified",
                                 "n_budget_exhausted", "mean_lower_bound", "mean_lower_bound_tv", "epsilon",
                                 "epsilon_source", "eta", "tau", "tv_r")),
        "",
        "## By split (train: the pair's debates were in fine-tuning; eval: held out)",
        "",
        _markdown(by_split) if by_split.height else "(no split information)",
        "",
        "## Statuses",
        "",
        _markdown(status),
        "",
        "## Average lower bound by confidence level (epsilon fixed)",
        "",
        _markdown(conf_wide),
        "",
        "## Average lower bound and CR by epsilon (eta fixed)",
        "",
        _markdown(eps.select("dataset", "target", "epsilon", "epsilon_source", "cr", "mean_lower_bound")),
        "",
        "## Paraphrase pools (generated / kept / rejected by reason / shortfall, summed over q_h)",
        "",
        _markdown(pool_table),
        "",
        "Figures: `figures/cr.png` (Fig. 2 left), `figures/bound_vs_confidence.png` (Fig. 2 right),",
        "`figures/p_qh_vs_delta_max.png` (Fig. 3), `figures/bound_vs_epsilon.png` (Fig. 4); PNG and SVG.",
        "",
    ]
    Path(report_md).write_text("\n".join(text))
    log.info("wrote %s and four figures", report_md)


# ------------------------------------------------------------------------------------ Table 3
RUNTIME_SCHEMA = {
    "stage": pl.Utf8,  # rule file the job belongs to (benchmarks/rules/<stage>/...)
    "job": pl.Utf8,  # benchmark file stem: rule step and wildcards
    "wall_s": pl.Float64,  # wall-clock seconds (Snakemake benchmark column `s`)
    "max_rss_mb": pl.Float64,  # peak resident memory, MB
    "cpu_time_s": pl.Float64,  # CPU seconds
}


def read_benchmarks(root: str | Path, files: Sequence[str | Path] | None = None) -> pl.DataFrame:
    """The benchmark records `files` (paths under `root`; default: every file under it)."""
    rows = []
    paths = sorted(Path(f) for f in files) if files is not None else sorted(Path(root).rglob("*.tsv"))
    for path in paths:
        try:
            frame = pl.read_csv(path, separator="\t", infer_schema_length=0)
        except Exception as err:  # a half-written file must not break the table
            log.warning("skipping %s: %s", path, err)
            continue
        if frame.is_empty() or "s" not in frame.columns:
            log.warning("skipping %s: no `s` column", path)
            continue

        def number(col: str) -> float | None:
            if col not in frame.columns:
                return None
            value = frame[col][-1]
            try:
                return float(value)
            except (TypeError, ValueError):
                return None

        rel = path.relative_to(root)
        rows.append({"stage": rel.parts[0] if len(rel.parts) > 1 else "", "job": str(rel.with_suffix("")),
                     "wall_s": number("s"), "max_rss_mb": number("max_rss"), "cpu_time_s": number("cpu_time")})
    return pl.DataFrame(rows, schema=RUNTIME_SCHEMA)


def runtime_table(
    *, benchmarks: str | Path, markdown: str | Path, csv: str | Path, files: Sequence[str | Path] | None = None
) -> pl.DataFrame:
    """Table 3: wall time per job and per stage from Snakemake benchmark files (last run of each);
    `files`: the current run's benchmark files, so stale records of other configurations stay out."""
    jobs = read_benchmarks(benchmarks, files).sort("stage", "job")
    per_stage = jobs.group_by("stage", maintain_order=True).agg(
        pl.len().alias("jobs"), pl.col("wall_s").sum().alias("wall_s"), pl.col("max_rss_mb").max().alias("max_rss_mb")
    )
    Path(csv).parent.mkdir(parents=True, exist_ok=True)
    jobs.write_csv(csv)
    text = [
        "# Runtime per stage (Table 3)",
        "",
        f"From the Snakemake benchmark files under `{benchmarks}` (the latest run of each job).",
        "",
        _markdown(per_stage, floats=1),
        "",
        "## Per job",
        "",
        _markdown(jobs, floats=1),
        "",
    ]
    Path(markdown).write_text("\n".join(text))
    write_parquet(jobs, RUNTIME_SCHEMA, Path(csv).with_suffix(".parquet"))
    return jobs
