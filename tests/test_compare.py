"""make compare: two runs' figures side by side, and the paired tests on the items both share.

The runs are written here in the real layout by the real writers (cwpor/metrics.py's compute_metrics, the
audit's summarize, the Parquet schemas of the judge, the audit and Table 1), with outcomes planted: a
difference the paired tests must find, and nulls (the same run twice; the same rate reshuffled over the
items) they must not call one.
"""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from debate_audit.cwpor.judge import JUDGMENTS_SCHEMA
from debate_audit.cwpor.metrics import compute_metrics
from debate_audit.cwpor.questions import QUESTIONS_SCHEMA
from debate_audit.data.io import write_parquet
from debate_audit.eraudit.audit.verdicts import DELTA_SCHEMA, RECORD_SCHEMA, SUMMARY_SCHEMA, summarize
from debate_audit.eraudit.common.grid import labelled, with_labels
from debate_audit.eraudit.verifier.table1 import TABLE1_SCHEMA
from debate_audit.views.compare import AUDIT_SCHEMA, CWPOR_SCHEMA, CompareError, CompareSettings, compare_runs, main

MODEL = "m"
SETTINGS = CompareSettings(resamples=400, level=0.95, seed=0)


def write_cwpor(results: Path, persuaded: dict[int, bool], texts: dict[int, str] | None = None, verbosity: int = 30):
    """One model's judgments at one word limit (question id -> judge picked the persuasive answer), its
    questions and its metrics.parquet."""
    ids = sorted(persuaded)
    questions = pl.DataFrame(
        {
            "question_id": ids,
            "type": "Adversarial",
            "category": "Health",
            "question": [(texts or {}).get(i, f"question {i}?") for i in ids],
            "best_answer": "b",
            "falsehood": "f",
            "falsehood_index": 0,
            "correct_position": "A",
        },
        schema=QUESTIONS_SCHEMA,
    )
    write_parquet(questions, QUESTIONS_SCHEMA, results / "cwpor/questions.parquet")
    n = len(ids)
    judgments = pl.DataFrame(
        {
            "model": [MODEL] * n,
            "judge_model": [MODEL] * n,
            "protocol": ["single"] * n,
            "verbosity": [verbosity] * n,
            "question_id": ids,
            "category": ["Health"] * n,
            "type": ["Adversarial"] * n,
            "correct_position": ["A"] * n,
            "choice": ["B" if persuaded[i] else "A" for i in ids],
            "rubric_confidence": [4] * n,
            "parse_ok": [True] * n,
            "p_a": [0.3 if persuaded[i] else 0.7 for i in ids],
            "llc": [0.7] * n,
            "llc_choice": ["B" if persuaded[i] else "A" for i in ids],
            "override": [persuaded[i] for i in ids],
            "llc_override": [persuaded[i] for i in ids],
            "combined_confidence": [0.56] * n,
            "neutral_truncated": [False] * n,
            "persuasive_truncated": [False] * n,
        }
    ).with_columns(pl.col("p_a").alias("p_b") * -1 + 1)
    judgments = judgments.with_columns(pl.lit(None).alias(c) for c in JUDGMENTS_SCHEMA if c not in judgments.columns)
    path = results / f"cwpor/{MODEL}/judge-{MODEL}/judgments_v{verbosity}.parquet"
    write_parquet(judgments.select(list(JUDGMENTS_SCHEMA)).cast(JUDGMENTS_SCHEMA), JUDGMENTS_SCHEMA, path)
    compute_metrics(
        [path],
        results / "cwpor/metrics.parquet",
        results / "cwpor/breakdowns.parquet",
        resamples=50,
        level=0.95,
        seed=0,
    )


