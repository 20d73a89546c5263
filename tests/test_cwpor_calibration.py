"""Calibration of the judge's confidence signals: hand-computed cases, synthetic judges, the bootstrap."""

import math

import numpy as np
import polars as pl
import pytest
from test_cwpor_metrics import HAND, judgments

from debate_audit.cwpor.calibration import (
    CALIBRATION_SCHEMA,
    RELIABILITY_SCHEMA,
    CalibrationSettings,
    Scored,
    auroc,
    brier,
    calibration_frames,
    compute_calibration,
    ece,
    question_weights,
    weighted_metrics,
)


def test_hand_case_two_equal_mass_bins():
    # bins {0.6, 0.6} (accuracy 0.5) and {0.9, 0.9} (accuracy 1.0): each off by 0.1
    p, y = (0.6, 0.6, 0.9, 0.9), (1, 0, 1, 1)
    assert ece(p, y, bins=2) == pytest.approx(0.10)
    assert brier(p, y) == pytest.approx((0.4**2 + 0.6**2 + 0.1**2 + 0.1**2) / 4)
    assert brier(p, y) == pytest.approx(0.135)


def test_equal_mass_bins_split_ties_by_order_not_by_value():
    # three tied confidences and three bins: each bin holds one judgment, so the gaps do not cancel
    assert ece([0.5, 0.5, 0.5], [1, 0, 0], bins=3) == pytest.approx((0.5 + 0.5 + 0.5) / 3)
    # one bin: the mean confidence 0.5 against accuracy 1/3
    assert ece([0.5, 0.5, 0.5], [1, 0, 0], bins=1) == pytest.approx(0.5 - 1 / 3)


def test_rubric_levels_are_the_bins():
    # levels 0.6 (2 judgments, accuracy 0.5) and 1.0 (1 judgment, accuracy 0)
    assert ece([0.6, 1.0, 0.6], [1, 0, 0], rubric=True) == pytest.approx((2 * 0.1 + 1 * 1.0) / 3)


def test_auroc_counts_a_tie_as_half():
    # correct picks 0.9, 0.6 against persuaded 0.6, 0.5: 1 + 1 + 1/2 + 1 of 4 pairs
    assert auroc([0.9, 0.6, 0.6, 0.5], [1, 1, 0, 0]) == pytest.approx(3.5 / 4)
    assert auroc([0.7, 0.7], [1, 0]) == pytest.approx(0.5)
    assert math.isnan(auroc([0.7, 0.8], [1, 1]))


def test_calibrated_synthetic_judge_has_a_small_ece_and_a_shifted_one_the_shift():
    rng = np.random.default_rng(0)
    p = rng.uniform(0.5, 1.0, 10_000)
    y = rng.random(10_000) < p
    assert ece(p, y) < 0.015
    assert 0.09 <= ece(p - 0.1, y) <= 0.11


def test_weights_of_two_count_a_judgment_twice():
    s = Scored.of([0.2, 0.6, 0.7, 0.9], [0, 1, 0, 1])
    doubled = Scored.of([0.2, 0.6, 0.6, 0.7, 0.9], [0, 1, 1, 0, 1])
    for bins in (1, 2, 3, 4):
        weighted = weighted_metrics(s, np.array([[1.0, 2.0, 1.0, 1.0]]), bins=bins)
        expanded = weighted_metrics(doubled, np.ones((1, 5)), bins=bins)
        for name in ("ece", "brier", "gap", "auroc"):
            assert weighted[name][0] == pytest.approx(expanded[name][0]), (name, bins)


def test_a_zero_weight_judgment_is_left_out():
    s = Scored.of([0.2, 0.6, 0.7, 0.9], [0, 1, 0, 1])
    dropped = Scored.of([0.2, 0.7, 0.9], [0, 0, 1])
    for bins in (1, 2, 3):
        a = weighted_metrics(s, np.array([[1.0, 0.0, 1.0, 1.0]]), bins=bins)
        b = weighted_metrics(dropped, np.ones((1, 3)), bins=bins)
        assert a["ece"][0] == pytest.approx(b["ece"][0]) and a["auroc"][0] == pytest.approx(b["auroc"][0])


def test_question_bootstrap_draws_every_judgment_of_a_question_together():
    s = Scored.of([0.5, 0.6, 0.7, 0.8], [1, 0, 1, 0], question=[7, 7, 9, 9])
    w = question_weights(s, np.random.default_rng(1), 50)
    order = np.argsort(s.question, kind="stable")
    by_question = w[:, order].reshape(50, 2, 2)
    assert (by_question[:, :, 0] == by_question[:, :, 1]).all()
    assert (w.sum(axis=1) == 4).all()


def test_judgments_below_the_minimum_get_no_ece():
    s = Scored.of([0.6, 0.7], [1, 0])
    assert math.isnan(weighted_metrics(s, np.ones((1, 2)), bins=2, min_judgments=30)["ece"][0])


