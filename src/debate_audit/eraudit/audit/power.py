"""What the audit could have found: its operating characteristic, and how stable each verdict it reached is
(rule audit_power; `make plan` for the configured pools). No model call.

The model. A hidden question q_h whose paraphrases are each degraded (Delta > epsilon) independently with
probability p, in the search pool and in every test pool alike (non-degradation rate pi = 1 - p for every
generator). The audit is the one run_audit runs (verdicts.py): Stage 1 on the search pool, then Algorithm 2
over the test generators in order, the paper's test stopping at its first counterexample or once tau is
certified (n_tau = ceil(log eta / log tau) draws), the q_h's audit ending at its first counterexample under
`stop_at_first_counterexample`; the betting bound reads every test pool in full.

- Flagged (status DEGRADED): a counterexample among the draws the paper's test reads, which on a q_h that
  has none are N = M_search + sum_j min(M_j, n_tau). So P(flagged | p) = 1 - (1 - p)^N under either stopping
  rule: ending the audit at the first counterexample ends it once the q_h is flagged, and changes the draws
  read (`mean_n_tested`), not the verdict.
- Certified at level tau_c (`certify_tau`: audit.tau, or operating_characteristic.certify_tau when the audit
  has no tau): the paper's common bound min_j L_j >= tau_c, which needs no counterexample among those N
  draws and min_j eta^(1/min(M_j, n_tau)) >= tau_c: P = (1 - p)^N or 0. At p = 0 it only says whether the
  budget can reach tau_c at all.
- The betting common bound: 0 after a Stage-1 counterexample, else min_j L*_j over whole pools, so
  P(>= tau_c) = (1 - p)^M_search prod_j P(L*_j >= tau_c). P(L*_j >= tau_c) is exact for a pool of at most
  EXACT_POOL draws (all 2^M_j streams enumerated) and left to Monte Carlo beyond.
- Coverage: P(common bound <= 1 - p), at least 1 - eta for both bounds (paper Theorems 1-2; Ville's
  inequality for the betting bound); exact for the paper's bound, and for the betting bound where its pools
  are enumerated.

The Monte Carlo simulates the streams and runs them through the audit's own vectorised functions
(stats.final_bounds, stats.betting_final_bounds), so it checks the closed forms against the procedure, not
against themselves; every share comes with its binomial standard error.

Verdict stability (`verdict_stability`): each audited q_h's pools (search and test, as scored) resampled with
replacement within each pool, the audit's status recomputed at the run's epsilon, and the share of redraws
that keep the run's status. Epsilon stays the run's: where it is a percentile of V_org's search maxima it
would move with those pools too, so the shares are conditional on it.
"""

from __future__ import annotations

import logging
import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import polars as pl

from debate_audit.data.io import write_parquet

from ..common.grid import labelled, with_labels
from ..paraphrase.pools import SEARCH_POOL
from . import stats

log = logging.getLogger(__name__)

DETECTABLE_POWER = 0.8  # the power at which the summary and the plan give the smallest detectable p
EXACT_POOL = 14  # betting probabilities by enumerating the 2^M streams of a test pool up to this size
_BLOCK = 4096  # streams per block of the betting bound's bisection (bounds its memory, not its result)


