"""The audit's statistics stages on hand-built scores: Delta, Stage 1, Stage 2, statuses, sweeps."""

import polars as pl
import pytest
from conftest import REPO

from debate_audit.eraudit.audit import scoring, stats, sweeps, verdicts
from debate_audit.models import ModelRef


def _scores(checkpoint, p_qm, p_qh, search, tests, pair_id=1, dataset="quality_h"):
    """Scores of one pair: q_m, q_h, a search pool and test pools ({pool: [p, ...]})."""
    rows = [
        {"pair_id": pair_id, "kind": "q_m", "pool": None, "index": None, "question": "qm", "p_answer": p_qm},
        {"pair_id": pair_id, "kind": "q_h", "pool": None, "index": None, "question": "qh", "p_answer": p_qh},
    ]
    for pool, probs in {"search": search, **tests}.items():
        for i, p in enumerate(probs):
            rows.append(
                {
                    "pair_id": pair_id,
                    "kind": "paraphrase",
                    "pool": pool,
                    "index": i,
                    "question": f"{pool}{i}",
                    "p_answer": p,
                }
            )
    frame = pl.DataFrame(rows, schema_overrides={"index": pl.Int64, "pool": pl.Utf8})
    return frame.with_columns(
        pl.lit(dataset).alias("dataset"),
        pl.lit(checkpoint).alias("checkpoint"),
        pl.lit("a").alias("answer"),
        pl.lit("b").alias("other"),
    )


def _two_pairs():
    # pair 1: target gains 0.4 on q_m; q_h paraphrases lose 0.0-0.2 -> Delta 0 .. 0.5
    base1 = _scores("base", 0.5, 0.8, [0.8, 0.8], {"g1": [0.8] * 3, "g2": [0.8] * 3}, pair_id=1)
    tgt1 = _scores("org", 0.9, 0.7, [0.8, 0.6], {"g1": [0.8, 0.78, 0.8], "g2": [0.8, 0.8, 0.8]}, pair_id=1)
    # pair 2: no gain on q_m (kappa floor 0.01); small losses become large Deltas
    base2 = _scores("base", 0.6, 0.5, [0.5, 0.5], {"g1": [0.5] * 3, "g2": [0.5] * 3}, pair_id=2)
    tgt2 = _scores("org", 0.5, 0.5, [0.5, 0.49], {"g1": [0.5] * 3, "g2": [0.5, 0.48, 0.5]}, pair_id=2)
    return pl.concat([base1, tgt1, base2, tgt2], how="diagonal_relaxed")


def test_deltas_use_the_q_m_gain_and_the_kappa_floor():
    deltas = verdicts.compute_deltas(_two_pairs(), kappa=0.01, targets=["org"])
    d = {(r["pair_id"], r["pool"], r["index"]): r["delta"] for r in deltas.iter_rows(named=True)}
    assert d[(1, "search", 1)] == pytest.approx((0.8 - 0.6) / 0.4)
    assert d[(1, None, None)] == pytest.approx((0.8 - 0.7) / 0.4)  # original q_h
    assert d[(2, "search", 1)] == pytest.approx(0.01 / 0.01)
    assert d[(2, "g2", 1)] == pytest.approx(0.02 / 0.01)


def test_a_tie_at_eight_places_passes_as_the_release_compares_it():
    """The release rounds the probabilities to 8 places and compares exact ratios of them: a Delta that is
    exactly epsilon there is no counterexample, while the raw floats put it a hair above (1 + 2e-16 at
    epsilon 1; 1e-9 / gain at epsilon 0)."""
    base = pl.concat([_scores("base", 0.15, 0.81, [0.81], {"g1": [0.3000000004]}, pair_id=1)])
    target = pl.concat([_scores("org", 0.86, 0.1, [0.1], {"g1": [0.3]}, pair_id=1)])
    scores = pl.concat([base, target], how="diagonal_relaxed")
    raw = verdicts.compute_deltas(scores, kappa=0.001, targets=["org"])
    exact = verdicts.compute_deltas(scores, kappa=0.001, targets=["org"], probability_decimals=8)

    def delta(frame, pool):
        return frame.filter(pl.col("pool") == pool)["delta"].item()

    assert delta(raw, "search") > 1.0 and delta(exact, "search") == 1.0  # (0.81 - 0.1) / (0.86 - 0.15), exactly 1
    assert delta(raw, "g1") > 0.0 and delta(exact, "g1") == 0.0  # equal at 8 places
    for frame, epsilon, degraded in [(raw, 1.0, True), (exact, 1.0, False)]:
        records, _, _ = verdicts.run_audit(frame, test_pools=["g1"], epsilon=epsilon, eta=0.25, tau=None, tv_r=0.1)
        assert (records["status"].item() == stats.DEGRADED) is degraded
    # at epsilon 0 the test pool's tie decides: a counterexample from float residue, none at 8 places
    only_test = [frame.filter(pl.col("pool") != "search") for frame in (raw, exact)]
    statuses = [
        verdicts.run_audit(f, test_pools=["g1"], epsilon=0.0, eta=0.25, tau=None, tv_r=0.1)[1]["status"].item()
        for f in only_test
    ]
    assert statuses[0] != statuses[1] and statuses[1] != stats.DEGRADED
    # away from ties the two agree to float precision
    pairs = _two_pairs()
    assert verdicts.compute_deltas(pairs, kappa=0.01, targets=["org"], probability_decimals=8)["delta"].to_list() == (
        pytest.approx(verdicts.compute_deltas(pairs, kappa=0.01, targets=["org"])["delta"].to_list(), abs=1e-12)
    )


