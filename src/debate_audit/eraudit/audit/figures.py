"""Audit figures (paper Fig. 2 left/right, Fig. 3, Fig. 4, both bounds over t for one q_h, and the audit's
operating characteristic) and the Markdown summary. Every figure is written as PNG and SVG. Table 3 (runtime)
is in runtime.py."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import polars as pl  # noqa: E402

from debate_audit.data.markdown import frame_table, markdown_table  # noqa: E402
from debate_audit.runtime.provenance import save_figure  # noqa: E402

from ..common.grid import LABEL_SCHEMA, panel  # noqa: E402
from ..common.verifiers import color, label, untrained  # noqa: E402
from .power import CHARACTERISTIC_SCHEMA  # noqa: E402
from .stats import BOUNDS  # noqa: E402

log = logging.getLogger(__name__)


def _read(paths: Sequence[str | Path]) -> pl.DataFrame:
    return pl.concat([pl.read_parquet(p) for p in paths], how="vertical_relaxed")


def _panels(frame: pl.DataFrame) -> pl.DataFrame:
    """`frame` with a `panel` column: the dataset, plus the architecture / length / L_qh weight when the run
    has several (one bar group or panel per grid cell, as the paper's per-architecture figures)."""
    return (
        frame.with_columns(panel(frame, "dataset").alias("panel"))
        if frame.height
        else frame.with_columns(pl.lit(None, dtype=pl.Utf8).alias("panel"))
    )


# Colours of models you bring (brought.py): matplotlib's own cycle would give the first one V_honest's blue.
# Picked by name, so a model keeps its colour in every figure; none is a verifier's colour (verifiers.py).
BROUGHT_COLORS = ("tab:orange", "tab:green", "tab:brown", "tab:pink", "tab:cyan", "goldenrod", "teal", "navy")


def target_color(target: str) -> str:
    """A target's colour: the workflow's verifier's own, else one of BROUGHT_COLORS by its name."""
    known = color(target)
    if known is not None:
        return known
    return BROUGHT_COLORS[int(hashlib.sha256(target.encode()).hexdigest(), 16) % len(BROUGHT_COLORS)]


# Grid labels first in every table of summary.md (eraudit/common/grid.py).
KEYS = [*LABEL_SCHEMA, "dataset"]


def _save(fig, outs: str | Path | Sequence[str | Path]) -> None:
    """Save `fig` to every path of `outs` (the format follows the suffix: the rule declares each file)."""
    fig.tight_layout()
    for out in [outs] if isinstance(outs, (str, Path)) else outs:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        save_figure(fig, out, dpi=150)
    plt.close(fig)


def plot_cr(summary: pl.DataFrame, out: str | Path | Sequence[str | Path]) -> None:
    """Fig. 2 left: counterexample ratio of each target per dataset (and architecture / setting). A variant
    with no training row (V_base under its name) is hatched and labelled "untrained"."""
    summary = _panels(summary)
    datasets = summary["panel"].unique(maintain_order=True).to_list()
    targets = summary["target"].unique(maintain_order=True).to_list()
    width = 0.8 / max(len(targets), 1)
    fig, ax = plt.subplots(figsize=(1.8 + 1.6 * len(datasets), 3.2))
    for k, target in enumerate(targets):
        rows = summary.filter(pl.col("target") == target)
        values = [rows.filter(pl.col("panel") == d)["cr"].first() or 0.0 for d in datasets]
        xs = [i + (k - (len(targets) - 1) / 2) * width for i in range(len(datasets))]
        bars = ax.bar(xs, values, width, label=label(target), color=target_color(target))
        trained = [
            rows.filter(pl.col("panel") == d)["training_rows"].first() if "training_rows" in rows.columns else None
            for d in datasets
        ]
        for bar, x, value, n in zip(bars, xs, values, trained):
            if untrained(target, n):
                bar.set_hatch("//")
                ax.text(x, value + 0.02, "untrained", rotation=90, ha="center", va="bottom", fontsize=6)
    ax.set_xticks(range(len(datasets)), datasets, rotation=20 if len(datasets) > 2 else 0, fontsize=8)
    ax.set_ylim(0, 1.05)
    ax.set_xlabel("dataset")
    ax.set_ylabel("counterexample ratio (CR)")
    ax.legend(frameon=False)
    _save(fig, out)


# How figures and summary.md name the two bounds (stats.BOUNDS: config value -> record column).
BOUND_TITLES = {"paper": "paper's bound eta^(1/t)", "betting": "betting bound"}
# Labels of the two averages of a common bound (summary.md, Fig. 2 right, Fig. 4).
AVERAGE_LABELS = (", all q_h (counterexample = 0)", ", Stage-1 survivors only")


def bound_order(headline: str) -> list[str]:
    """The two bounds, the headline (config `audit.headline_bound`) first."""
    if headline not in BOUNDS:
        raise ValueError(f"audit.headline_bound: {headline!r} is not one of {list(BOUNDS)}")
    return [headline, *(b for b in BOUNDS if b != headline)]


def _bound_lines(
    frame: pl.DataFrame,
    x: str,
    xlabel: str,
    bounds: Sequence[str],
    out: str | Path | Sequence[str | Path],
    logx: bool = False,
) -> None:
    """A row of panels per bound (in `bounds` order) and a column per dataset (and grid cell); one colour per
    target, solid: the average over all q_h, dashed: over the Stage-1 survivors."""
    frame = _panels(frame)
    datasets = frame["panel"].unique(maintain_order=True).to_list()
    ncols = max(len(datasets), 1)
    fig, axes = plt.subplots(len(bounds), ncols, figsize=(4.2 * ncols, 3.4 * len(bounds)), squeeze=False)
    for row, bound in zip(axes, bounds):
        y = f"mean_{BOUNDS[bound]}"
        for ax, dataset in zip(row, datasets):
            sub = frame.filter(pl.col("panel") == dataset)
            for target in sub["target"].unique(maintain_order=True).to_list():
                rows = sub.filter(pl.col("target") == target).sort(x)
                for column, style, marker, suffix in (
                    (y, "-", "o", AVERAGE_LABELS[0]),
                    (f"{y}_survivors", "--", "x", AVERAGE_LABELS[1]),
                ):
                    ax.plot(
                        rows[x].to_list(),
                        rows[column].to_list(),
                        marker=marker,
                        linestyle=style,
                        label=label(target) + suffix,
                        color=target_color(target),
                    )
            if logx:
                ax.set_xscale("symlog", linthresh=1.0)
            ax.set_title(f"{dataset}: {BOUND_TITLES[bound]}", fontsize=9)
            ax.set_xlabel(xlabel)
            ax.set_ylabel("average lower bound")
            ax.set_ylim(-0.02, 1.02)
            ax.legend(frameon=False, fontsize=7)
    _save(fig, out)


def example_questions(records: pl.DataFrame) -> pl.DataFrame:
    """One q_h per grid cell, dataset and target to draw over t: a Stage-1 survivor with test draws, where the
    two bounds part most: a positive betting bound first, then the most degraded draws, then the lowest pair_id."""
    keys = [k for k in KEYS if k in records.columns]
    survivors = records.filter((pl.col("n_counterexamples") == 0) & (pl.col("n_test_draws") > 0))
    ranked = survivors.sort(
        *keys,
        "target",
        pl.col("lower_bound_betting") > 0,
        "n_degraded_draws",
        "pair_id",
        descending=[False] * (len(keys) + 1) + [True, True, False],
        nulls_last=True,
    )
    return ranked.group_by(*keys, "target", maintain_order=True).first()


def plot_bounds_over_t(
    records: pl.DataFrame, steps: pl.DataFrame, bounds: Sequence[str], out: str | Path | Sequence[str | Path]
) -> None:
    """For one q_h per dataset (and grid cell) and target (`example_questions`): both bounds after each test
    draw, per generator, the level after draw t drawn over (t - 1, t]; the headline solid, the other dashed;
    degraded draws ticked below the t axis."""
    records = _panels(records)  # panel titles from every q_h, so each panel keeps its place
    examples = example_questions(records)
    keys = [k for k in KEYS if k in examples.columns]
    datasets = records["panel"].unique(maintain_order=True).to_list()
    targets = records["target"].unique(maintain_order=True).to_list()
    fig, axes = plt.subplots(
        max(len(targets), 1),
        max(len(datasets), 1),
        figsize=(4.2 * max(len(datasets), 1), 3.2 * max(len(targets), 1)),
        squeeze=False,
    )
    for ax in axes.flat:
        ax.set_axis_off()  # a panel without an example stays blank
    styles = dict(zip(bounds, ("-", "--")))
    for example in examples.iter_rows(named=True):
        ax = axes[targets.index(example["target"])][datasets.index(example["panel"])]
        ax.set_axis_on()
        match = [pl.col(k).eq_missing(example[k]) for k in (*keys, "target", "pair_id")]
        mine = steps.filter(*match).sort("generator", "t")
        for k, generator in enumerate(mine["generator"].unique(maintain_order=True).to_list()):
            rows = mine.filter(pl.col("generator") == generator)
            for bound in bounds:
                ax.step(
                    [0, *rows["t"].to_list()],
                    [0.0, *rows[BOUNDS[bound]].to_list()],
                    where="pre",
                    linestyle=styles[bound],
                    color=f"C{k}",
                    label=f"{generator}: {bound}",
                )
            bad = [t - 0.5 for t in rows.filter(~pl.col("non_degraded"))["t"].to_list()]
            ax.plot(
                bad,
                [-0.015 - 0.025 * k] * len(bad),
                "x",
                color=f"C{k}",
                markersize=5,
                label=f"{generator}: degraded draw" if bad else None,
            )
        ax.set_title(f"{example['panel']} · {label(example['target'])} · pair {example['pair_id']}", fontsize=9)
        ax.set_xlabel("t (test paraphrases read)")
        ax.set_ylabel("lower bound after t draws")
        ax.set_ylim(-0.07, 1.02)
        ax.legend(frameon=False, fontsize=7)
    _save(fig, out)


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
            ax.scatter(
                rows["p_target_qh"].to_list(),
                rows["delta_max"].to_list(),
                label=label(target),
                color=target_color(target),
                alpha=0.75,
                s=22,
            )
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
    steps: Sequence[str | Path],
    confidence: Sequence[str | Path],
    epsilon: Sequence[str | Path],
    pool_reports: Sequence[str | Path],
    cr_png: str | Path,
    confidence_png: str | Path,
    scatter_png: str | Path,
    epsilon_png: str | Path,
    bounds_png: str | Path,
    report_md: str | Path,
    summary_csv: str | Path,
    cr_svg: str | Path,
    confidence_svg: str | Path,
    scatter_svg: str | Path,
    epsilon_svg: str | Path,
    bounds_svg: str | Path,
    headline: str = "paper",
    characteristic: Sequence[str | Path] = (),
    stability: Sequence[str | Path] = (),
    characteristic_png: str | Path | None = None,
    characteristic_svg: str | Path | None = None,
    characteristic_csv: str | Path | None = None,
    brought: Mapping[str, Mapping[str, object]] | None = None,
) -> None:
    """The six figures (each as PNG and SVG), summary.md, summary.csv and operating_characteristic.csv: every
    path is a declared output. `headline`: the bound summary.md and the figures lead with (config
    `audit.headline_bound`). `characteristic` and `stability` (rule audit_power, per cell): the operating
    characteristic's figure and CSV, and a section of summary.md after the others. `brought`: the audits of
    models you bring, name -> {base, targets} (config `audited_models`), said in summary.md."""
    order = bound_order(headline)
    summary = _read(summaries)
    rec = _read(records)
    step_rows = _read(steps)
    conf = _read(confidence)
    eps = _read(epsilon)
    pools = _read(pool_reports)
    plot_cr(summary, [cr_png, cr_svg])
    # Fig. 2 right and Fig. 4, a row per bound: solid = average over all q_h, dashed = over the Stage-1 survivors.
    _bound_lines(conf, "confidence", "confidence level 1 - eta", order, [confidence_png, confidence_svg])
    plot_scatter(rec, [scatter_png, scatter_svg])
    _bound_lines(eps, "epsilon", "epsilon", order, [epsilon_png, epsilon_svg], logx=True)
    plot_bounds_over_t(rec, step_rows, order, [bounds_png, bounds_svg])
    Path(summary_csv).parent.mkdir(parents=True, exist_ok=True)
    summary.write_csv(summary_csv)

    reject_cols = [c for c in pools.columns if c.startswith("rejected_")]
    flag_cols = [c for c in pools.columns if c.startswith("flagged_")]  # paraphrase.filter report: kept anyway
    pool_table = pools.group_by("dataset", "pool", "generator", maintain_order=True).agg(
        pl.len().alias("q_h"),
        pl.col("size").first(),
        pl.col("generated").sum(),
        pl.col("kept").sum(),
        *[pl.col(c).sum().alias(c.removeprefix("rejected_")) for c in reject_cols],
        *[pl.col(c).sum() for c in flag_cols],
        pl.col("duplicates_kept").sum(),
        (pl.col("shortfall") > 0).sum().alias("pools_short"),
        pl.col("shortfall").sum(),
    )
    status = (
        rec.group_by(*KEYS, "target", "status", maintain_order=True)
        .len()
        .sort(*KEYS, "target", "status", nulls_last=True)
    )
    means = [f"mean_{BOUNDS[b]}{suffix}" for b in order for suffix in ("", "_survivors")]
    by_split = (
        rec.filter(pl.col("split").is_not_null())
        .group_by(*KEYS, "target", "split")
        .agg(
            pl.len().alias("n_qh"),
            (pl.col("n_counterexamples") > 0).mean().alias("cr"),
            *[
                expr
                for b in order
                for expr in (
                    pl.col(BOUNDS[b]).mean().alias(f"mean_{BOUNDS[b]}"),
                    pl.col(BOUNDS[b])
                    .filter(pl.col("n_counterexamples") == 0)
                    .mean()
                    .alias(f"mean_{BOUNDS[b]}_survivors"),
                )
            ],
        )
        .sort(*KEYS, "target", "split", nulls_last=True)
    )
    conf_tables = []
    for column in means:
        wide = (
            conf.select(*KEYS, "target", "confidence", column)
            .sort("confidence")
            .pivot(on="confidence", index=[*KEYS, "target"], values=column)
        )
        over = "the Stage-1 survivors only" if column.endswith("_survivors") else "all q_h (counterexample = 0)"
        conf_tables += [f"### `{column}`: {BOUND_TITLES[_bound_of(column)]}, over {over}", "", frame_table(wide), ""]
    sources = summary.select(*KEYS, "epsilon", "epsilon_source").unique(maintain_order=True)
    text = [
        "# ER-Audit summary",
        "",
        *headline_lines(summary),
        "",
        "Two-stage black-box audit of each fine-tuned verifier against V_base on every audited hidden question.",
        "Stage 1 searches the search pool for a counterexample (Delta > epsilon); Stage 2 runs the anytime-valid",
        "sequential test on each generator's independent test pool; the common bound is the minimum over generators.",
        "Two anytime-valid bounds read each test pool: the paper's eta^(1/t) (`lower_bound`, 0 from the first",
        "counterexample on) and the betting confidence sequence (`lower_bound_betting`, c and w in the table), which",
        "reads every pool to its end and stays informative after degraded draws (`n_degraded_draws` of",
        f"`n_test_draws`). Headline bound of this run: **{headline}** (`audit.headline_bound`).",
        "",
        *brought_lines(brought or {}),
        *bounded_lines(summary),
        "## Threshold epsilon per dataset (`epsilon_source`: a configured value, or the percentile of the",
        "per-q_h maxima s_h = max over the search pool of V_org's Delta, as in the paper's App. D.2)",
        "",
        frame_table(sources, floats=4),
        "",
        "## Counterexample ratio, statuses and average lower bound",
        "",
        "Two averages of each common bound: `mean_<bound>` over **all** audited q_h (a Stage-1",
        "counterexample counts as bound 0) and `mean_<bound>_survivors` over the `n_stage1_survivors` q_h",
        "without a search-pool counterexample only (the release's number). They differ whenever CR > 0.",
        "Statuses are the paper's test's.",
        "",
        frame_table(
            summary.select(
                *KEYS,
                "target",
                "training_rows",
                "n_qh",
                "cr",
                "n_degraded",
                "n_certified",
                "n_budget_exhausted",
                "n_stage1_survivors",
                *means,
                *[f"mean_{BOUNDS[b]}_tv" for b in order],
                "n_test_draws",
                "n_degraded_draws",
                "epsilon",
                "epsilon_source",
                "eta",
                "tau",
                "tv_r",
                "betting_c",
                "betting_w",
            )
        ),
        "",
        "## By split (train: the pair's debates were in fine-tuning; eval: held out)",
        "",
        frame_table(by_split) if by_split.height else "(no split information)",
        "",
        "## Statuses",
        "",
        frame_table(status),
        "",
        "## Average lower bound by confidence level (epsilon fixed)",
        "",
        *conf_tables,
        "## Average lower bound and CR by epsilon (eta fixed)",
        "",
        frame_table(eps.select(*KEYS, "target", "epsilon", "epsilon_source", "cr", *means, "n_degraded_draws")),
        "",
        "## Paraphrase pools (generated / kept / rejected by reason / kept but flagged by a check / shortfall, "
        "summed over q_h)",
        "",
        frame_table(pool_table),
        "",
        "Figures: `figures/cr.png` (Fig. 2 left), `figures/bound_vs_confidence.png` (Fig. 2 right, a row per",
        "bound, the headline first; solid: all q_h, dashed: Stage-1 survivors only, also in Fig. 4),",
        "`figures/p_qh_vs_delta_max.png` (Fig. 3), `figures/bound_vs_epsilon.png` (Fig. 4),",
        "`figures/bounds_over_t.png` (both bounds after each test draw for one q_h per dataset and verifier); PNG",
        "and SVG.",
        "",
    ]
    figures = 5
    if characteristic:
        table = _read(characteristic)
        plot_operating_characteristic(table, [p for p in (characteristic_png, characteristic_svg) if p])
        if characteristic_csv:
            table.write_csv(characteristic_csv)
        text += power_section(table, _read(stability) if stability else None)
        figures += 1
    else:
        # audit_power plans the trained grid's audits; with none (only models you bring) the declared outputs
        # say so rather than go missing
        empty_figure(
            [p for p in (characteristic_png, characteristic_svg) if p],
            "No operating characteristic: it is computed for the audits of the verifiers this workflow trains",
        )
        if characteristic_csv:
            pl.DataFrame(schema=CHARACTERISTIC_SCHEMA).write_csv(characteristic_csv)
    Path(report_md).write_text("\n".join(text))
    log.info("wrote %s and %d figures (headline bound: %s)", report_md, figures, headline)


