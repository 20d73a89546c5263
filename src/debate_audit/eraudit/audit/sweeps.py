"""The audit's sweeps (rule audit_sweeps): average bounds over confidence levels (epsilon fixed) and over an
epsilon grid (eta fixed), from the same deltas as the audit itself."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import polars as pl
from tqdm.auto import tqdm

from debate_audit.data.io import write_parquet

from ..common.grid import labelled, with_labels
from .verdicts import (
    AuditSettings,
    _read_scores,
    compute_deltas,
    per_question_maxima,
    resolve_epsilon,
    run_audit,
    summarize,
)

log = logging.getLogger(__name__)

SWEEP_CONFIDENCE_SCHEMA = {
    "dataset": pl.Utf8,
    "target": pl.Utf8,
    "confidence": pl.Float64,  # 1 - eta
    "eta": pl.Float64,
    "epsilon": pl.Float64,  # the audit's epsilon, fixed along this sweep
    "n_qh": pl.Int64,
    "n_stage1_survivors": pl.Int64,
    "mean_lower_bound": pl.Float64,  # average common bound over all q_h (Stage-1 counterexample = 0)
    "mean_lower_bound_survivors": pl.Float64,  # over the Stage-1 survivors only (the release's number)
    "mean_lower_bound_tv": pl.Float64,
    "mean_lower_bound_betting": pl.Float64,  # the same three for the betting bound
    "mean_lower_bound_betting_survivors": pl.Float64,
    "mean_lower_bound_betting_tv": pl.Float64,
    "n_certified": pl.Int64,
}

SWEEP_EPSILON_SCHEMA = {
    "dataset": pl.Utf8,
    "target": pl.Utf8,
    "epsilon": pl.Float64,
    "epsilon_source": pl.Utf8,  # "value" or "p<k> of per-q_h max search Delta of V_org (...)"
    "eta": pl.Float64,  # the audit's eta, fixed along this sweep
    "n_qh": pl.Int64,
    "cr": pl.Float64,  # counterexample ratio at this epsilon
    "mean_lower_bound": pl.Float64,  # over all q_h (Stage-1 counterexample = 0)
    "mean_lower_bound_survivors": pl.Float64,  # over the Stage-1 survivors only
    "mean_lower_bound_betting": pl.Float64,  # the same two for the betting bound
    "mean_lower_bound_betting_survivors": pl.Float64,
    "n_degraded": pl.Int64,
    "n_degraded_draws": pl.Int64,  # counterexamples among the test draws at this epsilon
}


def audit_sweeps(
    *,
    scores: Sequence[str | Path],
    confidence_out: str | Path,
    epsilon_out: str | Path,
    settings: AuditSettings,
    labels: dict | None = None,
) -> None:
    """Average bounds over confidence levels (epsilon fixed) and over an epsilon grid (eta fixed)."""
    s = settings
    deltas = compute_deltas(
        _read_scores(scores), kappa=s.kappa, targets=s.targets, probability_decimals=s.probability_decimals
    )
    eps, _ = resolve_epsilon(deltas, epsilon=s.epsilon, percentile=s.epsilon_percentile, reference=s.epsilon_reference)
    common = {
        "test_pools": s.test_pools,
        "tau": s.tau,
        "tv_r": s.tv_r,
        "stop_at_first_counterexample": s.stop_at_first_counterexample,
        "betting_c": s.betting_c,
        "betting_w": s.betting_w,
        "with_steps": False,
    }
    conf_rows = []
    for level in tqdm(s.confidence_levels, desc="confidence sweep"):
        records, _, _ = run_audit(deltas, epsilon=eps, eta=round(1.0 - level, 12), **common)
        conf_rows.append(
            summarize(records).select(
                "dataset",
                "target",
                pl.lit(level).alias("confidence"),
                "eta",
                "epsilon",
                "n_qh",
                "n_stage1_survivors",
                "mean_lower_bound",
                "mean_lower_bound_survivors",
                "mean_lower_bound_tv",
                "mean_lower_bound_betting",
                "mean_lower_bound_betting_survivors",
                "mean_lower_bound_betting_tv",
                "n_certified",
            )
        )
    grid = [(float(v), "value") for v in s.sweep_epsilons]
    reference = s.epsilon_reference
    for p in s.sweep_epsilon_percentiles:
        if reference is None:
            log.info("epsilon sweep: no epsilon_reference target (models you bring), percentile %g left out", p)
            continue
        if per_question_maxima(deltas, reference).size == 0:
            log.warning("epsilon sweep: no search-pool Delta of V_%s, percentile %g left out", reference, p)
            continue
        grid.append(resolve_epsilon(deltas, epsilon=None, percentile=p, reference=reference))
    eps_rows = []
    for value, source in tqdm(grid, desc="epsilon sweep"):
        records, _, _ = run_audit(deltas, epsilon=value, eta=s.eta, epsilon_source=source, **common)
        eps_rows.append(
            summarize(records).select(
                "dataset",
                "target",
                "epsilon",
                "epsilon_source",
                "eta",
                "n_qh",
                "cr",
                "mean_lower_bound",
                "mean_lower_bound_survivors",
                "mean_lower_bound_betting",
                "mean_lower_bound_betting_survivors",
                "n_degraded",
                "n_degraded_draws",
            )
        )
    empty_c = pl.DataFrame(schema=SWEEP_CONFIDENCE_SCHEMA)
    empty_e = pl.DataFrame(schema=SWEEP_EPSILON_SCHEMA)
    conf = pl.concat([r.cast(SWEEP_CONFIDENCE_SCHEMA) for r in conf_rows]) if conf_rows else empty_c
    eps_frame = (
        pl.concat([r.cast(SWEEP_EPSILON_SCHEMA) for r in eps_rows]).sort("target", "epsilon") if eps_rows else empty_e
    )
    write_parquet(with_labels(conf, labels), labelled(SWEEP_CONFIDENCE_SCHEMA), confidence_out)
    write_parquet(with_labels(eps_frame, labels), labelled(SWEEP_EPSILON_SCHEMA), epsilon_out)
