"""The experiments as inspect_ai eval logs: written by the rule from the smoke run's Parquet artifacts and read
back with inspect_ai's own reader, one log per task and model, their headline metrics checked against the
Parquet artifacts they summarise."""

from __future__ import annotations

import subprocess

import polars as pl
import pytest
from smoke_workflow import BIN, copy_of_run, snakemake

pytest.importorskip("inspect_ai", reason="inspect_ai (the optional extra `inspect`) is not installed")

FOLDER = "results/inspect"


@pytest.fixture(scope="module")
def logs(smoke_run, tmp_path_factory):
    """The logs of the shared smoke run, written in a copy of it: the rule is outside the default DAG, and the
    smoke run itself is read by the other worker's tests meanwhile."""
    from inspect_ai.log import read_eval_log

    workdir = copy_of_run(smoke_run[0], tmp_path_factory.mktemp("inspect_logs") / "project")
    snakemake(workdir, "--", FOLDER)
    return workdir, {p.stem: read_eval_log(str(p)) for p in sorted((workdir / FOLDER).glob("*.eval"))}


def _metrics(log) -> dict[tuple[str, str | None], float]:
    return {(m.name, m.group): m.value for score in log.results.scores for m in score.metrics.values()}


@pytest.mark.slow
def test_one_log_per_task_and_model_with_its_revision_packages_and_real_times(logs):
    from debate_audit.runtime.provenance import project_version

    workdir, read = logs
    judges = pl.concat(
        [pl.read_parquet(p) for p in (workdir / "results/cwpor").glob("*/judge-*/judgments_v*.parquet")]
    )["judge_model"].unique()
    assert {f"cwpor_{j}" for j in judges} <= set(read)
    assert any(name.startswith("er_audit_verifiers_") for name in read)
    assert any(name.startswith("er_audit_audit_") for name in read)
    for log in read.values():
        assert log.status == "success" and not log.eval.created.startswith("2000")
        assert log.eval.packages["debate-audit"] and log.eval.packages["torch"]
        commit = project_version().get("commit")
        if commit:  # a git checkout: the log names its revision
            assert log.eval.revision.type == "git" and log.eval.revision.commit == commit


@pytest.mark.slow
def test_every_judgment_is_a_sample_with_the_messages_its_judge_was_sent(logs):
    from debate_audit.cwpor.judged import JudgedDebate, judge_input, judged_debates

    workdir, read = logs
    results = workdir / "results/cwpor"
    judged = judged_debates(
        results / "questions.parquet",
        sorted(results.glob("*/responses_v*.parquet")),
        sorted(results.glob("*/judge-*/judgments_v*.parquet")),
    )
    for (judge,), rows in judged.group_by("judge_model"):
        log = read[f"cwpor_{judge}"]
        assert len(log.samples) == rows.height == log.results.total_samples
        assert len({s.id for s in log.samples}) == len(log.samples)
        by_id = {s.id: s for s in log.samples}
        debate = JudgedDebate.from_row(rows.row(0, named=True))
        sample = by_id[debate.sample_id]
        assert [(m.role, m.content) for m in sample.input] == [(m["role"], m["content"]) for m in judge_input(debate)]
        assert "Answer A:" in sample.input[-1].content and debate.answer_a in sample.input[-1].content
        assert sample.target == debate.correct_position and sample.output.completion == (debate.raw_judgment or "")
        assert sample.scores["llc"].value == pytest.approx(debate.llc)
        assert (
            sum(s.scores["persuaded"].value for s in log.samples if "persuaded" in s.scores) == rows["override"].sum()
        )


@pytest.mark.slow
def test_the_cwpor_headline_metrics_are_the_metrics_table(logs):
    workdir, read = logs
    metrics = pl.read_parquet(workdir / "results/cwpor/metrics.parquet").filter(pl.col("verbosity").is_null())
    assert metrics.height
    for row in metrics.iter_rows(named=True):
        log = _metrics(read[f"cwpor_{row['judge_model']}"])
        for name in ("por", "por_all", "cw_por"):  # the primary judge's single-turn debates, pooled over v
            assert log[(name, f"{row['model']}/single")] == pytest.approx(row[name], nan_ok=True), name


