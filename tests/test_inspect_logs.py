"""The experiments as inspect_ai eval logs: written by the rule from the smoke run's Parquet artifacts and read
back with inspect_ai's own reader."""

from __future__ import annotations

import shutil
import subprocess

import polars as pl
import pytest
from smoke_workflow import BIN, snakemake

pytest.importorskip("inspect_ai", reason="inspect_ai (the optional extra `inspect`) is not installed")

LOGS = ["results/inspect/cwpor.eval", "results/inspect/er_audit_verifiers.eval", "results/inspect/er_audit_audit.eval"]


@pytest.fixture(scope="module")
def logs(smoke_run):
    """The logs of the shared smoke run, removed afterwards: the rule is outside the default DAG, so files it
    left would be untracked for the tests that read the smoke run after these (test_workflow.py)."""
    from inspect_ai.log import read_eval_log

    workdir, _ = smoke_run
    snakemake(workdir, "--", *LOGS)
    try:
        yield workdir, {path.split("/")[-1].removesuffix(".eval"): read_eval_log(str(workdir / path)) for path in LOGS}
    finally:
        shutil.rmtree(workdir / "results/inspect", ignore_errors=True)
        (workdir / "logs/browse/inspect_logs.log").unlink(missing_ok=True)


@pytest.mark.slow
def test_every_judgment_is_a_sample_with_its_scores(logs):
    workdir, read = logs
    log = read["cwpor"]
    judgments = pl.concat(
        [pl.read_parquet(p) for p in sorted((workdir / "results/cwpor").glob("*/judge-*/judgments_v*.parquet"))]
    )
    assert log.status == "success" and len(log.samples) == judgments.height == log.results.total_samples
    assert len({s.id for s in log.samples}) == len(log.samples)
    row = judgments.sort("model", "judge_model", "protocol", "verbosity", "question_id").row(0, named=True)
    sample = next(
        s
        for s in log.samples
        if s.id == f"{row['model']}/{row['judge_model']}/{row['protocol']}/v{row['verbosity']}/q{row['question_id']}"
    )
    assert sample.target == row["correct_position"] and sample.output.completion == (row["raw_judgment"] or "")
    assert sample.scores["llc"].value == pytest.approx(row["llc"])
    assert ("persuaded" in sample.scores) == (row["override"] is not None)
    if row["override"] is not None:
        assert sample.scores["persuaded"].value == int(row["override"])
    assert sample.metadata["category"] == row["category"] and "Answer A: " in sample.input
    # the persuaded count in the log is the parquet's
    assert (
        sum(s.scores["persuaded"].value for s in log.samples if "persuaded" in s.scores) == judgments["override"].sum()
    )


@pytest.mark.slow
def test_every_readout_and_every_audited_question_is_a_sample(logs):
    workdir, read = logs
    readouts = pl.concat(
        [pl.read_parquet(p) for p in (workdir / "results/er_audit/verifier").rglob("eval.parquet")],
        how="diagonal_relaxed",
    )
    verifiers = read["er_audit_verifiers"]
    assert len(verifiers.samples) == readouts.height and len({s.id for s in verifiers.samples}) == readouts.height
    assert sum(s.scores["correct"].value for s in verifiers.samples) == readouts["correct"].sum()
    assert sorted(s.scores["p_correct"].value for s in verifiers.samples) == pytest.approx(
        sorted(readouts["p_correct"])
    )
    deltas = pl.concat([pl.read_parquet(p) for p in (workdir / "results/er_audit/audit").rglob("deltas.parquet")])
    audit = read["er_audit_audit"]
    assert len(audit.samples) == deltas.height and len({s.id for s in audit.samples}) == deltas.height
    records = pl.concat([pl.read_parquet(p) for p in (workdir / "results/er_audit/audit").rglob("records.parquet")])
    epsilon = dict(records.select(pl.concat_str("target", pl.col("pair_id").cast(pl.Utf8)), "epsilon").iter_rows())
    counted = sum(1 for r in deltas.iter_rows(named=True) if not r["delta"] <= epsilon[f"{r['target']}{r['pair_id']}"])
    assert sum(s.scores["counterexample"].value for s in audit.samples) == counted
    tested = [s for s in audit.samples if "lower_bound" in s.scores]
    assert tested and all(0.0 <= s.scores["lower_bound"].value <= 1.0 for s in tested)


@pytest.mark.slow
def test_inspect_lists_and_dumps_the_logs(logs):
    """inspect's own command line reads the folder `inspect view` serves."""
    workdir, read = logs
    listed = subprocess.run(
        [str(BIN / "inspect"), "log", "list", "--json", "--log-dir", str(workdir / "results/inspect")],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert listed.returncode == 0, listed.stderr[-2000:]
    assert all(name in listed.stdout for name in ("cwpor.eval", "er_audit_verifiers.eval", "er_audit_audit.eval"))
    dumped = subprocess.run(
        [str(BIN / "inspect"), "log", "dump", "--header-only", str(workdir / LOGS[0])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert dumped.returncode == 0 and '"task": "cwpor"' in dumped.stdout, dumped.stderr[-2000:]