# --------------------------------------------------------------------------- operating characteristic (audit_power)
CHARACTERISTIC_QUANTITIES = (
    ("P(flagged)", "p_flag"),
    ("P(certify), paper's bound", "p_certify_paper"),
    ("P(certify), betting bound", "p_certify_betting"),
)


def empty_figure(out: Sequence[str | Path], message: str) -> None:
    """A figure that says why it has nothing to show."""
    fig, ax = plt.subplots(figsize=(6.4, 2.4))
    ax.axis("off")
    ax.text(0.5, 0.5, message, ha="center", va="center", wrap=True)
    _save(fig, out)


def plot_operating_characteristic(table: pl.DataFrame, out: str | Path | Sequence[str | Path]) -> None:
    """Top: P(flagged | p); bottom: P(common bound >= tau_c | p), the paper's bound solid, the betting bound's
    dashed; a column per dataset (and grid cell). Black: the configured pools; colour: the pools as run.
    Lines: closed forms (the betting bound's exact where its pools are enumerable); points with 2-SE bars:
    Monte Carlo."""
    table = _panels(table)
    panels = table["panel"].unique(maintain_order=True).to_list()
    ncols = max(len(panels), 1)
    fig, axes = plt.subplots(2, ncols, figsize=(4.4 * ncols, 6.6), squeeze=False)
    styles = {"configured": ("black", 0.0), "as run": ("C0", 0.03)}  # colour, x nudge of the MC points
    for col, name in enumerate(panels):
        sub = table.filter(pl.col("panel") == name)
        for basis, rows in sub.group_by("basis", maintain_order=True):
            basis = basis[0]
            rows = rows.sort("p")
            colour, nudge = styles.get(basis, ("C1", 0.06))
            p = rows["p"].to_numpy()
            for ax, quantity, style in (
                (axes[0][col], "p_flag", "-"),
                (axes[1][col], "p_certify_paper", "-"),
                (axes[1][col], "p_certify_betting", "--"),
            ):
                what = "flagged" if quantity == "p_flag" else quantity.rsplit("_", 1)[1]
                exact = rows[quantity].to_numpy()
                if rows[quantity].null_count() == 0:
                    ax.plot(p, exact, style, color=colour, label=f"{basis}: {what}")
                ax.errorbar(
                    p * (1 + nudge),
                    rows[f"{quantity}_mc"].to_numpy(),
                    yerr=2 * rows[f"{quantity}_se"].to_numpy(),
                    fmt="o" if style == "-" else "x",
                    color=colour,
                    markersize=3,
                    linestyle=style if rows[quantity].null_count() else "none",
                    label=f"{basis}: {what} (Monte Carlo)" if rows[quantity].null_count() else None,
                )
        first = sub.row(0, named=True)
        if first["clean_bound"] < first["certify_tau"]:
            axes[1][col].text(
                0.5,
                0.5,
                f"{first['certify_tau']:g} out of reach: a clean q_h's\npaper bound stops at {first['clean_bound']:.3f}",
                transform=axes[1][col].transAxes,
                ha="center",
                fontsize=8,
            )
        tau = "each whole pool" if first["tau"] is None else f"tau = {first['tau']:g}"
        axes[0][col].set_title(f"{name}: eta = {first['eta']:g}, {tau}", fontsize=9)
        axes[0][col].set_ylabel("P(flagged | p)")
        axes[1][col].set_ylabel(f"P(common bound >= {first['certify_tau']:g} | p)")
        for ax in axes[:, col]:
            ax.set_xscale("symlog", linthresh=1e-3)
            ax.set_xlim(0, 1)
            ax.set_ylim(-0.03, 1.03)
            ax.set_xlabel("p: share of degraded paraphrases")
            ax.legend(frameon=False, fontsize=6)
    _save(fig, out)