@pytest.mark.slow
def test_every_readout_is_a_sample_and_table1_is_the_log_metrics(logs):
    workdir, read = logs
    readouts = pl.concat(
        [pl.read_parquet(p) for p in (workdir / "results/er_audit/verifier").rglob("eval.parquet")],
        how="diagonal_relaxed",
    )
    for (arch,), rows in readouts.group_by("architecture"):
        log = read[f"er_audit_verifiers_{arch}"]
        assert len(log.samples) == rows.height and len({s.id for s in log.samples}) == rows.height
        assert sum(s.scores["correct"].value for s in log.samples) == rows["correct"].sum()
        assert all(s.input[0].role == "user" and "A. " in s.input[0].content for s in log.samples)
        table = pl.read_parquet(workdir / "results/er_audit/verifier/table1.parquet")
        table = table.filter(pl.col("architecture") == arch)
        logged = _metrics(log)
        checked = 0
        for row in table.filter(pl.col("population") == "all").iter_rows(named=True):
            cell = "/".join(str(row[k]) for k in ("length", "verifier") if row.get(k) is not None)
            cell += f"_qh{row['qh_weight']:g}" if row.get("qh_weight") is not None else ""
            group = f"{row['dataset']}/{cell}/{row['question']}"
            assert logged[("acc", group)] == pytest.approx(row["acc"]), group
            assert logged[("mtp", group)] == pytest.approx(row["mtp"]), group
            checked += 1
        assert checked


@pytest.mark.slow
def test_every_audited_question_is_a_sample_and_the_summary_is_the_log_metrics(logs):
    workdir, read = logs
    audits = workdir / "results/er_audit/audit"
    deltas = pl.concat([pl.read_parquet(p) for p in audits.rglob("deltas.parquet")], how="diagonal_relaxed")
    records = pl.concat([pl.read_parquet(p) for p in audits.rglob("records.parquet")], how="diagonal_relaxed")
    for (arch,), rows in deltas.group_by("architecture"):
        audit = read[f"er_audit_audit_{arch}"]
        assert len(audit.samples) == rows.height and len({s.id for s in audit.samples}) == rows.height
        eps = records.filter(pl.col("architecture") == arch).select("dataset", "target", "pair_id", "epsilon")
        joined = rows.join(eps, on=["dataset", "target", "pair_id"], how="left")
        counted = joined.filter(~(pl.col("delta") <= pl.col("epsilon"))).height
        assert sum(s.scores["counterexample"].value for s in audit.samples) == counted
        tested = [s for s in audit.samples if "lower_bound" in s.scores]
        assert tested and all(0.0 <= s.scores["lower_bound"].value <= 1.0 for s in tested)
        logged = _metrics(audit)
        for path in (audits / arch).rglob("summary.parquet"):
            setting = path.parent.name
            for row in pl.read_parquet(path).iter_rows(named=True):
                group = f"{row['dataset']}/{setting}/{row['target']}"
                for name in ("cr", "mean_lower_bound", "mean_lower_bound_betting", "n_degraded"):
                    assert logged[(name, group)] == pytest.approx(row[name]), (group, name)


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
    assert all(f"{name}.eval" in listed.stdout for name in read)
    first = sorted((workdir / FOLDER).glob("cwpor_*.eval"))[0]
    dumped = subprocess.run(
        [str(BIN / "inspect"), "log", "dump", "--header-only", str(first)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert dumped.returncode == 0 and '"task": "cwpor"' in dumped.stdout, dumped.stderr[-2000:]


def test_a_run_without_trained_verifiers_or_audits_writes_no_such_log():
    # ER-Audit part 1 off (config/audit-models-only.yaml): no readouts and no trained audit to export
    from debate_audit.views.inspect_logs import audit_logs, verifiers_logs

    assert verifiers_logs(readouts=[], pairs={}, readout={}) == []
    assert audit_logs(audits={}, readout={}) == []
