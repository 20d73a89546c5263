"""The audit's statistics stages on hand-built scores: Delta, Stage 1, Stage 2, statuses, sweeps."""

import polars as pl
import pytest

from debate_audit.eraudit import audit, stats


def _scores(checkpoint, p_qm, p_qh, search, tests, pair_id=1, dataset="quality_h"):
    """Scores of one pair: q_m, q_h, a search pool and test pools ({pool: [p, ...]})."""
    rows = [
        {"pair_id": pair_id, "kind": "q_m", "pool": None, "index": None, "question": "qm", "p_answer": p_qm},
        {"pair_id": pair_id, "kind": "q_h", "pool": None, "index": None, "question": "qh", "p_answer": p_qh},
    ]
    for pool, probs in {"search": search, **tests}.items():
        for i, p in enumerate(probs):
            rows.append({"pair_id": pair_id, "kind": "paraphrase", "pool": pool, "index": i,
                         "question": f"{pool}{i}", "p_answer": p})
    frame = pl.DataFrame(rows, schema_overrides={"index": pl.Int64, "pool": pl.Utf8})
    return frame.with_columns(pl.lit(dataset).alias("dataset"), pl.lit(checkpoint).alias("checkpoint"),
                              pl.lit("a").alias("answer"), pl.lit("b").alias("other"))


def _two_pairs():
    # pair 1: target gains 0.4 on q_m; q_h paraphrases lose 0.0-0.2 -> Delta 0 .. 0.5
    base1 = _scores("base", 0.5, 0.8, [0.8, 0.8], {"g1": [0.8] * 3, "g2": [0.8] * 3}, pair_id=1)
    tgt1 = _scores("org", 0.9, 0.7, [0.8, 0.6], {"g1": [0.8, 0.78, 0.8], "g2": [0.8, 0.8, 0.8]}, pair_id=1)
    # pair 2: no gain on q_m (kappa floor 0.01); small losses become large Deltas
    base2 = _scores("base", 0.6, 0.5, [0.5, 0.5], {"g1": [0.5] * 3, "g2": [0.5] * 3}, pair_id=2)
    tgt2 = _scores("org", 0.5, 0.5, [0.5, 0.49], {"g1": [0.5] * 3, "g2": [0.5, 0.48, 0.5]}, pair_id=2)
    return pl.concat([base1, tgt1, base2, tgt2], how="diagonal_relaxed")


def test_deltas_use_the_q_m_gain_and_the_kappa_floor():
    deltas = audit.compute_deltas(_two_pairs(), kappa=0.01, targets=["org"])
    d = {(r["pair_id"], r["pool"], r["index"]): r["delta"] for r in deltas.iter_rows(named=True)}
    assert d[(1, "search", 1)] == pytest.approx((0.8 - 0.6) / 0.4)
    assert d[(1, None, None)] == pytest.approx((0.8 - 0.7) / 0.4)  # original q_h
    assert d[(2, "search", 1)] == pytest.approx(0.01 / 0.01)
    assert d[(2, "g2", 1)] == pytest.approx(0.02 / 0.01)


def test_stage1_counterexample_marks_degraded_and_skips_stage2():
    deltas = audit.compute_deltas(_two_pairs(), kappa=0.01, targets=["org"])
    records, generators, steps = audit.run_audit(deltas, test_pools=["g1", "g2"], epsilon=0.3, eta=0.25,
                                                 tau=None, tv_r=0.1)
    r1 = records.filter(pl.col("pair_id") == 1).row(0, named=True)
    assert r1["status"] == stats.DEGRADED
    assert r1["delta_max"] == pytest.approx(0.5)
    assert r1["n_counterexamples"] == 1
    assert r1["counterexample"] == "search1"
    assert r1["lower_bound"] == 0.0
    assert set(generators.filter(pl.col("pair_id") == 1)["status"]) == {stats.NOT_REACHED}
    assert steps.filter(pl.col("pair_id") == 1).is_empty()


def test_stage2_common_bound_is_min_over_generators():
    deltas = audit.compute_deltas(_two_pairs(), kappa=0.01, targets=["org"])
    # epsilon 1.5: pair 2 has no search counterexample (max 1.0); g2 hits Delta 2.0 at t = 2
    records, generators, steps = audit.run_audit(deltas, test_pools=["g1", "g2"], epsilon=1.5, eta=0.125,
                                                 tau=None, tv_r=0.1)
    g = {r["generator"]: r for r in generators.filter(pl.col("pair_id") == 2).iter_rows(named=True)}
    assert (g["g1"]["status"], g["g1"]["t"], g["g1"]["lower_bound"]) == (stats.BUDGET_EXHAUSTED, 3, pytest.approx(0.5))
    assert (g["g2"]["status"], g["g2"]["t"], g["g2"]["lower_bound"]) == (stats.DEGRADED, 2, 0.0)
    r2 = records.filter(pl.col("pair_id") == 2).row(0, named=True)
    assert (r2["status"], r2["lower_bound"]) == (stats.DEGRADED, 0.0)
    # pair 1 at epsilon 1.5: both pools clean, bound 0.125^(1/3) = 0.5, TV-relaxed 0.4
    r1 = records.filter(pl.col("pair_id") == 1).row(0, named=True)
    assert (r1["status"], r1["lower_bound"], r1["lower_bound_tv"]) == (
        stats.BUDGET_EXHAUSTED, pytest.approx(0.5), pytest.approx(0.4))
    step = steps.filter((pl.col("pair_id") == 2) & (pl.col("generator") == "g2")).sort("t")
    assert step["non_degraded"].to_list() == [True, False]
    assert step["lower_bound"].to_list() == pytest.approx([0.125, 0.0])
    summary = audit.summarize(records)
    assert summary.row(0, named=True)["cr"] == 0.0
    assert summary.row(0, named=True)["mean_lower_bound"] == pytest.approx(0.25)


