"""ER-Audit statistics: degradation score, counterexample search, anytime-valid sequential test, sweeps.

Everything here is a pure function of probabilities already computed by the readout, so changing
epsilon, eta, tau or r never needs a model call.

Sequential test (one generator j, paraphrases drawn i.i.d. from j's test distribution). Let pi be the
probability that a paraphrase is non-degraded (Delta <= epsilon). After t non-degraded paraphrases in a row
the lower bound is L_t = eta^(1/t). It is anytime-valid: L_t > pi happens first at the smallest
t > log(eta)/log(pi), and reaching that t needs t non-degraded draws in a row, probability pi^t < eta. A
counterexample sets the bound to 0 and stops. Stopping once L_t >= tau (t >= ceil(log eta / log tau)) keeps
validity, since the bound only grows while the stream lasts.

Beside it, a betting confidence sequence (section below) reads the same stream to its end: valid at every t,
and still informative after degraded draws, where the paper's bound is 0 for good.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

import numpy as np

DEGRADED = "DEGRADED"
CERTIFIED = "CERTIFIED"
BUDGET_EXHAUSTED = "BUDGET_EXHAUSTED"
NOT_REACHED = "NOT_REACHED"
STATUSES = (DEGRADED, CERTIFIED, BUDGET_EXHAUSTED, NOT_REACHED)

CONFIDENCE_LEVELS = (0.8, 0.85, 0.9, 0.95, 0.99, 0.999)

# The audit's two lower bounds (config `audit.headline_bound` names one) -> the column holding each in the
# audit's records, generators and steps (`mean_<column>[_survivors]` in its summaries and sweeps).
BOUNDS = {"paper": "lower_bound", "betting": "lower_bound_betting"}


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


def degradation_rounded(
    p_base_h: Sequence[float],
    p_target_h: Sequence[float],
    p_base_m: float,
    p_target_m: float,
    kappa: float,
    decimals: int,
) -> np.ndarray:
    """`degradation` as the release computes it: every probability rounded to `decimals` places first
    (its readout's round(p, 8)), then the exact ratio of those decimals (its audit scripts compare
    `Fraction`s), given as the float nearest to it. A Delta exactly 0 (or exactly epsilon) at those places
    is then exactly that, never a float residue just above it."""
    if kappa <= 0:
        raise ValueError(f"kappa must be > 0, got {kappa}")

    def exact(p: float) -> Fraction:
        return Fraction(Decimal(round(float(p), decimals)).quantize(Decimal(1).scaleb(-decimals)))

    gain = max(Fraction(Decimal(repr(float(kappa)))), exact(p_target_m) - exact(p_base_m))
    return np.array([float((exact(b) - exact(t)) / gain) for b, t in zip(p_base_h, p_target_h)], dtype=float)


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


def sequential_test(deltas: Sequence[float], epsilon: float, eta: float, tau: float | None = None) -> SequentialResult:
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


# --------------------------------------------------------------------------- betting confidence sequence
# Waudby-Smith & Ramdas, "Estimating means of bounded random variables by betting" (JRSS-B 2024): the
# one-sided hedged capital with a predictable plug-in bet, mixed with the paper's bet. The paper's bound stakes
# everything on pi = 1 at every draw, so one degraded draw sets it to 0 for good; the mixture keeps a share 1 - w
# of the stake on a bet that survives failures. For a candidate rate m, with D_i = 1 for a non-degraded draw:
#   K_t(m) = prod_{i<=t} (1 + min(lam_i, c/m) (D_i - m))      every factor >= 1 - c > 0
#   M_t(m) = w prod_{i<=t} (D_i / m) + (1 - w) K_t(m)         (the first term is the paper's bet)
# Both terms are test martingales when the rate is m (lam_i depends on D_1..D_{i-1} only), so by Ville's
# inequality P(exists t: M_t(pi) >= 1/eta) <= eta. M_t(m) falls as m grows, so {m : M_t(m) >= 1/eta} is an
# interval (0, l_t]; the reported bound is its running maximum L*_t = max_{s<=t} l_s (the running
# intersection of the confidence sequence). The bets follow the pool's index order, fixed before any Delta
# is seen.
BETTING_C = 0.75  # truncation of the hedged bet: a degraded draw costs at most this share of the capital
BETTING_W = 0.5  # weight of the paper's bet in the mixture
# Bisection on m: 34 halvings of (0, 1) leave an interval shorter than 1e-10.
_BISECTION_STEPS = math.ceil(math.log2(1e10))


def betting_bets(non_degraded: Sequence[bool] | np.ndarray, eta: float) -> np.ndarray:
    """lam_t = sqrt(2 log(1/eta) / (s2_{t-1} t log(1 + t))) along the last axis, from draws before t only.

    Running estimates mu_t = (1/2 + sum_{i<=t} D_i) / (t + 1), s2_t = (1/4 + sum_{i<=t} (D_i - mu_i)^2) / (t + 1),
    s2_0 = 1/4.
    """
    _check_eta(eta)
    d = np.asarray(non_degraded, dtype=float)
    t = np.arange(1, d.shape[-1] + 1)
    mu = (0.5 + np.cumsum(d, axis=-1)) / (t + 1)
    s2 = (0.25 + np.cumsum((d - mu) ** 2, axis=-1)) / (t + 1)
    s2_before = np.full(d.shape, 0.25)
    s2_before[..., 1:] = s2[..., :-1]
    return np.sqrt((2.0 * math.log(1.0 / eta) / (t * np.log1p(t))) / s2_before)


def log_capital(
    non_degraded: Sequence[bool] | np.ndarray,
    m: float | np.ndarray,
    eta: float,
    c: float = BETTING_C,
    w: float = BETTING_W,
) -> np.ndarray:
    """log M_t(m) for t = 1..T along the last axis; `m` in (0, 1] broadcasts against the draws (a column per
    stream: shape (n, 1) for (n, T) draws)."""
    return _Capital(non_degraded, eta, c, w).log(m)


class _Capital:
    """The parts of log M_t(m) that do not depend on m, computed once for a bisection."""

    def __init__(self, non_degraded: Sequence[bool] | np.ndarray, eta: float, c: float, w: float) -> None:
        _check_betting(c, w)
        self.d = np.asarray(non_degraded, dtype=float)
        self.bets = betting_bets(self.d, eta)
        self.t = np.arange(1, self.d.shape[-1] + 1)
        self.clean = np.logical_and.accumulate(self.d > 0, axis=-1)  # the paper's bet is alive: no failure yet
        self.c = c
        # log w and log(1 - w); -inf leaves that bet out (w = 0 or 1)
        self.log_w = math.log(w) if w > 0 else -math.inf
        self.log_rest = math.log1p(-w) if w < 1 else -math.inf

    def log(self, m: float | np.ndarray) -> np.ndarray:
        m = np.asarray(m, dtype=float)
        log_hedged = np.cumsum(np.log1p(np.minimum(self.bets, self.c / m) * (self.d - m)), axis=-1)
        out = self.log_rest + log_hedged
        # the paper's bet is 0 after a failure: the mixture is then the hedged capital alone
        return np.logaddexp(self.log_w - self.t * np.log(m), out, out=out, where=self.clean)


def _betting_bisection(capital: _Capital, counted: np.ndarray | None, eta: float) -> np.ndarray:
    """Per row of (n, T) draws: sup {m : max over the `counted` t (all when None) of M_t(m) >= 1/eta}, by
    bisection on m. Returns the rejected end of the last interval (within 1e-10 below the supremum:
    conservative); 0 when no m is rejected."""
    n = capital.d.shape[0]
    threshold = math.log(1.0 / eta)
    lo, hi = np.zeros(n), np.ones(n)  # M_t(1) <= 1 < 1/eta: m = 1 is never rejected
    for _ in range(_BISECTION_STEPS):
        mid = (lo + hi) / 2
        log_m = capital.log(mid[:, None])
        if counted is not None:
            log_m = np.where(counted, log_m, -np.inf)
        rejected = np.max(log_m, axis=1) >= threshold
        lo = np.where(rejected, mid, lo)
        hi = np.where(rejected, hi, mid)
    return lo


def betting_bounds(
    non_degraded: Sequence[bool] | np.ndarray, eta: float, c: float = BETTING_C, w: float = BETTING_W
) -> np.ndarray:
    """L*_t after each draw of one stream (t = 1..T), non-decreasing."""
    d = np.asarray(non_degraded, dtype=float).reshape(-1)
    n = d.size
    if n == 0:
        return np.zeros(0)
    # Row t holds the whole stream, but only the capital at s <= t counts towards L*_t.
    return _betting_bisection(_Capital(np.broadcast_to(d, (n, n)), eta, c, w), np.tri(n, dtype=bool), eta)


def betting_final_bounds(
    non_degraded: np.ndarray, eta: float, c: float = BETTING_C, w: float = BETTING_W
) -> np.ndarray:
    """Vectorised L*_T over rows of a (streams x T) matrix of draws: the last value of `betting_bounds` per row."""
    d = np.asarray(non_degraded, dtype=float)
    if d.ndim != 2:
        raise ValueError(f"expected a (streams x draws) matrix, got shape {d.shape}")
    if d.shape[1] == 0:
        return np.zeros(d.shape[0])
    return _betting_bisection(_Capital(d, eta, c, w), None, eta)


def _check_betting(c: float, w: float) -> None:
    if not 0 < c < 1:
        raise ValueError(f"the betting truncation c must lie in (0, 1), got {c}")
    if not 0 <= w <= 1:
        raise ValueError(f"the betting mixture weight w must lie in [0, 1], got {w}")
