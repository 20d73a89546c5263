"""ER-Audit statistics tested as statistics: exact small cases, Monte Carlo, properties."""

import math

import numpy as np
import pytest

from debate_audit.eraudit.audit.stats import (
    BUDGET_EXHAUSTED,
    CERTIFIED,
    DEGRADED,
    NOT_REACHED,
    betting_bets,
    betting_bounds,
    betting_final_bounds,
    combined_status,
    common_bound,
    degradation,
    epsilon_from_percentile,
    final_bounds,
    log_capital,
    lower_bound,
    samples_to_certify,
    sequential_test,
    tv_relaxed,
)


# ------------------------------------------------------------------ Delta
def test_delta_divides_the_q_h_loss_by_the_q_m_gain():
    # base 0.8 -> target 0.6 on q_h; q_m gain 0.9 - 0.5 = 0.4
    assert degradation(0.8, 0.6, p_base_m=0.5, p_target_m=0.9, kappa=0.001) == pytest.approx(0.2 / 0.4)


def test_delta_uses_kappa_when_the_target_did_not_gain_on_q_m():
    # q_m got worse (0.7 -> 0.6): the denominator is kappa, so a small loss counts heavily
    assert degradation(0.55, 0.5, p_base_m=0.7, p_target_m=0.6, kappa=0.001) == pytest.approx(0.05 / 0.001)
    # a gain below kappa is floored too
    assert degradation(0.5, 0.4, p_base_m=0.5, p_target_m=0.5005, kappa=0.01) == pytest.approx(0.1 / 0.01)


def test_delta_is_negative_when_the_target_improves_on_q_h():
    assert degradation(0.3, 0.7, p_base_m=0.2, p_target_m=0.6, kappa=0.001) == pytest.approx(-1.0)


def test_delta_vectorises_over_paraphrases():
    out = degradation(np.array([0.9, 0.5]), np.array([0.7, 0.5]), p_base_m=0.4, p_target_m=0.6, kappa=0.001)
    np.testing.assert_allclose(out, [1.0, 0.0])


def test_delta_rejects_non_positive_kappa():
    with pytest.raises(ValueError, match="kappa"):
        degradation(0.5, 0.5, 0.5, 0.5, kappa=0.0)


# ------------------------------------------------------------------ bound and stopping rule
def test_bound_after_t_non_degraded_is_eta_to_the_one_over_t():
    assert lower_bound(1, 0.05) == pytest.approx(0.05)
    assert lower_bound(2, 0.25) == pytest.approx(0.5)
    assert lower_bound(3, 0.125) == pytest.approx(0.5)
    assert lower_bound(0, 0.05) == 0.0


def test_sample_size_formula():
    assert samples_to_certify(0.9, 0.05) == 29  # log .05 / log .9 = 28.43
    assert 0.9**29 <= 0.05 < 0.9**28
    assert samples_to_certify(0.5, 0.25) == 2  # exactly 2: no rounding up to 3
    assert samples_to_certify(0.99, 0.01) == math.ceil(math.log(0.01) / math.log(0.99))
    for tau, eta in [(0.8, 0.1), (0.95, 0.001), (0.5, 0.2)]:
        n = samples_to_certify(tau, eta)
        assert lower_bound(n, eta) >= tau > lower_bound(n - 1, eta)


def test_counterexample_sets_bound_to_zero_and_stops():
    result = sequential_test([0.1, 0.2, 0.9, 0.0, 0.0], epsilon=0.5, eta=0.25)
    assert result.status == DEGRADED
    assert result.t == 3
    assert result.lower_bound == 0.0
    assert result.counterexample_index == 2
    assert result.bounds == pytest.approx((0.25, 0.5, 0.0))


def test_delta_equal_to_epsilon_is_not_a_counterexample():
    assert sequential_test([0.5], epsilon=0.5, eta=0.1).status == BUDGET_EXHAUSTED


def test_nan_delta_counts_as_degraded():
    assert sequential_test([0.0, float("nan")], epsilon=0.5, eta=0.1).status == DEGRADED


def test_stops_early_once_tau_is_certified():
    # eta = 0.25, tau = 0.5 -> 2 samples suffice; the counterexample at position 3 is never seen
    result = sequential_test([0.0, 0.0, 9.0], epsilon=0.5, eta=0.25, tau=0.5)
    assert (result.status, result.t, result.lower_bound) == (CERTIFIED, 2, pytest.approx(0.5))