def _mc_cell(row: dict, quantity: str) -> str:
    """A closed-form value, or the Monte Carlo share with its standard error where there is none."""
    if row[quantity] is not None:
        return f"{row[quantity]:.3f}"
    return f"{row[f'{quantity}_mc']:.3f} ± {row[f'{quantity}_se']:.3f}"


def power_section(table: pl.DataFrame, stability: pl.DataFrame | None) -> list[str]:
    """summary.md's section on what the audit could have found (the configured pools once, the pools as run
    per dataset and grid cell) and on how stable its verdicts are to the paraphrases drawn."""
    table = _panels(table)
    first = table.row(0, named=True)
    configured = table.filter((pl.col("basis") == "configured") & (pl.col("panel") == first["panel"]))
    as_run = table.filter(pl.col("basis") != "configured")
    grid = sorted(set(table["p"].to_list()))
    rows = []
    for frame, every in ((configured, True), (as_run, False)):
        for (name, basis), sub in frame.group_by("panel", "basis", maintain_order=True):
            by_p = {r["p"]: r for r in sub.iter_rows(named=True)}
            where = ["(every cell)" if every else name, basis, "" if sub["n_qh"][0] is None else str(sub["n_qh"][0])]
            for label_, quantity in CHARACTERISTIC_QUANTITIES:
                rows.append([*where, label_, *(_mc_cell(by_p[p], quantity) for p in grid)])
            rows.append([*where, "Stage-2 draws read (mean)", *(by_p[p]["mean_n_tested"] for p in grid)])
    headers = ["dataset", "pools", "q_h", "quantity", *(f"p = {p:g}" for p in grid)]
    worst = {
        bound: min(
            (r[f"coverage_{bound}"] if r[f"coverage_{bound}"] is not None else r[f"coverage_{bound}_mc"])
            for r in table.iter_rows(named=True)
        )
        for bound in ("paper", "betting")
    }
    c = configured.row(0, named=True)
    tau = "each test pool read to its end" if c["tau"] is None else f"tau = {c['tau']:g}"
    detectable = "n/a (nothing is read)" if c["detectable_p"] is None else f"{c['detectable_p']:.4g}"
    run_detectable = "; ".join(
        f"{r['panel']}: " + ("n/a" if r["detectable_p"] is None else f"{r['detectable_p']:.4g}")
        for r in as_run.unique("panel", keep="first", maintain_order=True).iter_rows(named=True)
    )
    text = [
        "",
        "## Operating characteristic: what this audit could have found",
        "",
        "A hidden question whose paraphrases are each degraded (Delta > epsilon) independently with probability p,",
        "in every pool alike, audited as this run audits: **flagged** (status DEGRADED) when the paper's test reads",
        "a counterexample, P = 1 - (1 - p)^N with N the draws it reads on a q_h without one (the search pool plus",
        "min(M_test, n_tau) per generator, under either stopping rule); **certified** when the common bound reaches",
        f"tau_c = {first['certify_tau']:g} (`audit.tau`, or `audit.operating_characteristic.certify_tau` where the",
        "audit has no tau), for the paper's bound and for the betting bound. `configured`: the config's pools;",
        "`as run`: each audited q_h's pools as scored (shortfalls included), averaged over the q_h. Values are closed",
        "forms (the betting bound's exact by enumerating its streams where every test pool holds at most 14",
        f"paraphrases); `±`: a Monte Carlo share and its standard error ({first['draws']} audits per p, seed",
        f"{first['seed']}). Every closed form has its Monte Carlo twin in `operating_characteristic.parquet`.",
        "",
        f"- Configured: search {c['search_size']:g} + test {c['test_size']:g} x {c['generators']}, eta = {c['eta']:g}, "
        f"{tau}: N = {c['clean_reads']:g} draws read on a clean q_h; flagged with 80% power from p = {detectable}.",
        f"- Certification at tau_c = {c['certify_tau']:g}: "
        + (
            f"reachable (the paper's bound of a clean q_h: {c['clean_bound']:.3f})"
            if c["clean_bound"] >= c["certify_tau"]
            else f"**not reachable** with these test pools (the paper's bound of a clean q_h: {c['clean_bound']:.3f})"
        )
        + ".",
        f"- As run, flagged with 80% power from p = {run_detectable}.",
        f"- Coverage of 1 - p, lowest over the grid: paper's bound {worst['paper']:.3f}, betting bound "
        f"{worst['betting']:.3f} (each at least 1 - eta = {1 - c['eta']:g}).",
        "",
        markdown_table(headers, rows),
        "Figure: `figures/operating_characteristic.png` (and SVG).",
    ]
    if stability is None or stability.is_empty():
        return text
    skeys = [k for k in KEYS if k in stability.columns]
    flagged = pl.col("status") == "DEGRADED"
    counts = (
        stability.group_by(*skeys, "target", maintain_order=True)
        .agg(
            pl.len().alias("n_qh"),
            pl.col("stable").sum().alias("stable"),
            flagged.sum().alias("flagged"),
            (flagged & pl.col("stable")).sum().alias("flagged_stable"),
            (~flagged).sum().alias("unflagged"),
            (~flagged & pl.col("stable")).sum().alias("unflagged_stable"),
            pl.col("share_same").min().alias("lowest_share"),
        )
        .sort(*skeys, "target", nulls_last=True)
    )
    unstable = stability.filter(~pl.col("stable")).select(
        *skeys, "target", "pair_id", "status", "n_counterexamples", "n_search", "n_test", "share_same", "share_exact"
    )
    s = stability.row(0, named=True)
    text += [
        "",
        "## Verdict stability (bootstrap redraws of each q_h's pools)",
        "",
        f"Each audited q_h's pools (search and test) resampled with replacement within each pool, {s['redraws']} redraws,",
        "its status recomputed at the run's epsilon (held fixed): a verdict is stable when more than",
        f"{s['stable_share']:g} of the redraws keep it (`share_exact`: the share over infinitely many redraws, exact).",
        f"**{int(stability['stable'].sum())} of {stability.height}** verdicts are stable above {s['stable_share']:g}"
        " (per q_h in `stability.parquet`).",
        "",
        frame_table(counts),
        "Unstable verdicts:" if unstable.height else "No unstable verdict.",
        "",
        *([frame_table(unstable)] if unstable.height else []),
    ]
    return text


