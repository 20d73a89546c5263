"""The audit's operating characteristic and verdict stability, tested as statistics: closed forms against the
audit's own procedure by Monte Carlo, exact small cases by hand and by enumeration, coverage, and the
bootstrap on planted stable and unstable verdicts."""

import itertools
import math

import numpy as np
import polars as pl
import pytest

from debate_audit.eraudit.audit import power, stats, verdicts
from debate_audit.eraudit.audit.power import AuditDesign


def within(mc, se, exact, sigmas=4.0):
    """A Monte Carlo share agrees with its exact value: within `sigmas` standard errors (a floor for shares
    whose standard error is 0 because every draw agreed)."""
    return abs(mc - exact) <= sigmas * se + 1e-3


# ------------------------------------------------------------------ closed forms against Monte Carlo
DESIGNS = {
    # the default's shape: tau out of reach of 4 test paraphrases
    "default": AuditDesign(6, (4, 4), eta=0.05, tau=0.9, certify_tau=0.9),
    # tau reachable within the pools: the paper's test stops at n_tau = 2, the betting bound reads all 5
    "tau stops the test": AuditDesign(3, (5, 5), eta=0.25, tau=0.5, certify_tau=0.5),
    # no tau, unequal pools, the later generator reached only without a counterexample before it
    "whole pools": AuditDesign(2, (3, 6), eta=0.2, tau=None, certify_tau=0.5),
    "whole pools, every pool read": AuditDesign(
        2, (3, 6), eta=0.2, tau=None, certify_tau=0.5, stop_at_first_counterexample=False
    ),
}


@pytest.mark.parametrize("name", DESIGNS)
def test_closed_forms_agree_with_the_monte_carlo_of_the_audit_procedure(name):
    design = DESIGNS[name]
    table = power.characteristic(
        [(design, 1)], [0.0, 0.02, 0.1, 0.3, 1.0], draws=6000, seed=1, dataset="d", basis="configured"
    )
    for row in table.iter_rows(named=True):
        for quantity in ("p_flag", "p_certify_paper", "p_certify_betting", "coverage_paper", "coverage_betting"):
            assert row[quantity] is not None  # every pool here is enumerable
            assert within(row[f"{quantity}_mc"], row[f"{quantity}_se"], row[quantity]), (name, row["p"], quantity)
    # p = 0 and p = 1 are certain: never flagged, always flagged
    assert table["p_flag_mc"][0] == 0.0 and table["p_flag_mc"][-1] == 1.0


def test_the_stopping_rule_changes_the_paraphrases_read_not_the_verdict():
    stop, every = DESIGNS["whole pools"], DESIGNS["whole pools, every pool read"]
    rng = [np.random.default_rng(5) for _ in range(2)]
    a, b = power.simulate(stop, 0.2, 4000, rng[0]), power.simulate(every, 0.2, 4000, rng[1])
    np.testing.assert_array_equal(a.flagged, b.flagged)
    np.testing.assert_array_equal(a.paper, b.paper)
    np.testing.assert_array_equal(a.betting, b.betting)  # the betting bound reads every pool either way
    assert a.n_tested.mean() < b.n_tested.mean()
    assert (a.n_tested <= b.n_tested).all()


def test_a_mixture_of_designs_averages_the_closed_forms_by_q_h():
    small, large = AuditDesign(1, (1,), 0.25, None, 0.2), AuditDesign(4, (4,), 0.25, None, 0.2)
    table = power.characteristic([(small, 3), (large, 1)], [0.2], draws=8000, seed=0, dataset="d", basis="as run")
    row = table.row(0, named=True)
    assert row["p_flag"] == pytest.approx(0.75 * (1 - 0.8**2) + 0.25 * (1 - 0.8**8))
    assert within(row["p_flag_mc"], row["p_flag_se"], row["p_flag"])
    assert row["n_qh"] == 4 and row["search_size"] == pytest.approx(1.75)
    # the mixture's 80% point lies between its designs'
    p80 = row["detectable_p"]
    assert power.detectable_p(large, 0.8) < p80 < power.detectable_p(small, 0.8)
    flagged = 0.75 * power.flag_probability(small, p80)[0] + 0.25 * power.flag_probability(large, p80)[0]
    assert flagged == pytest.approx(0.8, abs=1e-9)