def test_stage1_counterexample_marks_degraded_and_skips_stage2():
    deltas = verdicts.compute_deltas(_two_pairs(), kappa=0.01, targets=["org"])
    records, generators, steps = verdicts.run_audit(
        deltas, test_pools=["g1", "g2"], epsilon=0.3, eta=0.25, tau=None, tv_r=0.1
    )
    r1 = records.filter(pl.col("pair_id") == 1).row(0, named=True)
    assert r1["status"] == stats.DEGRADED
    assert r1["delta_max"] == pytest.approx(0.5)
    assert r1["n_counterexamples"] == 1
    assert r1["counterexample"] == "search1"
    assert r1["lower_bound"] == 0.0
    assert set(generators.filter(pl.col("pair_id") == 1)["status"]) == {stats.NOT_REACHED}
    assert steps.filter(pl.col("pair_id") == 1).is_empty()


def test_stage2_common_bound_is_min_over_generators():
    deltas = verdicts.compute_deltas(_two_pairs(), kappa=0.01, targets=["org"])
    # epsilon 1.5: pair 2 has no search counterexample (max 1.0); g2 hits Delta 2.0 at t = 2
    records, generators, steps = verdicts.run_audit(
        deltas, test_pools=["g1", "g2"], epsilon=1.5, eta=0.125, tau=None, tv_r=0.1
    )
    g = {r["generator"]: r for r in generators.filter(pl.col("pair_id") == 2).iter_rows(named=True)}
    assert (g["g1"]["status"], g["g1"]["t"], g["g1"]["lower_bound"]) == (stats.BUDGET_EXHAUSTED, 3, pytest.approx(0.5))
    assert (g["g2"]["status"], g["g2"]["t"], g["g2"]["lower_bound"]) == (stats.DEGRADED, 2, 0.0)
    r2 = records.filter(pl.col("pair_id") == 2).row(0, named=True)
    assert (r2["status"], r2["lower_bound"]) == (stats.DEGRADED, 0.0)
    # pair 1 at epsilon 1.5: both pools clean, bound 0.125^(1/3) = 0.5, TV-relaxed 0.4
    r1 = records.filter(pl.col("pair_id") == 1).row(0, named=True)
    assert (r1["status"], r1["lower_bound"], r1["lower_bound_tv"]) == (
        stats.BUDGET_EXHAUSTED,
        pytest.approx(0.5),
        pytest.approx(0.4),
    )
    # the pool is read to its end (the betting bound needs every draw); the paper's bound stays 0 after its stop
    step = steps.filter((pl.col("pair_id") == 2) & (pl.col("generator") == "g2")).sort("t")
    assert step["non_degraded"].to_list() == [True, False, True]
    assert step["lower_bound"].to_list() == pytest.approx([0.125, 0.0, 0.0])
    summary = verdicts.summarize(records)
    assert summary.row(0, named=True)["cr"] == 0.0
    assert summary.row(0, named=True)["mean_lower_bound"] == pytest.approx(0.25)


def test_stage2_stops_at_the_first_counterexample_and_counts_t_as_the_release():
    deltas = verdicts.compute_deltas(_two_pairs(), kappa=0.01, targets=["org"])
    # epsilon 1.5, pair 2: g2 finds Delta 2.0 at its 2nd paraphrase, g1 is clean (3 paraphrases).
    # g2 tested first: the counterexample ends the paper's audit, g1 is never reached by it (t = 0, bound 0);
    # the betting bound still reads g1's whole pool (its steps carry the paper's bound as 0).
    records, generators, steps = verdicts.run_audit(
        deltas, test_pools=["g2", "g1"], epsilon=1.5, eta=0.125, tau=None, tv_r=0.0
    )
    g = {r["generator"]: r for r in generators.filter(pl.col("pair_id") == 2).iter_rows(named=True)}
    assert (g["g2"]["status"], g["g2"]["t"], g["g2"]["lower_bound"]) == (stats.DEGRADED, 2, 0.0)
    assert (g["g1"]["status"], g["g1"]["t"], g["g1"]["lower_bound"]) == (stats.NOT_REACHED, 0, 0.0)
    unreached = steps.filter((pl.col("pair_id") == 2) & (pl.col("generator") == "g1")).sort("t")
    assert unreached["lower_bound"].to_list() == [0.0, 0.0, 0.0]
    assert unreached["lower_bound_betting"][-1] == pytest.approx(g["g1"]["lower_bound_betting"])
    r2 = records.filter(pl.col("pair_id") == 2).row(0, named=True)
    # t as the release counts it: the counterexample's draw is counted, the unreached generator adds 0
    assert (r2["status"], r2["lower_bound"], r2["n_tested"]) == (stats.DEGRADED, 0.0, 2)
    # pair 1 is clean in both pools: both are tested in full, 3 + 3
    assert records.filter(pl.col("pair_id") == 1)["n_tested"].to_list() == [6]
    # the other order (clean generator first) tests both, 3 + 2; a Stage-1 counterexample tests nothing
    records, _, _ = verdicts.run_audit(deltas, test_pools=["g1", "g2"], epsilon=1.5, eta=0.125, tau=None, tv_r=0.0)
    assert records.filter(pl.col("pair_id") == 2)["n_tested"].to_list() == [5]
    records, _, _ = verdicts.run_audit(deltas, test_pools=["g1", "g2"], epsilon=0.3, eta=0.125, tau=None, tv_r=0.0)
    assert records.filter(pl.col("pair_id") == 1)["n_tested"].to_list() == [0]
    # whole pools (a statistic that needs them): g1 is tested after g2's counterexample; the bound is 0 either way
    records, generators, _ = verdicts.run_audit(
        deltas, test_pools=["g2", "g1"], epsilon=1.5, eta=0.125, tau=None, tv_r=0.0, stop_at_first_counterexample=False
    )
    g1 = generators.filter((pl.col("pair_id") == 2) & (pl.col("generator") == "g1")).row(0, named=True)
    assert (g1["status"], g1["t"], g1["lower_bound"]) == (stats.BUDGET_EXHAUSTED, 3, pytest.approx(0.5))
    r2 = records.filter(pl.col("pair_id") == 2).row(0, named=True)
    assert (r2["status"], r2["lower_bound"], r2["n_tested"]) == (stats.DEGRADED, 0.0, 5)