def test_budget_exhausted_without_tau():
    result = sequential_test([0.0] * 4, epsilon=0.5, eta=0.0625)
    assert (result.status, result.t) == (BUDGET_EXHAUSTED, 4)
    assert result.lower_bound == pytest.approx(0.5)


def test_empty_pool_gives_no_bound():
    result = sequential_test([], epsilon=0.5, eta=0.1)
    assert (result.status, result.t, result.lower_bound) == (BUDGET_EXHAUSTED, 0, 0.0)


def test_vectorised_bounds_match_the_scalar_test():
    rng = np.random.default_rng(0)
    nd = rng.random((200, 7)) < 0.85
    for tau in (None, 0.6):
        bound, t = final_bounds(nd, eta=0.1, tau=tau)
        for row in range(nd.shape[0]):
            deltas = np.where(nd[row], 0.0, 1.0)
            ref = sequential_test(deltas, epsilon=0.5, eta=0.1, tau=tau)
            assert bound[row] == pytest.approx(ref.lower_bound)
            assert t[row] == ref.t


# ------------------------------------------------------------------ validity (Monte Carlo)
@pytest.mark.parametrize(
    ("pi", "eta", "tau"),
    [(0.9, 0.05, 0.9), (0.8, 0.1, 0.9), (0.95, 0.2, 0.95), (0.5, 0.3, 0.6), (0.97, 0.01, None)],
)
def test_bound_exceeds_the_true_rate_with_probability_at_most_eta(pi, eta, tau):
    rng = np.random.default_rng(1234)
    streams, budget = 40_000, 150
    nd = rng.random((streams, budget)) < pi
    bound, _ = final_bounds(nd, eta=eta, tau=tau)
    rate = float(np.mean(bound > pi))
    mc_error = 3 * math.sqrt(eta * (1 - eta) / streams)
    assert rate <= eta + mc_error
    # also anytime: the running bound along the whole stream, not only where the test stopped
    run = np.where(nd.all(axis=1), budget, np.argmin(nd, axis=1))
    ever_above = lower_bound(np.maximum(run, 0), eta) > pi
    assert float(np.mean(ever_above & (run > 0))) <= eta + mc_error


def test_bound_is_not_trivially_conservative():
    # pi just above the certification threshold: most streams certify, so the test has power
    rng = np.random.default_rng(7)
    nd = rng.random((20_000, 100)) < 0.999
    bound, _ = final_bounds(nd, eta=0.05, tau=0.9)
    assert np.mean(bound >= 0.9) > 0.9


# ------------------------------------------------------------------ combining generators
def test_common_bound_is_the_minimum_over_generators():
    a = sequential_test([0.0] * 4, epsilon=0.5, eta=0.0625)  # 0.5
    b = sequential_test([0.0] * 2, epsilon=0.5, eta=0.0625)  # 0.25
    assert common_bound([a.lower_bound, b.lower_bound]) == pytest.approx(0.25)
    c = sequential_test([0.0, 1.0], epsilon=0.5, eta=0.0625)
    assert common_bound([a.lower_bound, b.lower_bound, c.lower_bound]) == 0.0
    assert common_bound([]) == 0.0


def test_combined_status():
    assert combined_status([CERTIFIED, CERTIFIED], 0.95, tau=0.9) == CERTIFIED
    assert combined_status([CERTIFIED, BUDGET_EXHAUSTED], 0.5, tau=0.9) == BUDGET_EXHAUSTED
    assert combined_status([CERTIFIED, DEGRADED], 0.0, tau=0.9) == DEGRADED
    assert combined_status([NOT_REACHED, NOT_REACHED], 0.0, tau=0.9) == NOT_REACHED


def test_tv_relaxation_subtracts_r_and_floors_at_zero():
    assert tv_relaxed(0.9, 0.1) == pytest.approx(0.8)
    assert tv_relaxed(0.05, 0.1) == 0.0
    with pytest.raises(ValueError):
        tv_relaxed(0.5, -0.1)


def test_epsilon_percentile_ignores_nan():
    assert epsilon_from_percentile([0.0, 1.0, float("nan"), 2.0, 3.0, 4.0], 50) == pytest.approx(2.0)
    assert epsilon_from_percentile([1.0, 3.0], 25) == pytest.approx(1.5)
    with pytest.raises(ValueError):
        epsilon_from_percentile([float("nan")], 50)