# ------------------------------------------------------------------ exact small cases
def test_exact_small_cases_by_hand():
    # 1 search + 2 test paraphrases, no tau: flagged unless all 3 are clean; eta^(1/2) = 0.5 certifies 0.5
    design = AuditDesign(1, (2,), eta=0.25, tau=None, certify_tau=0.5)
    assert design.clean_reads == 3 and design.clean_bound == pytest.approx(0.5)
    assert power.flag_probability(design, 0.5)[0] == pytest.approx(7 / 8)
    assert power.paper_certify_probability(design, 0.5)[0] == pytest.approx(1 / 8)
    # coverage of 1 - p: the clean bound 0.5 exceeds 1 - p only for p > 0.5, and then (1 - p)^3 <= 1/8 < eta
    assert power.paper_coverage(design, [0.4, 0.6]) == pytest.approx([1.0, 1 - 0.4**3])
    # tau 0.5 at eta 0.25 needs 2 draws: the test reads 2 of each 5-paraphrase pool, 4 in all
    stopped = AuditDesign(0, (5, 5), eta=0.25, tau=0.5, certify_tau=0.5)
    assert stopped.read_limits == (2, 2)
    assert power.flag_probability(stopped, 0.5)[0] == pytest.approx(15 / 16)
    assert power.paper_certify_probability(stopped, 0.5)[0] == pytest.approx(1 / 16)
    # one test paraphrase: the bound eta = 0.25 never reaches 0.5
    short = AuditDesign(0, (1,), eta=0.25, tau=0.5, certify_tau=0.5)
    assert not short.certifiable
    assert power.paper_certify_probability(short, [0.0, 0.3]).tolist() == [0.0, 0.0]
    # no test generator: nothing to certify, the search pool alone flags
    search_only = AuditDesign(5, (), eta=0.05, tau=None, certify_tau=0.9)
    assert search_only.clean_bound == 0.0
    assert power.flag_probability(search_only, 0.1)[0] == pytest.approx(1 - 0.9**5)


def test_the_betting_enumeration_matches_the_step_by_step_bound_of_every_stream():
    design = AuditDesign(2, (3, 2), eta=0.2, tau=None, certify_tau=0.3)
    p = 0.25
    per_pool = []
    for size in design.test_sizes:
        reach = cover = 0.0
        for stream in itertools.product([True, False], repeat=size):
            chance = math.prod(1 - p if d else p for d in stream)
            bound = stats.betting_bounds(np.array(stream), design.eta)[-1]  # the per-step path, not the vectorised one
            reach += chance * (bound >= design.certify_tau)
            cover += chance * (bound > 1 - p)
        per_pool.append((reach, cover))
    certify, coverage = power.betting_exact(design, [p])
    clean_search = (1 - p) ** 2
    assert certify[0] == pytest.approx(clean_search * per_pool[0][0] * per_pool[1][0])
    assert coverage[0] == pytest.approx(1 - clean_search * per_pool[0][1] * per_pool[1][1])
    assert 0 < certify[0] < 1
    assert power.betting_exact(AuditDesign(0, (power.EXACT_POOL + 1,), 0.05, None, 0.9), [0.1]) is None


# ------------------------------------------------------------------ coverage by Monte Carlo
@pytest.mark.parametrize(
    "design",
    [
        # the paper's bound at its edge: 0.2^(1/10) = 0.851 just above 1 - p = 0.85: miscoverage 0.85^10 = 0.197
        AuditDesign(0, (10,), eta=0.2, tau=None, certify_tau=0.5),
        # stopped at tau: n_tau = 3 draws, bound 0.2^(1/3) = 0.585 against 1 - p = 0.55 at p = 0.45
        AuditDesign(0, (10,), eta=0.2, tau=0.5, certify_tau=0.5),
        # two generators, the common bound (0.1^(1/8) = 0.750 against 1 - p = 0.74)
        AuditDesign(0, (8, 8), eta=0.1, tau=None, certify_tau=0.5),
        # larger pools than the enumeration takes: the betting bound by Monte Carlo only
        AuditDesign(0, (30,), eta=0.1, tau=None, certify_tau=0.5),
    ],
)
def test_both_bounds_cover_the_true_non_degradation_rate_with_probability_at_least_1_minus_eta(design):
    grid = [0.01, 0.03, 0.05, 0.075, 0.1, 0.15, 0.26, 0.45]
    table = power.characteristic([(design, 1)], grid, draws=4000, seed=3, dataset="d", basis="configured")
    for row in table.iter_rows(named=True):
        for bound in ("paper", "betting"):
            assert row[f"coverage_{bound}_mc"] >= 1 - design.eta - 3 * row[f"coverage_{bound}_se"], (bound, row["p"])
            if row[f"coverage_{bound}"] is not None:
                assert row[f"coverage_{bound}"] >= 1 - design.eta - 1e-12
                assert within(row[f"coverage_{bound}_mc"], row[f"coverage_{bound}_se"], row[f"coverage_{bound}"])
    # with one generator, somewhere on the grid the paper's bound misses 1 - p nearly as often as eta allows,
    # so the check can fail (the common bound of two needs both pools clean: far rarer)
    if len(design.test_sizes) == 1:
        assert table["coverage_paper_mc"].min() < 1 - design.eta / 2