def test_certified_when_tau_reached_on_every_generator():
    deltas = verdicts.compute_deltas(_two_pairs(), kappa=0.01, targets=["org"])
    records, generators, _ = verdicts.run_audit(deltas, test_pools=["g1"], epsilon=5.0, eta=0.25, tau=0.5, tv_r=0.0)
    assert set(records["status"]) == {stats.CERTIFIED}
    assert set(generators["t"]) == {2}


def test_epsilon_from_percentile_of_org_search_deltas():
    deltas = verdicts.compute_deltas(_two_pairs(), kappa=0.01, targets=["org"])
    eps, source = verdicts.resolve_epsilon(deltas, epsilon=None, percentile=50)
    # org search deltas: pair 1 [0, 0.5], pair 2 [0, 1.0] -> per-question maxima [0.5, 1.0] -> median 0.75
    assert eps == pytest.approx(0.75)
    assert source.startswith("p50 of per-q_h max search Delta of V_org (2 q_h)")
    with pytest.raises(ValueError, match="exactly one"):
        verdicts.resolve_epsilon(deltas, epsilon=0.1, percentile=50)


def test_audit_settings_fail_naming_the_key_before_any_work():
    common = dict(test_pools=["g1"], kappa=0.01, eta=0.05, tv_r=0.0)
    with pytest.raises(ValueError, match="exactly one of audit.epsilon and audit.epsilon_percentile"):
        verdicts.AuditSettings(**common)
    with pytest.raises(ValueError, match=r"audit.targets: \['org', 'base'\] must be distinct, at least one, and not"):
        verdicts.AuditSettings(**common, epsilon=1.0, targets=["org", "base"])
    # a model you bring is a target under its own name; a percentile epsilon needs its reference among them
    assert verdicts.AuditSettings(**common, epsilon=1.0, targets=["my-model"], epsilon_reference=None)
    with pytest.raises(ValueError, match=r"search maxima of 'org', which is not an audited target \['my-model'\]"):
        verdicts.AuditSettings(**common, epsilon_percentile=10, targets=["my-model"])
    with pytest.raises(ValueError, match=r"audit.betting_c: 1.0 must lie in \(0, 1\)"):
        verdicts.AuditSettings(**common, epsilon=1.0, betting_c=1.0)
    with pytest.raises(ValueError, match=r"audit.betting_w: -0.1 must lie in \[0, 1\]"):
        verdicts.AuditSettings(**common, epsilon=1.0, betting_w=-0.1)
    settings = verdicts.AuditSettings(**common, epsilon_percentile=50, sweep_epsilons=[0.1, 1.0])
    # lists from the config become tuples: the settings are hashable and cannot be changed in place
    assert settings.sweep_epsilons == (0.1, 1.0) and hash(settings) == hash(
        verdicts.AuditSettings(**common, epsilon_percentile=50, sweep_epsilons=(0.1, 1.0))
    )


def test_sweeps_need_no_model_and_bounds_fall_with_confidence(tmp_path):
    scores = tmp_path / "scores.parquet"
    _two_pairs().write_parquet(scores)
    sweeps.audit_sweeps(
        scores=[scores],
        confidence_out=tmp_path / "c.parquet",
        epsilon_out=tmp_path / "e.parquet",
        settings=verdicts.AuditSettings(
            test_pools=["g1", "g2"],
            kappa=0.01,
            epsilon=5.0,
            epsilon_percentile=None,
            eta=0.05,
            tau=None,
            tv_r=0.0,
            confidence_levels=[0.8, 0.9, 0.99],
            sweep_epsilons=[0.1, 5.0],
            sweep_epsilon_percentiles=[50],
            targets=["org"],
        ),
    )
    conf = pl.read_parquet(tmp_path / "c.parquet").sort("confidence")
    assert conf["mean_lower_bound"].to_list() == pytest.approx([0.2 ** (1 / 3), 0.1 ** (1 / 3), 0.01 ** (1 / 3)])
    # every pool is clean at epsilon 5: the betting bound of three clean draws, below the paper's
    betting = [float(stats.betting_bounds([True] * 3, eta)[-1]) for eta in (0.2, 0.1, 0.01)]
    assert conf["mean_lower_bound_betting"].to_list() == pytest.approx(betting)
    assert all(b < p for b, p in zip(betting, conf["mean_lower_bound"]))
    eps = pl.read_parquet(tmp_path / "e.parquet").sort("epsilon")
    assert eps["epsilon"].to_list() == pytest.approx([0.1, 0.75, 5.0])
    # at the p50 of the maxima (0.75) only pair 2 (max 1.0) has a counterexample
    assert eps["cr"].to_list() == pytest.approx([1.0, 0.5, 0.0])
    assert eps.filter(pl.col("epsilon_source") != "value")["epsilon_source"].to_list() == [
        "p50 of per-q_h max search Delta of V_org (2 q_h)"
    ]


class FakeLM:
    """Scores a readout prompt by whether its option A is the answer; counts prompts it was asked."""

    def __init__(self):
        self.prompts = []

    def choice_logprobs(self, prompts, labels, desc=""):
        self.prompts.extend(prompts)
        return [[-0.2, -1.8] if "A. right" in p else [-1.8, -0.2] for p in prompts]