def headline_lines(summary: pl.DataFrame) -> list[str]:
    """One line per dataset (and grid cell): on how many audited q_h each target was flagged, the copy of
    V_base (the false-alarm check) included; untrained variants say so. Flagged: the audit's verdict
    DEGRADED, a counterexample in the search pool (Stage 1, the CR's count, given in brackets) or in a test
    pool (Stage 2); a q_h whose search pool the filters emptied can only be caught by the second."""
    lines = []
    for (name,), rows in _panels(summary).group_by("panel", maintain_order=True):
        parts = []
        for r in rows.iter_rows(named=True):
            note = " (untrained: V_base under its name)" if untrained(r["target"], r.get("training_rows")) else ""
            parts.append(
                f"{label(r['target'])}{note} on {r['n_degraded']} of {r['n_qh']} [{r['n_stage1_counterexample']}]"
            )
        lines.append(f"- **{name}**: " + ", ".join(parts))
    return [
        "Hidden questions flagged per verifier (status DEGRADED: a counterexample in the search pool or in a "
        "test pool; in brackets the search pool's alone, CR x n_qh):",
        "",
        *lines,
    ]


def brought_lines(brought: Mapping[str, Mapping[str, object]]) -> list[str]:
    """summary.md's account of the audits of models you bring (none: no line)."""
    if not brought:
        return []
    rows = [
        f"- **{name}**: base `{entry['base']}`, targets " + ", ".join(f"`{t}`" for t in entry["targets"])
        for name, entry in brought.items()
    ]
    return [
        "## Audits of models you bring (`audited_models`)",
        "",
        "Models this workflow did not train, audited by the same stages: their rows carry the audit's name as",
        "`architecture` (no length or L_qh weight), V_base is the audit's base, each target its model's name, and",
        "`training_rows` is null (their fine-tuning is not this workflow's).",
        "",
        *rows,
        "",
    ]