# ------------------------------------------------------------------ planning
def test_reads_and_pools_for_a_target():
    assert power.reads_for_power(0.05, 0.8) == 32  # 0.95^31 = 0.204 > 0.2 >= 0.95^32 = 0.194
    default = DESIGNS["default"]
    p80 = power.detectable_p(default, 0.8)
    assert p80 == pytest.approx(1 - 0.2 ** (1 / 14))
    assert power.flag_probability(default, p80)[0] == pytest.approx(0.8)
    assert power.mixture_detectable_p([(default, 1)], 0.8) == pytest.approx(p80, abs=1e-9)
    # equal pools: M + 2 min(M, 29) >= 32 -> M = 11 (10 reads 30)
    equal = power.equal_pools_for(default, 0.05, 0.8)
    assert (equal.search_size, equal.test_sizes) == (11, (11, 11))
    # beyond n_tau = 29 a test pool adds nothing the paper's test reads: 1609 reads need M = 1551
    need = power.reads_for_power(0.001, 0.8)
    tiny = power.equal_pools_for(default, 0.001, 0.8)
    assert tiny.clean_reads >= need > default.with_pools(tiny.search_size - 1, tiny.search_size - 1).clean_reads
    assert tiny.search_size == need - 2 * 29
    larger = power.search_pool_for(default, 0.05, 0.8)
    assert (larger.search_size, larger.test_sizes) == (32 - 8, (4, 4))
    assert power.detectable_p(AuditDesign(0, (), 0.05, None, 0.9), 0.8) is None


def test_the_betting_certification_for_the_plan_is_exact_when_enumerable_and_close_by_monte_carlo():
    small = AuditDesign(2, (4, 4), eta=0.2, tau=None, certify_tau=0.3)
    value, se, exact = power.betting_pool_certify(small, 0.1, draws=100, seed=0)
    assert exact and se is None and value == pytest.approx(power.betting_exact(small, [0.1])[0][0])
    # the same pools by Monte Carlo (EXACT_POOL lowered), within 4 standard errors
    large = AuditDesign(2, (4, 4, 5), eta=0.2, tau=None, certify_tau=0.3)
    truth = power.betting_exact(large, [0.1])[0][0]
    old, power.EXACT_POOL = power.EXACT_POOL, 3
    try:
        value, se, exact = power.betting_pool_certify(large, 0.1, draws=20000, seed=0)
    finally:
        power.EXACT_POOL = old
    assert not exact and within(value, se, truth)


# ------------------------------------------------------------------ verdict stability
def _deltas(pools_by_pair, target="org", dataset="d"):
    """A deltas frame ({pair_id: {pool: [Delta, ...]}}) with each pair's q_h."""
    rows = []
    for pair_id, pools in pools_by_pair.items():
        rows.append({"pair_id": pair_id, "kind": "q_h", "pool": None, "index": None, "delta": 0.0})
        for pool, values in pools.items():
            rows += [
                {"pair_id": pair_id, "kind": "paraphrase", "pool": pool, "index": i, "delta": v}
                for i, v in enumerate(values)
            ]
    frame = pl.DataFrame(rows, schema_overrides={"index": pl.Int64, "pool": pl.Utf8, "delta": pl.Float64})
    return frame.with_columns(
        pl.lit(dataset).alias("dataset"),
        pl.lit(target).alias("target"),
        pl.format("q{}", pl.col("pair_id")).alias("question"),
        pl.lit(0.5).alias("p_base"),
        pl.lit(0.5).alias("p_target"),
        pl.lit(0.5).alias("p_base_m"),
        pl.lit(0.5).alias("p_target_m"),
        pl.lit(1.0).alias("gain"),
        pl.lit(False).alias("bounded"),
    ).select(list(verdicts.DELTA_SCHEMA))