# ------------------------------------------------------------------------------------ the design
@dataclass(frozen=True)
class AuditDesign:
    """The audit as configured (or as run for one q_h): pool sizes and the test's settings."""

    search_size: int  # M_search
    test_sizes: tuple[int, ...]  # M_j per test generator, in the order Stage 2 reads them
    eta: float
    tau: float | None  # audit.tau: the paper's test stops at n_tau draws; None: reads each whole pool
    certify_tau: float  # the level P(certify) reads (audit.tau, or operating_characteristic.certify_tau)
    stop_at_first_counterexample: bool = True
    betting_c: float = stats.BETTING_C
    betting_w: float = stats.BETTING_W

    def __post_init__(self) -> None:
        object.__setattr__(self, "test_sizes", tuple(int(m) for m in self.test_sizes))
        if self.search_size < 0 or any(m < 0 for m in self.test_sizes):
            raise ValueError(f"pool sizes must be >= 0, got {self.search_size} and {self.test_sizes}")
        if not 0 < self.eta < 1:
            raise ValueError(f"eta must lie in (0, 1), got {self.eta}")
        for name in ("tau", "certify_tau"):
            value = getattr(self, name)
            if value is not None and not 0 < value < 1:
                raise ValueError(f"{name} must lie in (0, 1), got {value}")

    @property
    def n_tau(self) -> int | None:
        """Draws the paper's test needs to certify tau; None without tau."""
        return None if self.tau is None else stats.samples_to_certify(self.tau, self.eta)

    @property
    def read_limits(self) -> tuple[int, ...]:
        """Per test generator, the most draws the paper's test reads: min(M_j, n_tau)."""
        return tuple(m if self.n_tau is None else min(m, self.n_tau) for m in self.test_sizes)

    @property
    def clean_reads(self) -> int:
        """N: the draws the paper's test reads on a q_h without a counterexample (Stage 1 included)."""
        return self.search_size + sum(self.read_limits)

    @property
    def clean_bound(self) -> float:
        """The paper's common bound of a q_h without a counterexample: min_j eta^(1/min(M_j, n_tau))."""
        if not self.test_sizes:
            return 0.0
        return stats.common_bound([float(stats.lower_bound(t, self.eta)) for t in self.read_limits])

    @property
    def certifiable(self) -> bool:
        """Whether the budget can reach certify_tau at all (P(certify | p = 0) = 1)."""
        return self.clean_bound >= self.certify_tau

    def with_pools(self, search_size: int, test_size: int) -> AuditDesign:
        """The same audit with a search pool of `search_size` and every test pool of `test_size`."""
        return replace(self, search_size=search_size, test_sizes=(test_size,) * len(self.test_sizes))


def design_from_config(config: Mapping) -> AuditDesign:
    """The configured audit: `paraphrase.search.size`, `paraphrase.test.size` per generator of
    `paraphrase.test.generators`, and `audit` (tau_c: `audit.operating_characteristic.certify_tau`, or
    audit.tau when that is null)."""
    par, aud = config["paraphrase"], config["audit"]
    certify = aud["operating_characteristic"].get("certify_tau") or aud["tau"]
    if certify is None:
        raise ValueError(
            "audit.operating_characteristic.certify_tau: null while audit.tau is null: set the level at which "
            "P(certify) is read"
        )
    return AuditDesign(
        search_size=par["search"]["size"],
        test_sizes=(par["test"]["size"],) * len(par["test"]["generators"]),
        eta=aud["eta"],
        tau=aud["tau"],
        certify_tau=certify,
        stop_at_first_counterexample=aud["stop_at_first_counterexample"],
        betting_c=aud["betting_c"],
        betting_w=aud["betting_w"],
    )


def _grid(p: float | Sequence[float] | np.ndarray) -> np.ndarray:
    grid = np.atleast_1d(np.asarray(p, dtype=float))
    if ((grid < 0) | (grid > 1)).any():
        raise ValueError(f"degradation rates p must lie in [0, 1], got {grid.tolist()}")
    return grid


# ------------------------------------------------------------------------------------ closed forms
def flag_probability(design: AuditDesign, p: float | Sequence[float] | np.ndarray) -> np.ndarray:
    """P(flagged | p) = 1 - (1 - p)^N, N = M_search + sum_j min(M_j, n_tau)."""
    return 1.0 - (1.0 - _grid(p)) ** design.clean_reads


def paper_certify_probability(design: AuditDesign, p: float | Sequence[float] | np.ndarray) -> np.ndarray:
    """P(paper's common bound >= tau_c | p): (1 - p)^N where the budget reaches tau_c, else 0."""
    clean = (1.0 - _grid(p)) ** design.clean_reads
    return clean if design.certifiable else np.zeros_like(clean)


def paper_coverage(design: AuditDesign, p: float | Sequence[float] | np.ndarray) -> np.ndarray:
    """P(paper's common bound <= 1 - p | p): it exceeds 1 - p only on a clean q_h whose clean bound does."""
    grid = _grid(p)
    return 1.0 - (1.0 - grid) ** design.clean_reads * (design.clean_bound > 1.0 - grid)


