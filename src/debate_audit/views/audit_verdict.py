"""The verdict `debate-audit audit` prints, read from a finished audit's files (no model is called).

Per dataset and target of the audit `audited_models.<audit>`: the hidden questions flagged (status DEGRADED)
of those audited and which, the counterexample ratio (CR), both common bounds (mean over every audited q_h, a
flagged one counted as 0: summary.parquet), and the strongest counterexamples (search or test paraphrases
with Delta > epsilon, largest first: deltas.parquet); then the smallest per-paraphrase degradation rate the
configured pools flag with 80% power (eraudit/audit/power.py detectable_p) and where the summary, the figures
and the browser are.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from debate_audit.runtime.runs import results_dir

POWER = 0.8
STRONGEST = 3  # counterexamples shown per target and dataset
QUESTION_CHARS = 100


def detectable_rate(config: Mapping[str, Any]) -> float | None:
    """The smallest p the configured pools flag with 80% power (None where they read nothing)."""
    from debate_audit.eraudit.audit.power import design_from_config, detectable_p

    return detectable_p(design_from_config(config), POWER)


def counterexamples(deltas: pl.DataFrame, target: str, epsilon: float, n: int = STRONGEST) -> pl.DataFrame:
    """The target's `n` paraphrases with the largest Delta above epsilon (NaN left out)."""
    return (
        deltas.filter(
            (pl.col("target") == target)
            & (pl.col("kind") == "paraphrase")
            & pl.col("delta").is_not_nan()
            & (pl.col("delta") > epsilon)
        )
        .sort("delta", descending=True)
        .head(n)
    )


def _bound(value: Any) -> str:
    return "n/a" if value is None else f"{value:.3f}"


def target_lines(summary: Mapping[str, Any], records: pl.DataFrame, deltas: pl.DataFrame) -> list[str]:
    """The verdict of one target on one dataset."""
    target = summary["target"]
    flagged = records.filter((pl.col("target") == target) & (pl.col("status") == "DEGRADED"))["pair_id"].to_list()
    n_qh, n_flagged = summary["n_qh"], summary["n_degraded"]
    head = f"FLAGGED {n_flagged} of {n_qh}" if n_flagged else f"not flagged: 0 of {n_qh}"
    which = f" (pairs {', '.join(str(p) for p in sorted(flagged))})" if flagged else ""
    lines = [
        f"  {target}: {head} hidden questions degraded{which}; CR {summary['cr']:.2f} "
        f"({summary['n_stage1_counterexample']} by a search-pool counterexample); common bound "
        f"{_bound(summary['mean_lower_bound'])} (paper) / {_bound(summary['mean_lower_bound_betting'])} (betting), "
        f"mean over the {n_qh}"
    ]
    strongest = counterexamples(deltas, target, summary["epsilon"])
    if strongest.height:
        lines.append("    strongest counterexamples (Delta, pool, pair):")
    for row in strongest.iter_rows(named=True):
        question = textwrap.shorten(row["question"] or "", QUESTION_CHARS, placeholder=" ...")
        lines.append(f"      {row['delta']:.3f}  {row['pool']}  pair {row['pair_id']}  {question}")
    if summary.get("n_qh_bounded"):
        lines.append(f"    {summary['n_qh_bounded']} q_h rest on bounded scores (summary.md says which)")
    return lines


def render_verdict(config: Mapping[str, Any], audit: str, *, repeat: str | Path | None = None) -> str:
    """The verdict of `audited_models.<audit>` in the run `config` names (config `run`)."""
    entry = config["audited_models"][audit]
    results = results_dir(config.get("run") or "")
    audit_out = results / "er_audit" / "audit"
    lines = [f"Audit {audit}: {', '.join(entry['targets'])} against {entry['base']}"]
    for dataset in entry["datasets"]:
        cell = audit_out / "models" / audit / dataset
        summary = pl.read_parquet(cell / "summary.parquet")
        records = pl.read_parquet(cell / "records.parquet")
        deltas = pl.read_parquet(cell / "deltas.parquet")
        epsilon = summary["epsilon"][0] if summary.height else None
        source = summary["epsilon_source"][0] if summary.height else ""
        lines.append(f"{dataset} (epsilon {_bound(epsilon)}, {source}):")
        for row in summary.iter_rows(named=True):
            lines += target_lines(row, records, deltas)
    p = detectable_rate(config)
    par = config["paraphrase"]
    pools = f"search {par['search']['size']} + test {par['test']['size']} x {len(par['test']['generators'])}"
    if p is not None:
        lines.append(
            f"These pools ({pools} paraphrases per q_h) flag a hidden question degraded at rate p with "
            f"{POWER:.0%} power from p = {p:.3f}; a rarer degradation can go unseen."
        )
    lines += [
        f"Summary: {audit_out / 'summary.md'}; figures: {audit_out / 'figures'}/; the audit's files: "
        f"{audit_out / 'models' / audit}/",
        "Browser: debate-audit browse --configfile "
        + (str(repeat) if repeat else "<the overlay>")
        + " (it needs CW-POR's outputs too, so it runs CW-POR first)",
    ]
    if repeat:
        lines.append(f"Repeat: debate-audit run --configfile {repeat}")
    return "\n".join(lines)