# ------------------------------------------------------------------ betting confidence sequence
def _clean_stream(t):
    return np.ones(t, dtype=bool)


def test_hedged_capital_on_a_small_stream_by_hand():
    d = np.array([1, 0, 1], dtype=bool)
    # lam_1 from s2_0 = 1/4; mu_1 = 3/4, s2_1 = (1/4 + 1/16) / 2; mu_2 = 1/2, s2_2 = (1/4 + 1/16 + 1/4) / 3
    lam = [
        math.sqrt(2 * math.log(20) / (s2 * t * math.log(1 + t))) for t, s2 in ((1, 0.25), (2, 0.15625), (3, 0.5625 / 3))
    ]
    np.testing.assert_allclose(betting_bets(d, 0.05), lam)
    np.testing.assert_allclose(lam, [5.880, 4.178, 2.772], atol=5e-4)
    # m = 1/2, c = 1/2: every bet is truncated at c/m = 1, so K = 1.5 * 0.5 * 1.5
    hedged = np.exp(log_capital(d, 0.5, 0.05, c=0.5, w=0.0))
    np.testing.assert_allclose(hedged, [1.5, 0.75, 1.125])
    # the mixture adds w * prod(D_i / m): 2 after the first draw, 0 from the failure on
    np.testing.assert_allclose(np.exp(log_capital(d, 0.5, 0.05, c=0.5, w=0.5)), [1.75, 0.375, 0.5625])


def test_one_clean_draw_certifies_nothing_by_hedging_alone():
    lam1 = math.sqrt(2 * math.log(20) / (0.25 * math.log(2)))
    # K_1(m) rises to 1 + lam_1 = 6.88 as m -> 0, short of 1/eta = 20: nothing is rejected
    assert math.exp(log_capital([True], 1e-9, 0.05, w=0.0)[0]) == pytest.approx(1 + lam1, rel=1e-6)
    assert 1 + lam1 == pytest.approx(6.88, abs=5e-3)
    assert betting_bounds([True], 0.05, w=0.0)[0] == 0.0
    # with the paper's bet at w = 1/2: 0.5 / m + 0.5 (1 + lam_1 (1 - m)) = 20 (lam_1 < c / m there)
    a, b, k = 0.5 * lam1, 20 - 0.5 - 0.5 * lam1, 0.5  # a m^2 + b m - k = 0
    root = (-b + math.sqrt(b * b + 4 * a * k)) / (2 * a)
    assert lam1 < 0.75 / root
    bound = betting_bounds([True], 0.05)[0]
    assert root - 1e-10 <= bound <= root
    assert bound == pytest.approx(0.030, abs=5e-4)


def test_without_failures_the_bound_stays_near_the_paper_and_never_above_it():
    bounds = betting_bounds(_clean_stream(100), 0.05)
    assert bounds[9] == pytest.approx(0.719, abs=5e-4)  # paper: 0.741
    assert bounds[99] == pytest.approx(0.967, abs=5e-4)  # paper: 0.970
    t = np.arange(1, 101)
    # nothing valid beats eta^(1/t) after t clean draws (the one-sided Clopper-Pearson bound) ...
    assert np.all(bounds <= lower_bound(t, 0.05))
    # ... and the paper's half of the stake alone certifies (w eta)^(1/t)
    assert np.all(bounds >= np.power(0.5 * 0.05, 1 / t) - 1e-10)
    # 32 clean draws certify 0.9 (the paper's test: 29)
    assert bounds[30] < 0.9 <= bounds[31]
    assert samples_to_certify(0.9, 0.05) == 29


def test_w_one_is_the_paper_bound_and_a_failure_keeps_the_betting_bound_alive():
    d = np.array([True] * 20 + [False] + [True] * 30)
    paper_only = betting_bounds(d[:20], 0.05, w=1.0)
    np.testing.assert_allclose(paper_only, lower_bound(np.arange(1, 21), 0.05), atol=1e-9)
    bounds = betting_bounds(d, 0.05)
    assert bounds[19] > 0.8 and bounds[20] == bounds[19]  # the running maximum keeps what was certified
    assert bounds[-1] > bounds[20]  # and clean draws after the failure raise it further