def bounded_lines(summary: pl.DataFrame) -> list[str]:
    """summary.md's warning where some Deltas rest on a bound, not a value (a verifier behind a chat endpoint whose
    answer label fell outside the top log-probabilities it returned: eraudit/common/readout.py); none: no line."""
    if "n_bounded_deltas" not in summary.columns:
        return []
    hit = summary.filter(pl.col("n_bounded_deltas") > 0)
    if hit.is_empty():
        return []
    rows = [
        f"- **{r.get('architecture') or '-'}**, {r['dataset']}, {label(r['target'])}: {r['n_bounded_deltas']} Deltas "
        f"on {r['n_qh_bounded']} of {r['n_qh']} q_h"
        for r in hit.iter_rows(named=True)
    ]
    return [
        "## Scores that are bounds, not values",
        "",
        "A verifier behind a chat endpoint is scored from the top log-probabilities of its first reply token; where",
        "an answer label is not among them, its log-probability is the bound the top-k implies (models/api.py), so",
        "P[V(q) = a] and every Delta computed from it are bounds. These audits hold such Deltas (column `bounded`",
        "of deltas.parquet, `n_bounded_deltas` of the records and the summary); their statuses and counterexamples",
        "rest on them:",
        "",
        *rows,
        "",
    ]


def _bound_of(column: str) -> str:
    """The bound ("paper" / "betting") a `mean_<column>[_survivors]` column averages."""
    base = column.removeprefix("mean_").removesuffix("_survivors")
    return next(b for b, c in BOUNDS.items() if c == base)