PLANTED = {
    1: {"search": [2, 2, 2, 0, 0, 0], "g1": [0] * 4, "g2": [0] * 4},  # 3 of 6 over: flagged, stable
    2: {"search": [0, 0, 0, 0, 0, 2], "g1": [0] * 4, "g2": [0] * 4},  # 1 of 6 over: flagged, unstable
    3: {"search": [0] * 6, "g1": [0] * 4, "g2": [0] * 4},  # clean: certified, stable
    4: {"search": [0] * 6, "g1": [0, 0, 0, 0, 2], "g2": [0] * 5},  # certified at n_tau = 2, a counterexample later
    5: {"search": [], "g1": [float("nan")], "g2": []},  # empty search pool, a NaN test score: degraded
}


def test_stability_of_planted_stable_and_unstable_verdicts():
    deltas = _deltas(PLANTED)
    pools = ["g1", "g2"]
    # eta 0.25, tau 0.5: the paper's test certifies after 2 clean draws per generator
    records, _, _ = verdicts.run_audit(deltas, test_pools=pools, epsilon=1.0, eta=0.25, tau=0.5, tv_r=0.0)
    table = power.verdict_stability(
        deltas, records, test_pools=pools, eta=0.25, tau=0.5, redraws=4000, seed=0, stable_share=0.9
    )
    rows = {r["pair_id"]: r for r in table.iter_rows(named=True)}
    assert {k: r["status"] for k, r in rows.items()} == {
        1: stats.DEGRADED,
        2: stats.DEGRADED,
        3: stats.CERTIFIED,
        4: stats.CERTIFIED,  # its counterexample lies after the 2 draws the test reads
        5: stats.DEGRADED,
    }
    # exact redraw probabilities: a resampled pool of m keeps none of k bad paraphrases with ((m - k) / m)^m
    expected = {
        1: 1 - (3 / 6) ** 6,  # 0.984
        2: 1 - (5 / 6) ** 6,  # 0.665
        3: 1.0,
        4: (4 / 5) ** 2,  # the first 2 of the 5 resampled g1 paraphrases must be clean: 0.64
        5: 1.0,
    }
    for pair_id, share in expected.items():
        se = math.sqrt(share * (1 - share) / 4000)
        assert within(rows[pair_id]["share_same"], se, share), pair_id
        assert rows[pair_id]["share_exact"] == pytest.approx(share), pair_id
    assert [rows[k]["stable"] for k in sorted(rows)] == [True, False, True, False, True]

    # the same seed gives the same redraws; another seed other ones
    def shares(seed):
        return power.verdict_stability(
            deltas, records, test_pools=pools, eta=0.25, tau=0.5, redraws=4000, seed=seed, stable_share=0.9
        )["share_same"].to_list()

    assert shares(0) == table["share_same"].to_list() != shares(1)