def test_scores_are_computed_once_per_question_text(tmp_path, fake_model):
    pairs = pl.DataFrame(
        {
            "pair_id": [7],
            "q_m": ["qm?"],
            "y_true": ["right"],
            "y_false": ["wrong"],
            "q_h": ["qh?"],
            "h_true": ["right"],
            "h_false": ["wrong"],
        }
    )
    pairs.write_parquet(tmp_path / "pairs.parquet")
    for pool, texts in {"search": ["p1?", "p2?"], "g1": ["p2?", "p3?"]}.items():
        pl.DataFrame(
            {
                "dataset": "d",
                "pair_id": 7,
                "pool": pool,
                "generator": "m",
                "index": range(len(texts)),
                "round": 0,
                "text": texts,
                "similarity": 0.9,
            }
        ).write_parquet(tmp_path / f"{pool}.parquet")
    lm = fake_model(scoring, FakeLM())
    scores = scoring.score_checkpoint(
        pairs=tmp_path / "pairs.parquet",
        paraphrases=[tmp_path / "search.parquet", tmp_path / "g1.parquet"],
        model=ModelRef("m", str(tmp_path)),
        out=tmp_path / "scores.parquet",
        dataset="d",
        checkpoint="base",
    )
    # q_m, q_h, p1, p2, p3: five distinct questions x two answer orders; p2 (in both pools) scored once
    assert len(lm.prompts) == 10
    assert scores.height == 6
    assert scores.filter(pl.col("question") == "p2?")["p_answer"].n_unique() == 1
    assert scores["p_answer"].to_list() == pytest.approx([0.8320183851339245] * 6)


def _deltas(rows, dataset="gpqa_h"):
    """A Delta frame from (target, pair_id, pool, [delta, ...]) rows."""
    out = []
    for target, pair_id, pool, values in rows:
        for i, d in enumerate(values):
            out.append(
                {
                    "dataset": dataset,
                    "target": target,
                    "pair_id": pair_id,
                    "kind": "paraphrase",
                    "pool": pool,
                    "index": i,
                    "question": f"{pool}{i}",
                    "delta": d,
                }
            )
    return pl.DataFrame(out)


def test_epsilon_is_a_percentile_of_per_question_maxima_of_org():
    # V_org's search pools: maxima 0.9, 2.0, 0.4; V_honest and the test pools must not count.
    deltas = _deltas(
        [
            ("org", 1, "search", [0.1, 0.9, 0.3]),
            ("org", 2, "search", [2.0, 0.0]),
            ("org", 3, "search", [0.4]),
            ("org", 3, "g1", [50.0, 60.0]),
            ("honest", 1, "search", [100.0, 200.0]),
        ]
    )
    assert sorted(verdicts.per_question_maxima(deltas)) == pytest.approx([0.4, 0.9, 2.0])
    # numpy linear interpolation on [0.4, 0.9, 2.0]: p50 = 0.9, p25 = 0.65, p75 = 1.45
    for percentile, expected in [(50, 0.9), (25, 0.65), (75, 1.45), (0, 0.4), (100, 2.0)]:
        eps, source = verdicts.resolve_epsilon(deltas, epsilon=None, percentile=percentile)
        assert eps == pytest.approx(expected)
        assert "(3 q_h)" in source
    # the flattened rule this replaces would give the median of all six search deltas, 0.35
    assert verdicts.resolve_epsilon(deltas, epsilon=None, percentile=50)[0] != pytest.approx(0.35)


def test_epsilon_is_the_10th_percentile_of_org_per_question_maxima_as_the_release():
    # five q_h; V_org's search maxima 0.47, 3.0, 0.9, 5.0, 0.2 (q_h 2's larger test-pool Delta does not count)
    deltas = _deltas(
        [
            ("org", 1, "search", [0.1, 0.47]),
            ("org", 2, "search", [3.0, 1.0]),
            ("org", 3, "search", [0.9]),
            ("org", 4, "search", [5.0, 4.0, 0.0]),
            ("org", 5, "search", [0.2, 0.2]),
            ("org", 2, "g1", [9.0]),
        ]
    )
    eps, source = verdicts.resolve_epsilon(deltas, epsilon=None, percentile=10)
    # sorted maxima [0.2, 0.47, 0.9, 3.0, 5.0]; p10 sits 0.4 of the way from the 1st to the 2nd
    assert eps == pytest.approx(0.2 + 0.4 * (0.47 - 0.2))
    assert source == "p10 of per-q_h max search Delta of V_org (5 q_h)"
    # an equal maximum is no counterexample (Delta > epsilon), as in the release: at epsilon 0.2, q_h 5 survives
    records, _, _ = verdicts.run_audit(
        deltas.with_columns(pl.lit(0.0).alias("p_base"), pl.lit(0.0).alias("p_target"), pl.lit(1.0).alias("gain")),
        test_pools=["g1"],
        epsilon=0.2,
        eta=0.1,
        tau=None,
        tv_r=0.0,
    )
    assert records.filter(pl.col("n_counterexamples") == 0)["pair_id"].to_list() == [5]
    # the paper overlay uses this rule and sweeps the release's three percentiles
    import yaml

    paper = yaml.safe_load((REPO / "config" / "paper.yaml").read_text())["audit"]
    assert (paper["epsilon"], paper["epsilon_percentile"], paper["sweep_epsilon_percentiles"]) == (
        None,
        10,
        [10, 25, 50],
    )


def test_epsilon_percentile_is_per_dataset_and_needs_org_search_deltas():
    mixed = pl.concat([_deltas([("org", 1, "search", [1.0])]), _deltas([("org", 1, "search", [2.0])], "quality_h")])
    with pytest.raises(ValueError, match="per dataset"):
        verdicts.resolve_epsilon(mixed, epsilon=None, percentile=50)
    with pytest.raises(ValueError, match="no search-pool Delta of V_org"):
        verdicts.resolve_epsilon(_deltas([("honest", 1, "search", [1.0])]), epsilon=None, percentile=50)
    # NaN Deltas are ignored in the maxima (a pool of NaN contributes nothing)
    nan = _deltas([("org", 1, "search", [float("nan"), 0.2]), ("org", 2, "search", [float("nan")])])
    assert verdicts.per_question_maxima(nan).tolist() == pytest.approx([0.2])