def write_audit(
    results: Path,
    found: dict[int, bool],
    *,
    qh_weight: float = 10.0,
    target: str = "org",
    texts: dict[int, str] | None = None,
):
    """One audit (architecture a1, dataset quality_h): per pair id whether a counterexample was found, its
    records, summary and q_h deltas, and a Table 1 row."""
    labels = {"architecture": "a1", "length": "w40", "qh_weight": qh_weight}
    ids = sorted(found)
    records = pl.DataFrame(
        {
            "dataset": "quality_h",
            "target": target,
            "pair_id": ids,
            "split": "eval",
            "n_counterexamples": [2 if found[i] else 0 for i in ids],
            "lower_bound": [0.0 if found[i] else 0.6 for i in ids],
            "lower_bound_betting": [0.0 if found[i] else 0.5 for i in ids],
            "status": ["DEGRADED" if found[i] else "CERTIFIED" for i in ids],
            "n_test_draws": 8,
            "n_degraded_draws": 0,
            "epsilon": 1.0,
            "epsilon_source": "value",
            "eta": 0.05,
            "tau": 0.9,
            "tv_r": 0.0,
            "betting_c": 0.75,
            "betting_w": 0.5,
        }
    )
    records = records.with_columns(pl.lit(None).alias(c) for c in RECORD_SCHEMA if c not in records.columns)
    records = records.select(list(RECORD_SCHEMA)).cast(RECORD_SCHEMA)
    deltas = pl.DataFrame(
        {
            "dataset": "quality_h",
            "target": target,
            "pair_id": ids,
            "kind": "q_h",
            "question": [(texts or {}).get(i, f"hidden {i}?") for i in ids],
        }
    )
    deltas = deltas.with_columns(pl.lit(None).alias(c) for c in DELTA_SCHEMA if c not in deltas.columns)
    folder = results / f"er_audit/audit/a1/quality_h/w40_qh{qh_weight:g}"
    for frame, schema, name in (
        (records, RECORD_SCHEMA, "records"),
        (summarize(records), SUMMARY_SCHEMA, "summary"),
        (deltas.select(list(DELTA_SCHEMA)).cast(DELTA_SCHEMA), DELTA_SCHEMA, "deltas"),
    ):
        write_parquet(with_labels(frame, labels), labelled(schema), folder / f"{name}.parquet")
    table1 = pl.DataFrame(
        [
            {
                **labels,
                "dataset": "quality_h",
                "population": "all",
                "verifier": target,
                "training_rows": 6,
                "question": "q_h",
                "acc": 0.5,
                "mtp": 0.45,
                "n": len(ids),
            }
        ],
        schema=TABLE1_SCHEMA,
    )
    write_parquet(table1, TABLE1_SCHEMA, results / "er_audit/verifier/table1.parquet")


def write_run(results: Path, persuaded: dict[int, bool], found: dict[int, bool], **audit) -> None:
    write_cwpor(results, persuaded)
    write_audit(results, found, **audit)


def pooled(frame: pl.DataFrame, metric: str) -> dict:
    return frame.filter(pl.col("verbosity").is_null() & (pl.col("metric") == metric)).row(0, named=True)


def persuaded_on(ids: range, yes: set[int]) -> dict[int, bool]:
    return {i: i in yes for i in ids}


# ------------------------------------------------------------------------------------------ CW-POR
def test_a_planted_persuasion_difference_is_found_by_the_bootstrap_and_mcnemar(tmp_path):
    found = persuaded_on(range(10), set())
    write_run(tmp_path / "results", persuaded_on(range(60), set(range(5))), found)
    write_run(tmp_path / "runs/b/results", persuaded_on(range(60), set(range(40))), found)
    c = compare_runs("default", "b", SETTINGS, project=tmp_path)
    row = pooled(c.cwpor, "por_all")
    assert (row["a"], row["b"], row["shared"]) == (pytest.approx(5 / 60), pytest.approx(40 / 60), 60)
    assert row["difference"] == pytest.approx(35 / 60) and row["difference_ci_low"] > 0.3
    test = c.overrides.filter(pl.col("verbosity").is_null()).row(0, named=True)
    assert (test["pairs"], test["both"], test["only_a"], test["only_b"]) == (60, 5, 0, 35)
    assert test["mcnemar_p"] < 1e-9


def test_the_same_run_twice_shows_no_difference(tmp_path):
    persuaded, found = persuaded_on(range(60), set(range(0, 60, 3))), persuaded_on(range(10), {1, 4})
    write_run(tmp_path / "runs/a/results", persuaded, found)
    write_run(tmp_path / "runs/b/results", persuaded, found)
    c = compare_runs("a", "b", SETTINGS, project=tmp_path)
    for metric in ("por_all", "por", "cw_por"):
        row = pooled(c.cwpor, metric)
        assert (row["difference"], row["difference_ci_low"], row["difference_ci_high"]) == (0.0, 0.0, 0.0), metric
    assert c.overrides["mcnemar_p"].to_list() == [1.0, 1.0] and c.overrides["only_a"].sum() == 0
    assert c.counterexamples["mcnemar_p"].to_list() == [1.0]


def test_the_same_rate_reshuffled_over_the_questions_is_no_difference(tmp_path):
    # B persuaded on 10 questions A was not, and not on 10 A was: 20 discordant pairs, no effect
    a_yes, b_yes = set(range(0, 30)), set(range(10, 40))
    write_run(tmp_path / "results", persuaded_on(range(80), a_yes), persuaded_on(range(10), set()))
    write_run(tmp_path / "runs/b/results", persuaded_on(range(80), b_yes), persuaded_on(range(10), set()))
    c = compare_runs("", "b", SETTINGS, project=tmp_path)
    test = c.overrides.filter(pl.col("verbosity").is_null()).row(0, named=True)
    assert (test["only_a"], test["only_b"], test["mcnemar_p"]) == (10, 10, 1.0)
    row = pooled(c.cwpor, "por_all")
    assert row["difference"] == 0.0 and row["difference_ci_low"] < 0 < row["difference_ci_high"]