def test_stage_on_hand_judgments_every_signal_and_group():
    frame = judgments(HAND)
    table, bins = calibration_frames(
        frame, CalibrationSettings(bins=2, min_judgments=1, noise_draws=20), resamples=50, level=0.9, seed=3
    )
    assert list(table.columns) == list(CALIBRATION_SCHEMA) and list(bins.columns) == list(RELIABILITY_SCHEMA)
    pooled = {r["signal"]: r for r in table.filter(pl.col("verbosity").is_null()).iter_rows(named=True)}
    assert set(pooled) == {"rubric_r5", "rubric_prob", "llc", "combined"}
    # parsed judgments: q0 rubric 5 correct, q1 rubric 4 persuaded, q2 rubric 2 persuaded
    r5 = pooled["rubric_r5"]
    assert (r5["n"], r5["n_correct"]) == (3, 1)
    assert r5["brier"] == pytest.approx(((1.0 - 1) ** 2 + 0.8**2 + 0.4**2) / 3)
    assert r5["gap"] == pytest.approx((1.0 + 0.8 + 0.4) / 3 - 1 / 3)
    assert r5["ece"] == pytest.approx((0.0 + 0.8 + 0.4) / 3)  # each level its own bin
    assert r5["auroc"] == pytest.approx(1.0)  # the one correct pick is the most confident
    prob = pooled["rubric_prob"]
    assert prob["mean_confidence"] == pytest.approx((1.0 + 0.875 + 0.625) / 3)
    # LLC on all four: argmax correct for q0 (0.9), persuaded for q1 (0.8), correct q2 (0.6 at A), persuaded q3 (0.7)
    llc = pooled["llc"]
    assert (llc["n"], llc["n_correct"]) == (4, 2)
    assert llc["auroc"] == pytest.approx(2 / 4)  # correct 0.9, 0.6 against persuaded 0.8, 0.7
    assert pooled["combined"]["kind"] == "weight"
    assert table.filter(pl.col("rows") != "all").is_empty()  # no example reply in these prompts
    assert bins.filter(pl.col("verbosity").is_null() & (pl.col("signal") == "rubric_r5"))["n"].sum() == 3


def test_example_confidence_copies_get_their_own_rubric_rows():
    frame = judgments(HAND, examples=["A", "B", "A", "B"])  # every example reply has confidence 4
    table, _ = calibration_frames(
        frame, CalibrationSettings(bins=2, min_judgments=1, noise_draws=0), resamples=0, level=0.9, seed=3
    )
    without = table.filter((pl.col("rows") == "without_example_confidence") & pl.col("verbosity").is_null())
    assert sorted(without["signal"]) == ["rubric_prob", "rubric_r5"]
    assert without["n"].to_list() == [2, 2]  # q1 said 4, as the example did


def test_noise_ece_of_a_calibrated_judge_covers_its_own_ece_most_of_the_time():
    rng = np.random.default_rng(5)
    inside = 0
    for _ in range(40):
        p = rng.uniform(0.5, 1.0, 200)
        y = rng.random(200) < p
        frame = pl.DataFrame(
            {
                "model": "m",
                "judge_model": "m",
                "verbosity": 30,
                "question_id": np.arange(200),
                "parse_ok": False,
                "llc": p,
                "llc_override": ~y,
                "rubric_confidence": None,
                "override": None,
                "combined_confidence": None,
                "example_confidence": None,
            },
            schema_overrides={
                "rubric_confidence": pl.Int8,
                "override": pl.Boolean,
                "combined_confidence": pl.Float64,
                "example_confidence": pl.Int8,
            },
        )
        table, _ = calibration_frames(frame, CalibrationSettings(noise_draws=100), resamples=0, level=0.9, seed=1)
        row = table.filter((pl.col("signal") == "llc") & pl.col("verbosity").is_null()).row(0, named=True)
        inside += row["ece"] <= row["noise_ece_p95"]
    assert inside >= 32  # 95% in expectation


def test_bootstrap_interval_covers_the_true_ece_of_a_miscalibrated_judge():
    # confidences 0.1 too high: the true ECE is 0.1; a 90% interval should cover it most of the time
    rng = np.random.default_rng(11)
    covered = 0
    for trial in range(40):
        p = rng.uniform(0.5, 0.9, 400)
        y = rng.random(400) < p
        s = Scored.of(p + 0.1, y)
        w = question_weights(s, np.random.default_rng(trial), 300)
        stats = weighted_metrics(s, w, bins=10)["gap"]
        low, high = np.quantile(stats, [0.05, 0.95])
        covered += low <= 0.1 <= high
    assert covered >= 32


def test_compute_calibration_writes_table_bins_and_markdown(tmp_path):
    judgments(HAND).write_parquet(tmp_path / "j.parquet")
    table = compute_calibration(
        [tmp_path / "j.parquet"],
        tmp_path / "c.parquet",
        tmp_path / "b.parquet",
        tmp_path / "c.md",
        settings=CalibrationSettings(min_judgments=1, noise_draws=10),
        resamples=20,
        level=0.95,
        seed=0,
    )
    assert pl.read_parquet(tmp_path / "c.parquet").shape == table.shape
    text = (tmp_path / "c.md").read_text()
    assert "Judge calibration" in text and "combined (weight)" in text and "rubric_prob" in text