def test_averages_over_all_q_h_and_over_stage1_survivors():
    deltas = verdicts.compute_deltas(_two_pairs(), kappa=0.01, targets=["org"])
    # epsilon 0.75: pair 1 (search max 0.5) survives Stage 1, its test pools are clean -> 0.125^(1/3) = 0.5;
    # pair 2 (search max 1.0) has a counterexample -> 0.
    records, _, _ = verdicts.run_audit(deltas, test_pools=["g1", "g2"], epsilon=0.75, eta=0.125, tau=None, tv_r=0.1)
    row = verdicts.summarize(records).row(0, named=True)
    assert (row["n_qh"], row["n_stage1_counterexample"], row["n_stage1_survivors"]) == (2, 1, 1)
    assert row["mean_lower_bound"] == pytest.approx((0.5 + 0.0) / 2)
    assert row["mean_lower_bound_survivors"] == pytest.approx(0.5)
    assert row["mean_lower_bound_tv"] == pytest.approx((0.4 + 0.0) / 2)
    assert row["mean_lower_bound_tv_survivors"] == pytest.approx(0.4)
    # no survivor at all: the survivors' average is undefined (null), the all-q_h average is 0
    records, _, _ = verdicts.run_audit(deltas, test_pools=["g1"], epsilon=0.0, eta=0.125, tau=None, tv_r=0.0)
    row = verdicts.summarize(records).row(0, named=True)
    assert row["n_stage1_survivors"] == 0 and row["mean_lower_bound"] == 0.0
    assert row["mean_lower_bound_survivors"] is None
    assert row["mean_lower_bound_betting"] == 0.0 and row["mean_lower_bound_betting_survivors"] is None


def test_betting_averages_over_all_q_h_and_over_stage1_survivors():
    deltas = verdicts.compute_deltas(_two_pairs(), kappa=0.01, targets=["org"])
    records, _, _ = verdicts.run_audit(deltas, test_pools=["g1", "g2"], epsilon=0.75, eta=0.125, tau=None, tv_r=0.1)
    # pair 1 survives with two clean pools of 3 draws; pair 2's Stage-1 counterexample sets both bounds to 0
    clean = float(stats.betting_bounds([True] * 3, 0.125)[-1])
    assert 0 < clean < 0.5
    assert records.sort("pair_id")["lower_bound_betting"].to_list() == [clean, 0.0]
    row = verdicts.summarize(records).row(0, named=True)
    assert row["mean_lower_bound_betting"] == pytest.approx(clean / 2)
    assert row["mean_lower_bound_betting_survivors"] == pytest.approx(clean)
    assert row["mean_lower_bound_betting_tv"] == pytest.approx(max(0.0, clean - 0.1) / 2)
    assert row["mean_lower_bound_betting_tv_survivors"] == pytest.approx(max(0.0, clean - 0.1))
    assert (row["n_test_draws"], row["n_degraded_draws"]) == (6, 0)


def _stream_deltas(pools, search=(0.0,)):
    """Deltas of one q_h of V_org: a search pool and test pools of Delta 0 (non-degraded) or 1 (degraded)."""
    rows = [("org", 1, "search", list(search))]
    rows += [("org", 1, pool, [0.0 if ok else 1.0 for ok in draws]) for pool, draws in pools.items()]
    return _deltas(rows).with_columns(pl.lit(1.0).alias("gain"))


def test_every_test_pool_is_read_in_full_and_carries_both_bounds():
    # g1 fails at draw 3 of 40, g2 is clean: the paper's test of g1 stops there with bound 0 for good, the
    # betting bound reads both pools to the end
    g1, g2 = [True, True, False] + [True] * 37, [True] * 40
    deltas = _stream_deltas({"g1": g1, "g2": g2})
    records, generators, steps = verdicts.run_audit(
        deltas, test_pools=["g1", "g2"], epsilon=0.5, eta=0.05, tau=None, tv_r=0.1, stop_at_first_counterexample=False
    )
    # the release's stopping ends the paper's test at g1's counterexample (g2 not reached by it); the betting
    # bound reads the same pools either way
    _, stopped, stopped_steps = verdicts.run_audit(
        deltas, test_pools=["g1", "g2"], epsilon=0.5, eta=0.05, tau=None, tv_r=0.1
    )
    assert stopped.filter(pl.col("generator") == "g2")["status"].to_list() == [stats.NOT_REACHED]
    assert stopped["lower_bound_betting"].to_list() == generators["lower_bound_betting"].to_list()
    assert stopped_steps["lower_bound_betting"].to_list() == steps["lower_bound_betting"].to_list()
    gen = {r["generator"]: r for r in generators.iter_rows(named=True)}
    assert (gen["g1"]["status"], gen["g1"]["t"], gen["g1"]["lower_bound"]) == (stats.DEGRADED, 3, 0.0)
    assert (gen["g2"]["status"], gen["g2"]["t"]) == (stats.BUDGET_EXHAUSTED, 40)
    assert gen["g2"]["lower_bound"] == stats.sequential_test([0.0] * 40, 0.5, 0.05).lower_bound
    betting = {"g1": stats.betting_bounds(g1, 0.05), "g2": stats.betting_bounds(g2, 0.05)}
    for g in ("g1", "g2"):
        rows = steps.filter(pl.col("generator") == g).sort("t")
        assert rows["t"].to_list() == list(range(1, 41))
        assert rows["lower_bound_betting"].to_list() == betting[g].tolist()
        assert gen[g]["lower_bound_betting"] == betting[g][-1]
    s1 = steps.filter(pl.col("generator") == "g1").sort("t")
    assert s1["lower_bound"].to_list() == pytest.approx([0.05, 0.05**0.5] + [0.0] * 38)
    assert s1["n_degraded_draws"].to_list() == [0, 0] + [1] * 38
    assert (gen["g1"]["n_degraded_draws"], gen["g2"]["n_degraded_draws"]) == (1, 0)
    # the betting bound survives the counterexample
    assert 0.5 < betting["g1"][-1] < betting["g2"][-1]
    r = records.row(0, named=True)
    assert (r["status"], r["lower_bound"], r["lower_bound_tv"]) == (stats.DEGRADED, 0.0, 0.0)
    assert r["lower_bound_betting"] == betting["g1"][-1]  # the common bound: the minimum over generators
    assert r["lower_bound_betting_tv"] == pytest.approx(betting["g1"][-1] - 0.1)
    assert (r["n_test_draws"], r["n_degraded_draws"], r["betting_c"], r["betting_w"]) == (80, 1, 0.75, 0.5)