def test_statuses_match_run_audit_on_random_pools_and_a_mismatch_stops_the_rule():
    rng = np.random.default_rng(0)
    pools = ["g1", "g2", "g3"]
    for tau, stop in [(None, True), (0.5, True), (0.5, False), (0.8, True)]:
        planted = {}
        for pair_id in range(40):
            planted[pair_id] = {
                pool: [
                    float("nan") if rng.random() < 0.02 else float(rng.random() < 0.08) * 2
                    for _ in range(int(rng.integers(0, 7)))
                ]
                for pool in ["search", *pools]
            }
        deltas = _deltas(planted)
        records, _, _ = verdicts.run_audit(
            deltas, test_pools=pools, epsilon=1.0, eta=0.25, tau=tau, tv_r=0.0, stop_at_first_counterexample=stop
        )
        # verdict_stability checks every q_h's status as drawn against the run's and raises on a mismatch
        table = power.verdict_stability(
            deltas, records, test_pools=pools, eta=0.25, tau=tau, redraws=50, seed=1, stable_share=0.9
        )
        assert table["status"].to_list() == records["status"].to_list()
        assert len(set(table["status"])) >= 2
        # the exact share and the redraws' agree (50 redraws: 4 standard errors of a share near 1/2 is 0.28)
        gap = (table["share_same"] - table["share_exact"]).abs()
        assert (gap <= 4 * (table["share_exact"] * (1 - table["share_exact"]) / 50).sqrt() + 1e-9).all()
    tampered = records.with_columns(pl.lit(stats.CERTIFIED).alias("status"))
    with pytest.raises(ValueError, match="the stability model and run_audit disagree"):
        power.verdict_stability(
            deltas, tampered, test_pools=pools, eta=0.25, tau=0.8, redraws=5, seed=0, stable_share=0.9
        )


def test_run_designs_count_the_pools_as_scored():
    deltas = _deltas({1: {"search": [0] * 3, "g1": [0] * 2}, 2: {"search": [0] * 3, "g1": [0] * 2}, 3: {"g1": [0]}})
    records, generators, _ = verdicts.run_audit(deltas, test_pools=["g1"], epsilon=1.0, eta=0.25, tau=None, tv_r=0.0)
    design = AuditDesign(3, (2,), eta=0.25, tau=None, certify_tau=0.5)
    found = power.run_designs(records, generators, design, ["g1"])
    assert [(d.search_size, d.test_sizes, n) for d, n in found] == [(0, (1,), 1), (3, (2,), 2)]


# ------------------------------------------------------------------ configuration
def test_the_settings_are_checked_naming_the_key(monkeypatch):
    from pathlib import Path

    import yaml

    from debate_audit.tools.config_check import config_errors

    repo = Path(__file__).resolve().parents[3]
    monkeypatch.chdir(repo)  # dataset paths are relative to the project

    def errors(**changes):
        config = yaml.safe_load((repo / "config/config.yaml").read_text())
        for key, value in changes.items():
            *parents, last = key.split(".")
            node = config["audit"]
            for part in parents:
                node = node[part]
            node[last] = value
        return config_errors(config, repo / "config/schema.yaml")

    assert errors() == []
    # no level to read certification at: neither audit.tau nor certify_tau
    assert any(
        e.startswith("audit.operating_characteristic.certify_tau: null while audit.tau is null")
        for e in errors(tau=None)
    )
    assert errors(**{"tau": None, "operating_characteristic.certify_tau": 0.9}) == []
    for key, value, message in (
        ("operating_characteristic.p_grid", [0.1, 1.5], "audit.operating_characteristic.p_grid.1: 1.5 is greater than"),
        (
            "operating_characteristic.monte_carlo_draws",
            0,
            "audit.operating_characteristic.monte_carlo_draws: 0 is less",
        ),
        (
            "operating_characteristic.target",
            {"detectable_p": 0.05, "power": 1.0},
            "audit.operating_characteristic.target.power",
        ),
        ("operating_characteristic.stable_share", 1.0, "audit.operating_characteristic.stable_share"),
        ("operating_characteristic.seeds", 1, "audit.operating_characteristic: Additional properties"),
    ):
        found = errors(**{key: value})
        assert any(e.startswith(message) for e in found), (key, found)


def test_the_design_follows_the_config():
    from pathlib import Path

    import yaml

    repo = Path(__file__).resolve().parents[3]
    config = yaml.safe_load((repo / "config/config.yaml").read_text())
    design = power.design_from_config(config)
    par, aud = config["paraphrase"], config["audit"]
    assert design.search_size == par["search"]["size"]
    assert design.test_sizes == (par["test"]["size"],) * len(par["test"]["generators"])
    assert (design.eta, design.tau, design.certify_tau) == (aud["eta"], aud["tau"], aud["tau"])
    config["audit"]["operating_characteristic"]["certify_tau"] = 0.8
    assert power.design_from_config(config).certify_tau == 0.8
    config["audit"]["tau"] = config["audit"]["operating_characteristic"]["certify_tau"] = None
    with pytest.raises(ValueError, match="audit.operating_characteristic.certify_tau"):
        power.design_from_config(config)
