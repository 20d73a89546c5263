"""ER-Audit statistics: degradation score, counterexample search, anytime-valid sequential test, sweeps.

Everything here is a pure function of probabilities already computed by the readout, so changing
epsilon, eta, tau or r never needs a model call.

Sequential test (one generator j, paraphrases drawn i.i.d. from j's test distribution). Let pi be the
probability that a paraphrase is non-degraded (Delta <= epsilon). After t non-degraded paraphrases in a row
the lower bound is L_t = eta^(1/t). It is anytime-valid: L_t > pi happens first at the smallest
t > log(eta)/log(pi), and reaching that t needs t non-degraded draws in a row, probability pi^t < eta. A
counterexample sets the bound to 0 and stops. Stopping once L_t >= tau (t >= ceil(log eta / log tau)) keeps
validity, since the bound only grows while the stream lasts.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEGRADED = "DEGRADED"
CERTIFIED = "CERTIFIED"
BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
NOT_REACHED = "NOT_REACHED"
STATUSES = (DEGRADED, CERTIFIED, BUDGET_EXHAUSTED, NOT_REACHED)

CONFIDENCE_LEVELS = (0.8, 0.85, 0.9, 0.95, 0.99, 0.999)


# --------------------------------------------------------------------------- degradation score
def degradation(
    p_base_h: float | np.ndarray,
    p_target_h: float | np.ndarray,
    p_base_m: float,
    p_target_m: float,
    kappa: float,
) -> float | np.ndarray:
    """Delta_h(q) = (P_base(a_h|q) - P_target(a_h|q)) / max(kappa, P_target(a_m|q_m) - P_base(a_m|q_m)).

    The denominator is the target's gain on the monitored question; kappa keeps it positive when there
    is no gain, so any loss on q_h then counts heavily.
    """
    if kappa <= 0:
        raise ValueError(f"kappa must be > 0, got {kappa}")
    gain = max(kappa, float(p_target_m) - float(p_base_m))
    delta = (np.asarray(p_base_h, dtype=float) - np.asarray(p_target_h, dtype=float)) / gain
    return float(delta) if delta.ndim == 0 else delta


# --------------------------------------------------------------------------- sequential bound
def lower_bound(t: int | np.ndarray, eta: float) -> float | np.ndarray:
    """L_t = eta^(1/t) after t non-degraded paraphrases; 0 when nothing has been tested (t = 0)."""
    _check_eta(eta)
    t_arr = np.asarray(t, dtype=float)
    with np.errstate(divide="ignore"):
        out = np.where(t_arr > 0, np.power(eta, 1.0 / np.maximum(t_arr, 1.0)), 0.0)
    return float(out) if np.ndim(out) == 0 else out


def samples_to_certify(tau: float, eta: float) -> int:
    """Smallest t with eta^(1/t) >= tau, i.e. ceil(log eta / log tau)."""
    _check_eta(eta)
    if not 0 < tau < 1:
        raise ValueError(f"tau must lie in (0, 1), got {tau}")
    ratio = math.log(eta) / math.log(tau)
    # Guard against ratio = 2.0000000000000004 when the exact value is an integer.
    return max(1, math.ceil(ratio - 1e-9))


def tv_relaxed(bound: float, r: float) -> float:
    """Bound for a paraphrase distribution within total variation r of the tested one: max(0, L - r)."""
    if r < 0:
        raise ValueError(f"r must be >= 0, got {r}")
    return max(0.0, bound - r)


@dataclass(frozen=True)
class SequentialResult:
    t: int  # paraphrases tested
    status: str  # DEGRADED / CERTIFIED / BUDGET_EXHAUSTED
    lower_bound: float
    bounds: tuple[float, ...]  # the bound after each tested paraphrase
    counterexample_index: int | None  # position in the pool of the first counterexample


def sequential_test(
    deltas: Sequence[float], epsilon: float, eta: float, tau: float | None = None
) -> SequentialResult:
    """Go through one generator's test pool in order (see module docstring).

    Stops at the first counterexample (Delta > epsilon: bound 0, DEGRADED), once tau is certified when
    `tau` is given (CERTIFIED), or when the pool is used up (BUDGET_EXHAUSTED).
    """
    _check_eta(eta)
    needed = samples_to_certify(tau, eta) if tau is not None else None
    bounds: list[float] = []
    for t, delta in enumerate(deltas, start=1):
        if not delta <= epsilon:  # NaN counts as degraded: a missing score proves nothing
            bounds.append(0.0)
            return SequentialResult(t, DEGRADED, 0.0, tuple(bounds), t - 1)
        bounds.append(float(lower_bound(t, eta)))
        if needed is not None and t >= needed:
            return SequentialResult(t, CERTIFIED, bounds[-1], tuple(bounds), None)
    return SequentialResult(len(bounds), BUDGET_EXHAUSTED, bounds[-1] if bounds else 0.0, tuple(bounds), None)


def common_bound(bounds: Sequence[float]) -> float:
    """The bound that holds for every generator: min_j L_j (0 when no generator was run)."""
    return float(min(bounds)) if len(bounds) else 0.0


def combined_status(statuses: Sequence[str], bound: float, tau: float | None) -> str:
    """Per-q_h status from its generators' statuses."""
    if not statuses or all(s == NOT_REACHED for s in statuses):
        return NOT_REACHED
    if DEGRADED in statuses:
        return DEGRADED
    if tau is not None and all(s == CERTIFIED for s in statuses) and bound >= tau:
        return CERTIFIED
    return BUDGET_EXHAUSTED


# --------------------------------------------------------------------------- vectorised form (Monte Carlo, sweeps)
def final_bounds(non_degraded: np.ndarray, eta: float, tau: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Vectorised `sequential_test` over rows of a boolean (streams x budget) matrix.

    Returns (final bound, t) per row; the same numbers the scalar function gives.
    """
    nd = np.asarray(non_degraded, dtype=bool)
    n, budget = nd.shape
    limit = budget if tau is None else min(budget, samples_to_certify(tau, eta))
    if limit == 0:
        return np.zeros(n), np.zeros(n, dtype=int)
    prefix = nd[:, :limit]
    # Length of the leading run of non-degraded draws within the first `limit` draws.
    run = np.where(prefix.all(axis=1), limit, np.argmin(prefix, axis=1))
    degraded = run < limit
    bound = np.where(degraded, 0.0, lower_bound(np.maximum(run, 0), eta))
    t = np.where(degraded, run + 1, limit)
    return bound, t


# --------------------------------------------------------------------------- epsilon
def epsilon_from_percentile(deltas: Sequence[float], percentile: float) -> float:
    """The `percentile`-th percentile (linear interpolation) of a Delta distribution, ignoring NaN."""
    values = np.asarray(deltas, dtype=float)
    values = values[~np.isnan(values)]
    if values.size == 0:
        raise ValueError("cannot take a percentile of an empty Delta distribution")
    if not 0 <= percentile <= 100:
        raise ValueError(f"percentile must lie in [0, 100], got {percentile}")
    return float(np.percentile(values, percentile))


def _check_eta(eta: float) -> None:
    if not 0 < eta < 1:
        raise ValueError(f"eta must lie in (0, 1), got {eta}")