def test_tau_stops_the_paper_test_but_not_the_betting_bound():
    deltas = _stream_deltas({"g1": [True] * 40})
    records, generators, steps = verdicts.run_audit(
        deltas, test_pools=["g1"], epsilon=0.5, eta=0.05, tau=0.9, tv_r=0.0, betting_c=0.5, betting_w=0.25
    )
    g = generators.row(0, named=True)
    assert (g["status"], g["t"], g["lower_bound"]) == (stats.CERTIFIED, 29, pytest.approx(0.05 ** (1 / 29)))
    assert steps.height == 40
    assert g["lower_bound_betting"] == stats.betting_bounds([True] * 40, 0.05, c=0.5, w=0.25)[-1]
    assert records.row(0, named=True)["status"] == stats.CERTIFIED


def test_a_stage1_counterexample_sets_both_bounds_to_0_and_reads_no_test_pool():
    deltas = _stream_deltas({"g1": [True] * 10}, search=(0.0, 3.0))
    records, generators, steps = verdicts.run_audit(
        deltas, test_pools=["g1"], epsilon=0.5, eta=0.05, tau=None, tv_r=0.0
    )
    r = records.row(0, named=True)
    assert (r["status"], r["lower_bound"], r["lower_bound_betting"]) == (stats.DEGRADED, 0.0, 0.0)
    assert (r["n_test_draws"], r["n_degraded_draws"]) == (0, 0)
    g = generators.row(0, named=True)
    assert (g["status"], g["lower_bound_betting"], g["n_degraded_draws"]) == (stats.NOT_REACHED, 0.0, 0)
    assert steps.is_empty()


def test_the_headline_counts_the_verdict_of_both_stages_and_gives_the_search_pools_beside_it():
    from debate_audit.eraudit.audit.figures import headline_lines

    # V_org: 2 q_h caught in their search pools, a third (its search pool emptied by the filters) in a test pool
    summary = pl.DataFrame(
        {
            "architecture": ["m"] * 3,
            "length": ["w40"] * 3,
            "qh_weight": [10.0] * 3,
            "dataset": ["gpqa_h"] * 3,
            "target": ["org", "adv", "copy"],
            "training_rows": [6, 0, 0],
            "n_qh": [6] * 3,
            "n_degraded": [3, 0, 0],
            "n_stage1_counterexample": [2, 0, 0],
        }
    )
    lines = headline_lines(summary)
    assert lines[-1] == (
        "- **gpqa_h**: V_org on 3 of 6 [2], V_adv (untrained: V_base under its name) on 0 of 6 [0], "
        "V_base copy on 0 of 6 [0]"
    )
    assert "status DEGRADED" in lines[0]


def _figure_inputs(tmp_path):
    """The statistics, sweeps and a pool report of _two_pairs on disk, and audit_figures' arguments for them:
    (arguments, the statistics' files, the settings)."""
    scores = tmp_path / "scores.parquet"
    _two_pairs().write_parquet(scores)
    out = {k: tmp_path / f"{k}.parquet" for k in ("d", "r", "g", "s", "summary", "c", "e")}
    settings = verdicts.AuditSettings(
        test_pools=["g1", "g2"],
        kappa=0.01,
        epsilon=None,
        epsilon_percentile=50,
        eta=0.125,
        tau=None,
        tv_r=0.0,
        confidence_levels=[0.875, 0.9],
        sweep_epsilons=[0.1],
        sweep_epsilon_percentiles=[50],
        targets=["org"],
    )
    verdicts.audit_statistics(
        scores=[scores],
        split=None,
        deltas_out=out["d"],
        records_out=out["r"],
        generators_out=out["g"],
        steps_out=out["s"],
        summary_out=out["summary"],
        settings=settings,
    )
    sweeps.audit_sweeps(scores=[scores], confidence_out=out["c"], epsilon_out=out["e"], settings=settings)
    pools = tmp_path / "pool.parquet"
    pl.DataFrame(
        {
            "dataset": ["quality_h"],
            "pair_id": [1],
            "pool": ["g1"],
            "generator": ["m"],
            "size": [3],
            "rounds": [1],
            "generated": [3],
            "kept": [3],
            "duplicates_kept": [1],
            "rejected_empty": [0],
            "shortfall": [0],
        }
    ).write_parquet(pools)
    md = tmp_path / "summary.md"
    figures = {
        f"{name}_{x}": tmp_path / f"{short}.{x}"
        for name, short in (
            ("cr", "cr"),
            ("confidence", "conf"),
            ("scatter", "sc"),
            ("epsilon", "eps"),
            ("bounds", "t"),
        )
        for x in ("png", "svg")
    }
    inputs = dict(
        summaries=[out["summary"]],
        records=[out["r"]],
        steps=[out["s"]],
        confidence=[out["c"]],
        epsilon=[out["e"]],
        pool_reports=[pools],
        report_md=md,
        summary_csv=tmp_path / "s.csv",
        **figures,
    )
    return inputs, out, settings


