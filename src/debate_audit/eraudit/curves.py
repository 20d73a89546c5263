"""Training loss curves of the fine-tuned verifiers: one figure per dataset (PNG + SVG)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from debate_audit.provenance import save_figure

from .verifiers import VARIANTS, color, label


def plot_loss_curves(curves: list[str | Path], png: str | Path, svg: str | Path, *, dataset: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    frame = pl.concat([pl.read_parquet(p) for p in curves])
    terms = [("loss", "total (weighted)"), ("loss_lm", "L_lm"), ("loss_fc", "L_fc"), ("loss_qh", "L_qh")]
    fig, axes = plt.subplots(1, len(terms), figsize=(4 * len(terms), 3.2), sharex=True)
    for ax, (column, title) in zip(axes, terms):
        for variant in VARIANTS:  # one colour per verifier across panels and figures
            data = frame.filter(pl.col("variant") == variant).drop_nulls(column).sort("step")
            if data.height:
                ax.plot(data["step"], data[column], marker="o", color=color(variant), label=label(variant))
        ax.xaxis.get_major_locator().set_params(integer=True)
        ax.set_title(title)
        ax.set_xlabel("optimizer step")
        ax.set_ylabel("loss")
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
    fig.suptitle(f"{dataset}: verifier fine-tuning")
    fig.tight_layout()
    for out in (png, svg):
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        save_figure(fig, out)
    plt.close(fig)