def _pool_bound_table(size: int, design: AuditDesign) -> tuple[np.ndarray, np.ndarray]:
    """Every stream of `size` draws (rows of booleans, True = non-degraded) and its final betting bound."""
    streams = ((np.arange(2**size)[:, None] >> np.arange(size)) & 1).astype(bool)
    return streams, stats.betting_final_bounds(streams, design.eta, design.betting_c, design.betting_w)


def _stream_probabilities(streams: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """P(stream | p), (len(grid) x streams), by the count of its degraded draws (0^0 = 1 at p = 0 or 1)."""
    bad = (~streams).sum(axis=1)
    good = streams.shape[1] - bad
    return grid[:, None] ** bad[None, :] * (1.0 - grid[:, None]) ** good[None, :]


def betting_exact(design: AuditDesign, p: float | Sequence[float] | np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
    """(P(betting common bound >= tau_c | p), P(it is <= 1 - p | p)) by enumerating every test pool's streams;
    None when a pool holds more than EXACT_POOL draws."""
    grid = _grid(p)
    if any(m > EXACT_POOL for m in design.test_sizes):
        return None
    if not design.test_sizes:
        return np.zeros_like(grid), np.ones_like(grid)
    clean_search = (1.0 - grid) ** design.search_size
    certify, over = clean_search.copy(), clean_search.copy()
    for size in design.test_sizes:
        streams, bounds = _pool_bound_table(size, design)
        weights = _stream_probabilities(streams, grid)
        certify *= (weights * (bounds[None, :] >= design.certify_tau)).sum(axis=1)
        over *= (weights * (bounds[None, :] > (1.0 - grid)[:, None])).sum(axis=1)
    return certify, 1.0 - over


# ------------------------------------------------------------------------------------ Monte Carlo
@dataclass(frozen=True)
class Simulated:
    """One simulated audit per row (`simulate`)."""

    flagged: np.ndarray  # status DEGRADED
    paper: np.ndarray  # the paper's common bound
    betting: np.ndarray  # the betting common bound
    n_tested: np.ndarray  # Stage-2 draws the paper's test read (records.parquet's n_tested)


def _betting_blocks(streams: np.ndarray, design: AuditDesign) -> np.ndarray:
    """The final betting bound of every row of a boolean (streams x draws) matrix. Each distinct stream is
    computed once (at small p most streams are all clean or nearly so), in blocks of _BLOCK rows."""
    if streams.shape[0] == 0:
        return np.zeros(0)
    distinct, inverse = np.unique(np.packbits(streams, axis=1), axis=0, return_inverse=True)
    unpacked = np.unpackbits(distinct, axis=1, count=streams.shape[1]).astype(bool)
    out = np.zeros(unpacked.shape[0])
    for start in range(0, unpacked.shape[0], _BLOCK):
        block = unpacked[start : start + _BLOCK]
        out[start : start + _BLOCK] = stats.betting_final_bounds(block, design.eta, design.betting_c, design.betting_w)
    return out[inverse.reshape(-1)]


def simulate(design: AuditDesign, p: float, draws: int, rng: np.random.Generator) -> Simulated:
    """`draws` audits of a q_h degraded at rate p, as run_audit runs them (module docstring)."""
    search = rng.random((draws, design.search_size)) >= p  # True: non-degraded
    stage1 = ~search.all(axis=1)
    flagged = stage1.copy()
    stopped = np.zeros(draws, dtype=bool)  # an earlier generator's counterexample ended the paper's test
    paper = np.full(draws, np.inf)
    betting = np.full(draws, np.inf)
    n_tested = np.zeros(draws, dtype=int)
    for size, limit in zip(design.test_sizes, design.read_limits):
        pool = rng.random((draws, size)) >= p
        reached = ~stage1 & ~stopped
        bound, t = stats.final_bounds(pool, design.eta, design.tau)
        degraded = ~pool[:, :limit].all(axis=1)
        paper = np.minimum(paper, np.where(reached, bound, 0.0))  # NOT_REACHED: bound 0
        n_tested += np.where(reached, t, 0)
        flagged |= reached & degraded
        if design.stop_at_first_counterexample:
            stopped |= reached & degraded
        read = np.zeros(draws)
        if size and (~stage1).any():  # the betting bound reads every pool of a Stage-1 survivor in full
            read[~stage1] = _betting_blocks(pool[~stage1], design)
        betting = np.minimum(betting, read)
    no_bound = stage1 | (not design.test_sizes)
    return Simulated(flagged, np.where(no_bound, 0.0, paper), np.where(no_bound, 0.0, betting), n_tested)


def p_seed(seed: int, p: float) -> np.random.Generator:
    """The generator of one grid point: the same draws for p whatever else the grid holds."""
    return np.random.default_rng([seed, int(np.float64(p).view(np.uint64))])


def _share(hits: np.ndarray) -> tuple[float, float]:
    """A Monte Carlo share and its binomial standard error."""
    share = float(np.mean(hits))
    return share, math.sqrt(share * (1.0 - share) / hits.size)


# ------------------------------------------------------------------------------------ the characteristic
CHARACTERISTIC_SCHEMA = {
    "dataset": pl.Utf8,
    # "configured": the config's pools; "as run": each audited q_h's pools as scored (the run's shortfalls),
    # the characteristic averaged over them
    "basis": pl.Utf8,
    "n_qh": pl.Int64,  # q_h averaged over ("as run"); null for "configured"
    "search_size": pl.Float64,  # M_search (mean over q_h for "as run")
    "test_size": pl.Float64,  # M_j per test generator (mean over generators and q_h)
    "generators": pl.Int64,  # test generators
    "clean_reads": pl.Float64,  # N: draws the paper's test reads on a q_h without a counterexample (mean)
    "clean_bound": pl.Float64,  # the paper's common bound of a q_h without a counterexample (mean)
    "detectable_p": pl.Float64,  # smallest p flagged with probability DETECTABLE_POWER (0.8); null: none
    "eta": pl.Float64,
    "tau": pl.Float64,  # audit.tau (null: each whole pool)
    "certify_tau": pl.Float64,  # the level P(certify) reads
    "p": pl.Float64,  # per-paraphrase degradation rate
    "p_flag": pl.Float64,  # P(status DEGRADED | p), closed form
    "p_flag_mc": pl.Float64,  # the same by Monte Carlo ...
    "p_flag_se": pl.Float64,  # ... and its standard error
    "p_certify_paper": pl.Float64,  # P(paper's common bound >= certify_tau | p), closed form
    "p_certify_paper_mc": pl.Float64,
    "p_certify_paper_se": pl.Float64,
    "p_certify_betting": pl.Float64,  # P(betting common bound >= certify_tau | p), exact; null: pools too large
    "p_certify_betting_mc": pl.Float64,
    "p_certify_betting_se": pl.Float64,
    "coverage_paper": pl.Float64,  # P(paper's common bound <= 1 - p | p), closed form (>= 1 - eta)
    "coverage_paper_mc": pl.Float64,
    "coverage_paper_se": pl.Float64,
    "coverage_betting": pl.Float64,  # P(betting common bound <= 1 - p | p), exact; null: pools too large
    "coverage_betting_mc": pl.Float64,
    "coverage_betting_se": pl.Float64,
    "mean_n_tested": pl.Float64,  # Stage-2 draws the paper's test reads, Monte Carlo mean (the stopping rules' cost)
    "draws": pl.Int64,  # Monte Carlo draws per p
    "seed": pl.Int64,
}


def characteristic(
    designs: Sequence[tuple[AuditDesign, int]],
    p_grid: Sequence[float],
    *,
    draws: int,
    seed: int,
    dataset: str,
    basis: str,
) -> pl.DataFrame:
    """The operating characteristic of a mixture of designs (design, number of q_h with it): closed forms
    averaged with those weights, and `draws` Monte Carlo audits per p, each of a design drawn by weight.
    One row per p (CHARACTERISTIC_SCHEMA)."""
    if not designs:
        raise ValueError(f"{dataset}: no design to characterise")
    if draws < 1:
        raise ValueError(f"audit.operating_characteristic.monte_carlo_draws: {draws} must be >= 1")
    grid = _grid(p_grid)
    counts = np.array([n for _, n in designs], dtype=float)
    weights = counts / counts.sum()
    first = designs[0][0]

    def mean(values: Sequence[np.ndarray]) -> np.ndarray:
        return np.sum([w * v for w, v in zip(weights, values)], axis=0)

    flag = mean([flag_probability(d, grid) for d, _ in designs])
    certify = mean([paper_certify_probability(d, grid) for d, _ in designs])
    coverage = mean([paper_coverage(d, grid) for d, _ in designs])
    exact = [betting_exact(d, grid) for d, _ in designs]
    bet_certify = None if any(e is None for e in exact) else mean([e[0] for e in exact])
    bet_coverage = None if any(e is None for e in exact) else mean([e[1] for e in exact])
    detectable = mixture_detectable_p(designs, DETECTABLE_POWER)
    rows = []
    for k, p in enumerate(grid):
        rng = p_seed(seed, float(p))
        assigned = rng.multinomial(draws, weights)
        runs = [simulate(d, float(p), int(n), rng) for (d, _), n in zip(designs, assigned) if n]
        flagged = np.concatenate([r.flagged for r in runs])
        paper = np.concatenate([r.paper for r in runs])
        betting = np.concatenate([r.betting for r in runs])
        n_tested = np.concatenate([r.n_tested for r in runs])
        mc = {
            "p_flag": _share(flagged),
            "p_certify_paper": _share(paper >= first.certify_tau),
            "p_certify_betting": _share(betting >= first.certify_tau),
            "coverage_paper": _share(paper <= 1.0 - p),
            "coverage_betting": _share(betting <= 1.0 - p),
        }
        row = {
            "dataset": dataset,
            "basis": basis,
            "n_qh": int(counts.sum()) if basis != "configured" else None,
            "search_size": float(np.dot(weights, [d.search_size for d, _ in designs])),
            "test_size": float(np.dot(weights, [np.mean(d.test_sizes) if d.test_sizes else 0.0 for d, _ in designs])),
            "generators": len(first.test_sizes),
            "clean_reads": float(np.dot(weights, [d.clean_reads for d, _ in designs])),
            "clean_bound": float(np.dot(weights, [d.clean_bound for d, _ in designs])),
            "detectable_p": detectable,
            "eta": first.eta,
            "tau": first.tau,
            "certify_tau": first.certify_tau,
            "p": float(p),
            "p_flag": float(flag[k]),
            "p_certify_paper": float(certify[k]),
            "p_certify_betting": None if bet_certify is None else float(bet_certify[k]),
            "coverage_paper": float(coverage[k]),
            "coverage_betting": None if bet_coverage is None else float(bet_coverage[k]),
            "mean_n_tested": float(np.mean(n_tested)),
            "draws": draws,
            "seed": seed,
        }
        for name, (share, se) in mc.items():
            row[f"{name}_mc"], row[f"{name}_se"] = share, se
        rows.append(row)
    return pl.DataFrame(rows, schema=CHARACTERISTIC_SCHEMA)


# ------------------------------------------------------------------------------------ planning
def reads_for_power(p: float, power: float) -> int:
    """Smallest N with 1 - (1 - p)^N >= power."""
    if not 0 < p < 1 or not 0 < power < 1:
        raise ValueError(f"need 0 < p < 1 and 0 < power < 1, got p={p}, power={power}")
    n = max(1, math.ceil(math.log1p(-power) / math.log1p(-p)))
    while n > 1 and 1.0 - (1.0 - p) ** (n - 1) >= power:  # float rounding of the logarithms, either way
        n -= 1
    while 1.0 - (1.0 - p) ** n < power:
        n += 1
    return n


def detectable_p(design: AuditDesign, power: float) -> float | None:
    """Smallest p flagged with probability >= power: 1 - (1 - power)^(1/N); None when nothing is read."""
    if not 0 < power < 1:
        raise ValueError(f"power must lie in (0, 1), got {power}")
    n = design.clean_reads
    return None if n == 0 else -math.expm1(math.log1p(-power) / n)


def mixture_detectable_p(designs: Sequence[tuple[AuditDesign, int]], power: float) -> float | None:
    """Smallest p at which the q_h-weighted mean of P(flagged | p) reaches `power` (bisection to 1e-12; one
    design: `detectable_p`); None when no p reaches it (a design that reads nothing never flags)."""
    counts = np.array([n for _, n in designs], dtype=float)

    def flagged(p: float) -> float:
        return float(np.dot(counts, [flag_probability(d, p)[0] for d, _ in designs]) / counts.sum())

    if flagged(1.0) < power:
        return None
    lo, hi = 0.0, 1.0
    while hi - lo > 1e-12:
        mid = (lo + hi) / 2
        lo, hi = (lo, mid) if flagged(mid) >= power else (mid, hi)
    return hi


def equal_pools_for(design: AuditDesign, p: float, power: float) -> AuditDesign:
    """The smallest M such that M search paraphrases and M per test generator (the paper's shape, 100 + 100)
    flag a q_h degraded at rate p with probability >= power."""
    need = reads_for_power(p, power)
    lo, hi = 1, need  # M = need reads `need` in Stage 1 alone
    while lo < hi:
        mid = (lo + hi) // 2
        if design.with_pools(mid, mid).clean_reads >= need:
            hi = mid
        else:
            lo = mid + 1
    return design.with_pools(lo, lo)


def search_pool_for(design: AuditDesign, p: float, power: float) -> AuditDesign:
    """The configured test pools, and the smallest search pool (at least 1) with which they reach the target."""
    need = reads_for_power(p, power)
    return replace(design, search_size=max(1, need - sum(design.read_limits)))


def betting_pool_certify(design: AuditDesign, p: float, *, draws: int, seed: int) -> tuple[float, float | None, bool]:
    """(P(betting common bound >= tau_c | p), its standard error (None when exact), exact?) for `make plan`:
    exact where every pool is enumerable, else Monte Carlo of each distinct pool size once (the generators are
    independent and alike), combined as (1 - p)^M_search prod_size q_size^k_size, k_size the pools of that
    size, with the delta-method standard error (relative: k se/q per size, sizes in quadrature)."""
    exact = betting_exact(design, [p])
    if exact is not None:
        return float(exact[0][0]), None, True
    rng = p_seed(seed, p)
    value, relative = (1.0 - p) ** design.search_size, 0.0
    for size in sorted(set(design.test_sizes)):
        pools = design.test_sizes.count(size)
        q, se = _share(_betting_blocks(rng.random((draws, size)) >= p, design) >= design.certify_tau)
        value *= q**pools
        relative += (pools * se / q) ** 2 if q > 0 else 0.0
    return value, value * math.sqrt(relative), False


# ------------------------------------------------------------------------------------ verdict stability
STABILITY_SCHEMA = {
    "dataset": pl.Utf8,
    "target": pl.Utf8,
    "pair_id": pl.Int64,
    "status": pl.Utf8,  # the run's status (records.parquet)
    "n_search": pl.Int64,  # paraphrases in the search pool
    "n_test": pl.Int64,  # paraphrases in the test pools, all generators
    "n_counterexamples": pl.Int64,  # paraphrases over epsilon (or NaN), all pools
    "epsilon": pl.Float64,  # the run's, held fixed
    "redraws": pl.Int64,
    "share_same": pl.Float64,  # share of redraws whose status is the run's
    "share_exact": pl.Float64,  # its limit over infinitely many redraws (`keep_probability`)
    "share_degraded": pl.Float64,  # share of redraws whose status is DEGRADED
    "stable": pl.Boolean,  # share_same > stable_share
    "stable_share": pl.Float64,
}


def audit_statuses(search: np.ndarray, tests: Sequence[np.ndarray], *, eta: float, tau: float | None) -> np.ndarray:
    """The paper's per-q_h status of each row, from its non-degraded flags: `search` (rows x M_search) and one
    (rows x M_j) matrix per test generator in order; run_audit's status, row by row."""
    rows = search.shape[0]
    stage1 = ~search.all(axis=1)
    if not tests:
        return np.where(stage1, stats.DEGRADED, stats.NOT_REACHED)
    needed = None if tau is None else stats.samples_to_certify(tau, eta)
    degraded = np.zeros(rows, dtype=bool)
    certified = np.ones(rows, dtype=bool)
    for pool in tests:
        limit = pool.shape[1] if needed is None else min(pool.shape[1], needed)
        degraded |= ~pool[:, :limit].all(axis=1)
        # sequential_test certifies once t reaches n_tau within the pool; a shorter pool exhausts its budget
        certified &= needed is not None and pool.shape[1] >= needed
    if needed is not None:  # combined_status also asks the common bound eta^(1/n_tau) to reach tau
        certified &= float(stats.lower_bound(needed, eta)) >= tau
    status = np.where(certified, stats.CERTIFIED, stats.BUDGET_EXHAUSTED)
    return np.where(stage1 | degraded, stats.DEGRADED, status)


def keep_probability(flags: Sequence[np.ndarray], status: str, *, eta: float, tau: float | None) -> float:
    """The probability that a bootstrap redraw keeps `status`, exactly: a redrawn pool of m paraphrases, k of
    them degraded, puts none among the l draws the paper's test reads (l = m for the search pool, min(m, n_tau)
    for a test pool) with ((m - k) / m)^l; whether a q_h without a counterexample is certified depends on the
    pool sizes alone, which a redraw keeps. `flags`: non-degraded flags, the search pool first."""
    needed = None if tau is None else stats.samples_to_certify(tau, eta)
    clean = 1.0
    for i, f in enumerate(flags):
        if f.size:
            reads = f.size if i == 0 or needed is None else min(f.size, needed)
            clean *= (f.sum() / f.size) ** reads
    return 1.0 - clean if status == stats.DEGRADED else clean


def _qh_rng(seed: int, dataset: str, target: str, pair_id: int) -> np.random.Generator:
    """One q_h's redraws: the same whatever else the run audited."""
    return np.random.default_rng([seed, zlib.crc32(f"{dataset}/{target}/{pair_id}".encode())])


def verdict_stability(
    deltas: pl.DataFrame,
    records: pl.DataFrame,
    *,
    test_pools: Sequence[str],
    eta: float,
    tau: float | None,
    redraws: int,
    seed: int,
    stable_share: float,
) -> pl.DataFrame:
    """Per audited q_h (records): the share of `redraws` bootstrap redraws of its pools (each pool resampled
    with replacement to its own size) under which its status is the run's. The status of the pools as drawn
    must be the run's: a mismatch says this model of the audit is not run_audit's, and stops the rule."""
    if redraws < 1:
        raise ValueError(f"audit.operating_characteristic.bootstrap_redraws: {redraws} must be >= 1")
    out = []
    pools = [SEARCH_POOL, *test_pools]
    by_qh = deltas.partition_by("dataset", "target", "pair_id", as_dict=True)
    empty = deltas.clear()
    for record in records.iter_rows(named=True):
        dataset, target, pair_id, epsilon = record["dataset"], record["target"], record["pair_id"], record["epsilon"]
        mine = by_qh.get((dataset, target, pair_id), empty)
        values = [mine.filter(pl.col("pool") == pool).sort("index")["delta"].to_numpy() for pool in pools]
        flags = [np.asarray(v, dtype=float) <= epsilon for v in values]  # NaN counts as degraded
        as_run = audit_statuses(flags[0][None, :], [f[None, :] for f in flags[1:]], eta=eta, tau=tau)[0]
        if as_run != record["status"]:
            raise ValueError(
                f"{dataset} {target} pair {pair_id}: the pools as scored give status {as_run}, the run "
                f"{record['status']}: the stability model and run_audit disagree"
            )
        rng = _qh_rng(seed, dataset, target, pair_id)
        redrawn = [
            f[rng.integers(0, f.size, size=(redraws, f.size))] if f.size else np.ones((redraws, 0), bool) for f in flags
        ]
        statuses = audit_statuses(redrawn[0], redrawn[1:], eta=eta, tau=tau)
        same = float(np.mean(statuses == as_run))
        out.append(
            {
                "dataset": dataset,
                "target": target,
                "pair_id": pair_id,
                "status": as_run,
                "n_search": int(flags[0].size),
                "n_test": int(sum(f.size for f in flags[1:])),
                "n_counterexamples": int(sum((~f).sum() for f in flags)),
                "epsilon": epsilon,
                "redraws": redraws,
                "share_same": same,
                "share_exact": keep_probability(flags, as_run, eta=eta, tau=tau),
                "share_degraded": float(np.mean(statuses == stats.DEGRADED)),
                "stable": same > stable_share,
                "stable_share": stable_share,
            }
        )
    return pl.DataFrame(out, schema=STABILITY_SCHEMA)


# ------------------------------------------------------------------------------------ the rule
@dataclass(frozen=True)
class CharacteristicSettings:
    """`audit.operating_characteristic` (config/README.md)."""

    p_grid: tuple[float, ...]
    monte_carlo_draws: int
    bootstrap_redraws: int
    seed: int
    stable_share: float
    certify_tau: float | None = None  # null: audit.tau
    target: Mapping[str, float] | None = None  # make plan only: {detectable_p, power}

    def __post_init__(self) -> None:
        object.__setattr__(self, "p_grid", tuple(float(p) for p in self.p_grid))
        _grid(self.p_grid)
        if not 0 <= self.stable_share < 1:
            raise ValueError(f"audit.operating_characteristic.stable_share: {self.stable_share} must lie in [0, 1)")


def run_designs(
    records: pl.DataFrame, generators: pl.DataFrame, design: AuditDesign, test_pools: Sequence[str]
) -> list[tuple[AuditDesign, int]]:
    """The designs of the audited q_h as run (their pools as scored), each with the number of q_h that have it.
    Pools belong to the pair, not the target: one target's q_h stand for all."""
    target = records["target"][0]
    mine = records.filter(pl.col("target") == target)
    sizes = generators.filter(pl.col("target") == target)
    counts: dict[tuple[int, tuple[int, ...]], int] = {}
    for row in mine.iter_rows(named=True):
        per_pool = dict(sizes.filter(pl.col("pair_id") == row["pair_id"]).select("generator", "pool_size").iter_rows())
        key = (row["n_search"], tuple(int(per_pool.get(pool, 0)) for pool in test_pools))
        counts[key] = counts.get(key, 0) + 1
    return [(replace(design, search_size=s, test_sizes=t), n) for (s, t), n in sorted(counts.items())]


def audit_power(
    *,
    deltas: str | Path,
    records: str | Path,
    generators: str | Path,
    characteristic_out: str | Path,
    stability_out: str | Path,
    design: AuditDesign,
    test_pools: Sequence[str],
    settings: CharacteristicSettings,
    labels: dict | None = None,
) -> None:
    """The operating characteristic of the configured audit and of this cell's audit as run, and the stability
    of every verdict of this cell."""
    s = settings
    rec = pl.read_parquet(records)
    gen = pl.read_parquet(generators)
    dlt = pl.read_parquet(deltas)
    if rec.is_empty():  # audit_statistics keeps every selected q_h, so this is a broken input, not a result
        raise ValueError(f"{records}: no audited q_h: nothing to characterise")
    dataset = rec["dataset"][0]
    frames = [
        characteristic(
            [(design, 1)], s.p_grid, draws=s.monte_carlo_draws, seed=s.seed, dataset=dataset, basis="configured"
        )
    ]
    as_run = run_designs(rec, gen, design, test_pools)
    frames.append(
        characteristic(as_run, s.p_grid, draws=s.monte_carlo_draws, seed=s.seed, dataset=dataset, basis="as run")
    )
    table = pl.concat(frames)
    stability = verdict_stability(
        dlt,
        rec,
        test_pools=test_pools,
        eta=design.eta,
        tau=design.tau,
        redraws=s.bootstrap_redraws,
        seed=s.seed,
        stable_share=s.stable_share,
    )
    write_parquet(with_labels(table, labels), labelled(CHARACTERISTIC_SCHEMA), characteristic_out)
    write_parquet(with_labels(stability, labels), labelled(STABILITY_SCHEMA), stability_out)
    detectable = detectable_p(design, DETECTABLE_POWER)
    log.info(
        "%s: configured pools %d + %s, N = %d draws read on a clean q_h: flagged with 80%% power from p = %s; "
        "certify_tau %g %s (clean common bound %.3f); as run: %d design(s) over %d q_h",
        dataset,
        design.search_size,
        " + ".join(map(str, design.test_sizes)) or "no test pool",
        design.clean_reads,
        "n/a" if detectable is None else f"{detectable:.4g}",
        design.certify_tau,
        "reachable" if design.certifiable else "NOT reachable",
        design.clean_bound,
        len(as_run),
        sum(n for _, n in as_run),
    )
    for (target,), rows in stability.group_by("target", maintain_order=True):
        log.info(
            "%s %s: %d of %d verdicts stable above %g (lowest share %.3f)",
            dataset,
            target,
            int(rows["stable"].sum()),
            rows.height,
            s.stable_share,
            float(rows["share_same"].min()),
        )