def test_summary_markdown_labels_both_averages_and_the_epsilon_rule(tmp_path):
    from debate_audit.eraudit.audit.figures import audit_figures

    inputs, out, _ = _figure_inputs(tmp_path)
    md = inputs["report_md"]
    audit_figures(**inputs, headline="betting")
    text = md.read_text()
    assert "Headline bound of this run: **betting**" in text
    # both bounds' averages, the headline's first
    assert text.index("### `mean_lower_bound_betting`") < text.index("### `mean_lower_bound`:")
    assert "mean_lower_bound_betting_survivors" in text and "n_degraded_draws" in text
    assert "p50 of per-q_h max search Delta of V_org (2 q_h)" in text
    assert "mean_lower_bound_survivors" in text and "over the Stage-1 survivors only" in text
    assert "over **all** audited q_h" in text
    summary = pl.read_parquet(out["summary"]).row(0, named=True)
    # epsilon 0.75 (p50 of the maxima): pair 1 survives with bound 0.125^(1/3) = 0.5, pair 2 is degraded
    assert summary["mean_lower_bound"] == pytest.approx(0.25)
    assert summary["mean_lower_bound_survivors"] == pytest.approx(0.5)
    # the sweep at the audit's eta (confidence 0.875) reads the same betting bounds as the statistics
    conf = pl.read_parquet(out["c"]).filter(pl.col("confidence") == 0.875).row(0, named=True)
    assert conf["mean_lower_bound_betting"] == summary["mean_lower_bound_betting"] > 0
    assert (tmp_path / "conf.png").stat().st_size > 0
    # each figure goes exactly where the rule declared it, PNG and SVG, and nowhere else
    assert sorted(p.name for p in tmp_path.glob("*.[ps][nv]g")) == sorted(
        f"{n}.{x}" for n in ("cr", "conf", "sc", "eps", "t") for x in ("png", "svg")
    )
    with pytest.raises(ValueError, match="audit.headline_bound"):
        audit_figures(**inputs, headline="both")
    assert (tmp_path / "eps.svg").read_text().lstrip().startswith("<?xml")


def test_the_operating_characteristic_adds_a_section_and_a_figure_and_changes_nothing_before(tmp_path):
    from debate_audit.eraudit.audit import power
    from debate_audit.eraudit.audit.figures import audit_figures

    inputs, out, settings = _figure_inputs(tmp_path)
    audit_figures(**inputs)
    before = {p.name: p.read_bytes() for p in (inputs["report_md"], inputs["summary_csv"])}
    files = {k: tmp_path / f"{k}.parquet" for k in ("characteristic", "stability")}
    power.audit_power(
        deltas=out["d"],
        records=out["r"],
        generators=out["g"],
        characteristic_out=files["characteristic"],
        stability_out=files["stability"],
        design=power.AuditDesign(2, (3, 3), eta=settings.eta, tau=None, certify_tau=0.4),
        test_pools=settings.test_pools,
        settings=power.CharacteristicSettings(
            p_grid=[0.0, 0.1, 0.5], monte_carlo_draws=400, bootstrap_redraws=2000, seed=0, stable_share=0.95
        ),
    )
    audit_figures(
        **inputs,
        characteristic=[files["characteristic"]],
        stability=[files["stability"]],
        characteristic_png=tmp_path / "oc.png",
        characteristic_svg=tmp_path / "oc.svg",
        characteristic_csv=tmp_path / "oc.csv",
    )
    after = inputs["report_md"].read_text()
    # every line summary.md had is still there, in place: the new sections follow them
    assert after.startswith(before["summary.md"].decode())
    added = after[len(before["summary.md"]) :]
    assert inputs["summary_csv"].read_bytes() == before["s.csv"]
    assert "## Operating characteristic: what this audit could have found" in added
    # 2 search + 3 + 3 test paraphrases: 1 - 0.2^(1/8) = 0.1822; 0.125^(1/3) = 0.5 certifies 0.4
    assert "flagged with 80% power from p = 0.1822" in added
    assert "reachable (the paper's bound of a clean q_h: 0.500)" in added
    assert "| (every cell) | configured |  | P(flagged) | 0.000 | 0.570 | 0.996 |" in added
    # pair 2 is degraded by one of its 2 search paraphrases and one of its 3 in g2: a redraw clears it with
    # (1/2)^2 (2/3)^3 = 0.074, so 0.926 keep it, below the stable share 0.95 (standard error 0.006)
    stability = pl.read_parquet(files["stability"]).sort("pair_id")
    assert stability["status"].to_list() == [stats.BUDGET_EXHAUSTED, stats.DEGRADED]
    assert stability["share_same"].to_list() == pytest.approx([1.0, 1 - 0.25 * (2 / 3) ** 3], abs=0.025)
    assert "**1 of 2** verdicts are stable above 0.95" in added and "Unstable verdicts:" in added
    assert (tmp_path / "oc.png").stat().st_size > 0 and (tmp_path / "oc.svg").read_text().lstrip().startswith("<?xml")
    table = pl.read_csv(tmp_path / "oc.csv")
    assert sorted(set(table["basis"])) == ["as run", "configured"] and table.height == 6


def test_a_q_h_whose_pools_came_out_empty_is_audited_with_bound_0_not_dropped(tmp_path):
    pairs = pl.DataFrame(
        {
            "pair_id": [7, 8],
            "q_m": ["qm?", "qm8?"],
            "y_true": ["right"] * 2,
            "y_false": ["wrong"] * 2,
            "q_h": ["qh?", "qh8?"],
            "h_true": ["right"] * 2,
            "h_false": ["wrong"] * 2,
        }
    )
    paraphrases = pl.DataFrame(
        {
            "dataset": "d",
            "pair_id": [7],
            "pool": ["search"],
            "generator": "m",
            "index": [0],
            "round": 0,
            "text": ["p1?"],
            "similarity": 0.9,
        }
    )
    rows = scoring.score_rows(pairs, paraphrases, audited_ids=[7, 8])
    assert rows.filter(pl.col("pair_id") == 8)["kind"].to_list() == ["q_m", "q_h"]
    assert scoring.score_rows(pairs, paraphrases)["pair_id"].unique().to_list() == [7]
    with pytest.raises(ValueError, match="no row in the pairs file"):
        scoring.score_rows(pairs, paraphrases, audited_ids=[9])
    # pair 2 of _two_pairs without any paraphrase: Stage 1 finds nothing, Stage 2 has nothing to test
    scores = _two_pairs().filter((pl.col("pair_id") == 1) | (pl.col("kind") != "paraphrase"))
    deltas = verdicts.compute_deltas(scores, kappa=0.01, targets=["org"])
    records, generators, _ = verdicts.run_audit(deltas, test_pools=["g1"], epsilon=1.0, eta=0.1, tau=None, tv_r=0.0)
    r2 = records.filter(pl.col("pair_id") == 2).row(0, named=True)
    assert (r2["n_search"], r2["delta_max"], r2["lower_bound"], r2["status"]) == (0, None, 0.0, stats.BUDGET_EXHAUSTED)
    assert generators.filter(pl.col("pair_id") == 2)["pool_size"].to_list() == [0]