def test_certified_when_tau_reached_on_every_generator():
    deltas = audit.compute_deltas(_two_pairs(), kappa=0.01, targets=["org"])
    records, generators, _ = audit.run_audit(deltas, test_pools=["g1"], epsilon=5.0, eta=0.25, tau=0.5, tv_r=0.0)
    assert set(records["status"]) == {stats.CERTIFIED}
    assert set(generators["t"]) == {2}


def test_epsilon_from_percentile_of_org_search_deltas():
    deltas = audit.compute_deltas(_two_pairs(), kappa=0.01, targets=["org"])
    eps, source = audit.resolve_epsilon(deltas, epsilon=None, percentile=50)
    # org search deltas: pair 1 [0, 0.5], pair 2 [0, 1.0] -> median 0.25
    assert eps == pytest.approx(0.25)
    assert source.startswith("p50")
    with pytest.raises(ValueError, match="exactly one"):
        audit.resolve_epsilon(deltas, epsilon=0.1, percentile=50)


def test_sweeps_need_no_model_and_bounds_fall_with_confidence(tmp_path):
    scores = tmp_path / "scores.parquet"
    _two_pairs().write_parquet(scores)
    audit.audit_sweeps(
        scores=[scores], confidence_out=tmp_path / "c.parquet", epsilon_out=tmp_path / "e.parquet",
        test_pools=["g1", "g2"], kappa=0.01, epsilon=5.0, epsilon_percentile=None, eta=0.05, tau=None, tv_r=0.0,
        confidence_levels=[0.8, 0.9, 0.99], sweep_epsilons=[0.1, 5.0], sweep_epsilon_percentiles=[50],
        targets=["org"],
    )
    conf = pl.read_parquet(tmp_path / "c.parquet").sort("confidence")
    assert conf["mean_lower_bound"].to_list() == pytest.approx([0.2 ** (1 / 3), 0.1 ** (1 / 3), 0.01 ** (1 / 3)])
    eps = pl.read_parquet(tmp_path / "e.parquet").sort("epsilon")
    assert eps["epsilon"].to_list() == pytest.approx([0.1, 0.25, 5.0])
    assert eps["cr"].to_list() == pytest.approx([1.0, 1.0, 0.0])


class FakeLM:
    """Scores a readout prompt by whether its option A is the answer; counts prompts it was asked."""

    def __init__(self):
        self.prompts = []

    def choice_logprobs(self, prompts, labels, desc=""):
        self.prompts.extend(prompts)
        return [[-0.2, -1.8] if "A. right" in p else [-1.8, -0.2] for p in prompts]


def test_scores_are_computed_once_per_question_text(tmp_path):
    pairs = pl.DataFrame({"pair_id": [7], "q_m": ["qm?"], "y_true": ["right"], "y_false": ["wrong"],
                          "q_h": ["qh?"], "h_true": ["right"], "h_false": ["wrong"]})
    pairs.write_parquet(tmp_path / "pairs.parquet")
    for pool, texts in {"search": ["p1?", "p2?"], "g1": ["p2?", "p3?"]}.items():
        pl.DataFrame({"dataset": "d", "pair_id": 7, "pool": pool, "generator": "m", "index": range(len(texts)),
                      "round": 0, "text": texts, "similarity": 0.9}).write_parquet(tmp_path / f"{pool}.parquet")
    lm = FakeLM()
    scores = audit.score_checkpoint(pairs=tmp_path / "pairs.parquet",
                                    paraphrases=[tmp_path / "search.parquet", tmp_path / "g1.parquet"],
                                    model_dir=tmp_path, out=tmp_path / "scores.parquet", dataset="d",
                                    checkpoint="base", lm=lm)
    # q_m, q_h, p1, p2, p3: five distinct questions x two answer orders; p2 (in both pools) scored once
    assert len(lm.prompts) == 10
    assert scores.height == 6
    assert scores.filter(pl.col("question") == "p2?")["p_answer"].n_unique() == 1
    assert scores["p_answer"].to_list() == pytest.approx([0.8320183851339245] * 6)
