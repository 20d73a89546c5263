"""ER-Audit statistics tested as statistics: exact small cases, Monte Carlo, properties."""

import math

import numpy as np
import pytest

from debate_audit.eraudit.stats import (
    BUDGET_EXHAUSTED,
    CERTIFIED,
    DEGRADED,
    NOT_REACHED,
    combined_status,
    common_bound,
    degradation,
    epsilon_from_percentile,
    final_bounds,
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