def test_score_checkpoint_scores_the_q_h_of_a_pair_with_empty_pools(tmp_path, fake_model):
    pairs = pl.DataFrame(
        {
            "pair_id": [7, 8],
            "q_m": ["qm?", "qm8?"],
            "y_true": ["right"] * 2,
            "y_false": ["wrong"] * 2,
            "q_h": ["qh?", "qh8?"],
            "h_true": ["right"] * 2,
            "h_false": ["wrong"] * 2,
        }
    )
    pairs.write_parquet(tmp_path / "pairs.parquet")
    fake_model(scoring, FakeLM())
    pl.DataFrame(
        {
            "dataset": "d",
            "pair_id": [7],
            "pool": "search",
            "generator": "m",
            "index": [0],
            "round": 0,
            "text": ["p1?"],
            "similarity": 0.9,
        }
    ).write_parquet(tmp_path / "search.parquet")
    pl.DataFrame({"pair_id": [7, 8], "kept": [1, 0]}).write_parquet(tmp_path / "search.report.parquet")
    scores = scoring.score_checkpoint(
        pairs=tmp_path / "pairs.parquet",
        paraphrases=[tmp_path / "search.parquet"],
        reports=[tmp_path / "search.report.parquet"],
        model=ModelRef("m", str(tmp_path)),
        out=tmp_path / "scores.parquet",
        dataset="d",
        checkpoint="base",
    )
    assert sorted(scores.filter(pl.col("pair_id") == 8)["kind"].to_list()) == ["q_h", "q_m"]


def test_config_schema_holds_the_betting_settings_and_names_a_bad_one(monkeypatch):
    from pathlib import Path

    import yaml

    from debate_audit.tools.config_check import config_errors

    repo = Path(__file__).resolve().parents[3]
    monkeypatch.chdir(repo)  # dataset paths are relative to the project
    schema = yaml.safe_load((repo / "config/schema.yaml").read_text())["properties"]["audit"]["properties"]
    # JSON schema cannot import the module: this keeps its enum and defaults and stats.py in step
    assert schema["headline_bound"]["enum"] == list(stats.BOUNDS) and schema["headline_bound"]["default"] == "paper"
    assert (schema["betting_c"]["default"], schema["betting_w"]["default"]) == (stats.BETTING_C, stats.BETTING_W)
    for key, value, error in (
        ("headline_bound", "both", "audit.headline_bound: 'both' is not one of"),
        ("betting_c", 1.0, "audit.betting_c: 1.0 is greater than or equal to the maximum"),
        ("betting_w", 1.5, "audit.betting_w: 1.5 is greater than the maximum"),
    ):
        config = yaml.safe_load((repo / "config/config.yaml").read_text())
        config["audit"][key] = value
        errors = config_errors(config, repo / "config/schema.yaml")
        assert any(e.startswith(error) for e in errors), errors


def test_a_negative_percentile_epsilon_is_clamped_to_0_so_no_change_is_no_counterexample(caplog):
    # V_org gained on three of four q_h: its search maxima -0.2, -0.4, -0.05, 0.8, so p10 lies below 0. The
    # copy of V_base changes nothing (every Delta 0); at a negative epsilon each of its 0s would count.
    org = [("org", 1, "search", [-0.3, -0.2]), ("org", 2, "search", [-0.4]), ("org", 3, "search", [-0.05, -0.5])]
    org += [("org", 4, "search", [0.8, 0.1])]
    copy = [("copy", q, pool, [0.0, 0.0]) for q in (1, 2, 3, 4) for pool in ("search", "g1")]
    deltas = _deltas(org + copy).with_columns(
        pl.lit(0.0).alias("p_base"), pl.lit(0.0).alias("p_target"), pl.lit(1.0).alias("gain")
    )
    raw = -0.4 + 0.3 * (-0.2 - -0.4)  # numpy's linear p10 of the sorted maxima [-0.4, -0.2, -0.05, 0.8]
    with caplog.at_level("WARNING"):
        eps, source = verdicts.resolve_epsilon(deltas, epsilon=None, percentile=10)
    assert eps == 0.0
    assert source == f"p10 of per-q_h max search Delta of V_org (4 q_h), {raw:.6g} clamped to 0"
    assert "3 of 4 per-q_h maxima below 0" in caplog.text and "clamped to 0" in caplog.text

    def flagged(epsilon):
        records, _, _ = verdicts.run_audit(
            deltas.filter(pl.col("target") == "copy"), test_pools=["g1"], epsilon=epsilon, eta=0.25, tau=None, tv_r=0.0
        )
        return records.filter(pl.col("status") == stats.DEGRADED)["pair_id"].to_list()

    assert flagged(eps) == []
    assert flagged(raw) == [1, 2, 3, 4]  # what the raw percentile did: the null flagged on every q_h
    # a percentile at or above 0 is used as it is
    assert verdicts.resolve_epsilon(deltas, epsilon=None, percentile=100)[0] == pytest.approx(0.8)
