"""Training loss curves of the fine-tuned verifiers: one figure per architecture, dataset and debate length
(PNG + SVG); V_org once per L_qh weight when the weight is swept (darker: larger weight). A variant that had no
training row has no curve: the figure names it as not trained rather than leave it out without a word."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from debate_audit.runtime.provenance import save_figure

from ..common.grid import Checkpoint
from ..common.verifiers import VARIANTS, color, label


def plot_loss_curves(
    curves: list[str | Path], png: str | Path, svg: str | Path, *, dataset: str, title: str | None = None
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frames = {Path(p): pl.read_parquet(p) for p in curves}
    frame = pl.concat(list(frames.values()))
    # a curve file sits at <length>/<variant>/loss_curve.parquet; an empty one: a variant never trained
    missing = [
        label(Checkpoint.of(p.parent.parent.name, p.parent.name).verifier) for p, f in frames.items() if f.is_empty()
    ]
    terms = [("loss", "total (weighted)"), ("loss_lm", "L_lm"), ("loss_fc", "L_fc"), ("loss_qh", "L_qh")]
    fig, axes = plt.subplots(1, len(terms), figsize=(4 * len(terms), 3.2), sharex=True)
    for ax, (column, title) in zip(axes, terms):
        for variant in VARIANTS:  # one colour per verifier across panels and figures
            rows = frame.filter(pl.col("variant") == variant)
            weights = (
                rows["qh_weight"].unique().sort(nulls_last=True).to_list() if "qh_weight" in rows.columns else [None]
            )
            for k, weight in enumerate(weights):
                data = rows.filter(pl.col("qh_weight").eq_missing(weight)) if "qh_weight" in rows.columns else rows
                data = data.drop_nulls(column).sort("step")
                if not data.height:
                    continue
                name = label(variant) + (f" (qh={weight:g})" if len(weights) > 1 else "")
                alpha = 1.0 if len(weights) == 1 else 0.4 + 0.6 * k / (len(weights) - 1)
                ax.plot(data["step"], data[column], marker="o", color=color(variant), alpha=alpha, label=name)
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_title(title)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("loss")
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    heading = f"{title or dataset}: verifier fine-tuning"
    if missing:
        heading += f"; not trained (no training rows, V_base unchanged): {', '.join(missing)}"
    fig.suptitle(heading)
    fig.tight_layout()
    for out in (png, svg):
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        save_figure(fig, out)
    plt.close(fig)