def test_capital_falls_as_the_candidate_rate_rises():
    rng = np.random.default_rng(3)
    grid = np.linspace(1e-4, 1.0, 400)[:, None]
    for pi in (0.3, 0.8, 0.97):
        d = rng.random(60) < pi
        for c, w in ((0.75, 0.5), (0.5, 0.0), (0.9, 0.2)):
            logm = log_capital(np.broadcast_to(d, (grid.size, d.size)), grid, 0.05, c, w)
            assert np.all(np.diff(logm, axis=0) <= 1e-12), (pi, c, w)


def test_bisection_agrees_with_a_grid_search():
    rng = np.random.default_rng(5)
    grid = np.arange(1, 2048) / 2048  # m = 0 and m = 1: never in the answer's way (0 by convention, 1 never rejected)
    for pi, t in ((0.9, 40), (0.6, 25), (0.99, 80), (1.0, 12)):
        d = rng.random((8, t)) < pi
        bisected = betting_final_bounds(d, 0.1)
        for row, bound in zip(d, bisected):
            peak = log_capital(np.broadcast_to(row, (grid.size, t)), grid[:, None], 0.1).max(axis=1)
            rejected = grid[peak >= math.log(10)]
            on_grid = rejected.max() if rejected.size else 0.0
            assert on_grid <= bound + 1e-10 and bound <= on_grid + 1 / 2048


def test_running_bound_never_decreases_and_the_vectorised_form_matches():
    rng = np.random.default_rng(9)
    d = rng.random((30, 50)) < 0.85
    finals = betting_final_bounds(d, 0.05)
    for row, final in zip(d, finals):
        bounds = betting_bounds(row, 0.05)
        assert np.all(np.diff(bounds) >= 0)
        assert bounds[-1] == final


def test_betting_settings_are_checked():
    with pytest.raises(ValueError, match="truncation c"):
        log_capital([True], 0.5, 0.05, c=1.0)
    with pytest.raises(ValueError, match="weight w"):
        betting_bounds([True], 0.05, w=1.5)
    assert betting_bounds([], 0.05).size == 0
    assert betting_final_bounds(np.zeros((3, 0), dtype=bool), 0.05).tolist() == [0.0, 0.0, 0.0]


@pytest.mark.parametrize("eta", [0.05, 0.1])
@pytest.mark.parametrize("pi", [0.8, 0.95, 0.99])
def test_betting_bound_is_time_uniformly_valid(pi, eta):
    # P(exists t <= T: L*_t > pi) <= eta. L*_t > pi only if M_s(pi) >= 1/eta for some s <= t (M falls in m),
    # so the event costs one capital path per stream at m = pi.
    rng = np.random.default_rng(int(pi * 1000) + int(eta * 100))
    streams, horizons = 20_000, (100, 500)
    crossed = {h: 0 for h in horizons}
    for _ in range(4):  # 5,000 streams at a time: ~20 MB per array
        d = rng.random((streams // 4, max(horizons))) < pi
        running = np.maximum.accumulate(log_capital(d, pi, eta), axis=1)
        for h in horizons:
            crossed[h] += int(np.sum(running[:, h - 1] >= math.log(1 / eta)))
    limit = eta + 3 * math.sqrt(eta * (1 - eta) / streams)
    for h in horizons:
        assert crossed[h] / streams <= limit, (h, crossed[h] / streams)


def test_betting_bound_is_useful_after_failures_where_the_paper_gives_0():
    rng = np.random.default_rng(11)
    pi, eta = 0.95, 0.05
    d = rng.random((5_000, 100)) < pi
    bounds = betting_final_bounds(d, eta)
    assert bounds.mean() >= 0.84 and bounds.min() > 0
    paper, _ = final_bounds(d, eta)
    assert np.mean(paper == 0) > 0.99  # 1 - 0.95^100
    # the bisected bound is valid too (it crosses pi only where the capital at pi crossed 1/eta)
    assert np.mean(bounds > pi) <= eta + 3 * math.sqrt(eta * (1 - eta) / d.shape[0])
    crossed = np.max(log_capital(d, pi, eta), axis=1) >= math.log(1 / eta)
    assert np.all(crossed[bounds > pi])
    assert np.all(bounds[crossed] >= pi - 1e-10)