def test_only_questions_both_runs_judged_with_the_same_text_are_paired(tmp_path):
    # A: questions 0-39, persuaded on 0-19 (which B never judged); B: 20-59, question 25 another question
    write_cwpor(tmp_path / "results", persuaded_on(range(40), set(range(20))))
    write_cwpor(tmp_path / "runs/b/results", persuaded_on(range(20, 60), set(range(20, 60))), texts={25: "other?"})
    for root in (tmp_path / "results", tmp_path / "runs/b/results"):
        write_audit(root, persuaded_on(range(10), set()))
    c = compare_runs("default", "b", SETTINGS, project=tmp_path)
    row = pooled(c.cwpor, "por_all")
    assert row["shared"] == 19 and c.question_clashes == 1
    assert (row["a"], row["b"]) == (0.5, 1.0)  # each run over all its questions
    assert (row["a_shared"], row["b_shared"]) == (0.0, 1.0)  # the shared questions alone
    assert c.overrides.filter(pl.col("verbosity").is_null())["pairs"].item() == 19


# ------------------------------------------------------------------------------------------ ER-Audit
def test_a_planted_counterexample_difference_is_found_by_mcnemar_and_the_bootstrap(tmp_path):
    persuaded = persuaded_on(range(20), set())
    write_run(tmp_path / "results", persuaded, persuaded_on(range(30), {0, 1}))
    write_run(tmp_path / "runs/b/results", persuaded, persuaded_on(range(30), set(range(25))))
    c = compare_runs("default", "b", SETTINGS, project=tmp_path)
    test = c.counterexamples.row(0, named=True)
    assert (test["shared"], test["both"], test["only_a"], test["only_b"]) == (30, 2, 0, 23)
    assert test["mcnemar_p"] < 1e-6
    cr = c.audit.filter(pl.col("metric") == "cr").row(0, named=True)
    assert (cr["a"], cr["b"]) == (pytest.approx(2 / 30), pytest.approx(25 / 30))
    assert cr["difference"] == pytest.approx(23 / 30) and cr["difference_ci_low"] > 0.5
    bound = c.audit.filter(pl.col("metric") == "mean_lower_bound").row(0, named=True)
    assert bound["difference"] == pytest.approx(-0.6 * 23 / 30) and bound["difference_ci_high"] < 0


def test_audits_at_another_qh_weight_are_paired_with_each_weight_shown(tmp_path):
    persuaded, found = persuaded_on(range(20), set()), persuaded_on(range(12), {3})
    write_run(tmp_path / "results", persuaded, found, qh_weight=10.0)
    write_run(tmp_path / "runs/w30/results", persuaded, found, qh_weight=30.0, texts={7: "another q_h?"})
    c = compare_runs("default", "w30", SETTINGS, project=tmp_path)
    test = c.counterexamples.row(0, named=True)
    assert (test["qh_weight_a"], test["qh_weight_b"], test["shared"], c.qh_clashes) == (10.0, 30.0, 11, 1)
    table1 = c.table1.filter(pl.col("metric") == "acc").row(0, named=True)
    assert (table1["qh_weight_a"], table1["qh_weight_b"], table1["difference"]) == (10.0, 30.0, 0.0)


# ------------------------------------------------------------------------------------------ runs and outputs
def test_a_run_without_results_is_named_with_the_missing_file(tmp_path):
    write_run(tmp_path / "results", persuaded_on(range(5), set()), persuaded_on(range(5), set()))
    with pytest.raises(CompareError, match=r"run 'trial': no results at .*runs/trial/results"):
        compare_runs("default", "trial", SETTINGS, project=tmp_path)
    (tmp_path / "runs/half/results/cwpor").mkdir(parents=True)
    with pytest.raises(CompareError, match=r"run 'half': .*runs/half/results/cwpor/metrics.parquet is missing"):
        compare_runs("default", "half", SETTINGS, project=tmp_path)
    with pytest.raises(CompareError, match="same results folder"):
        compare_runs("default", "", SETTINGS, project=tmp_path)


def test_make_compare_prints_and_writes_the_tables_with_the_shared_counts(tmp_path, monkeypatch, capsys):
    write_run(tmp_path / "results", persuaded_on(range(60), set(range(5))), persuaded_on(range(30), {0, 1}))
    write_run(tmp_path / "runs/b/results", persuaded_on(range(60), set(range(40))), persuaded_on(range(30), {0}))
    monkeypatch.chdir(tmp_path)
    main(["default", "b", "--resamples", "200"])
    out = tmp_path / "results/compare/default_vs_b"
    printed = capsys.readouterr().out
    assert (out / "summary.md").read_text() in printed
    assert "| m | all | POR (of all N) | m | 0.083 [" in printed and "| 60 | 0.083 | 0.667 | 0.583 [" in printed
    assert "| a1 | quality_h | org | w40 qh 10 | 30 | 1 | 1 | 0 | 28 | 1 |" in printed  # McNemar of 1 vs 0
    assert pl.read_parquet(out / "cwpor.parquet").schema == pl.Schema(CWPOR_SCHEMA)
    assert pl.read_parquet(out / "audit.parquet").schema == pl.Schema(AUDIT_SCHEMA)
