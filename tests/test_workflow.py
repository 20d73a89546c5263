"""The workflow end to end on the smoke overlay, in a scratch copy of the project."""

from __future__ import annotations

import subprocess

import polars as pl
import pytest
from smoke_workflow import BIN, REPO, snakemake

# smoke_run (tests/conftest.py): one local smoke run per session, shared with tests/test_slurm.py.


@pytest.mark.slow
def test_smoke_run_writes_every_dataset_with_its_rejected_rows(smoke_run):
    workdir, _ = smoke_run
    for name in ("truthfulqa", "quality_h", "gpqa_h"):
        assert pl.read_parquet(workdir / f"data/{name}.parquet").height > 0
        assert (workdir / f"data/{name}.rejected.parquet").exists()
        assert (workdir / f"logs/data/prepare_{name}.log").read_text().strip()


@pytest.mark.slow
def test_smoke_run_reaches_every_experiment_final_output(smoke_run):
    workdir, _ = smoke_run
    assert pl.read_parquet(workdir / "results/cwpor/metrics.parquet").height > 0
    table1 = pl.read_parquet(workdir / "results/er_audit/table1.parquet")
    assert set(table1["verifier"]) == {"base", "honest", "adv", "org"}
    assert set(table1["dataset"]) == {"quality_h", "gpqa_h"}
    assert "## Counterexample ratio, statuses and average lower bound" in (workdir / "results/audit/summary.md").read_text()
    for variant in ("honest", "adv", "org"):
        assert (workdir / f"resources/verifiers/quality_h/{variant}/fingerprint.json").exists()


@pytest.mark.slow
def test_second_run_has_nothing_to_do(smoke_run):
    workdir, _ = smoke_run
    again = snakemake(workdir)
    assert "Nothing to be done" in again.stdout + again.stderr


@pytest.mark.slow
def test_every_target_of_rule_all_exists(smoke_run):
    workdir, _ = smoke_run
    summary = snakemake(workdir, "--summary").stdout
    rows = [line.split("\t") for line in summary.splitlines()[1:] if "\t" in line]
    assert rows, summary
    missing = [row[0] for row in rows if row[-2:] != [] and "missing" in row]
    assert not missing, missing


def test_lint_is_clean():
    result = subprocess.run([str(BIN / "snakemake"), "--lint"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Lints for" not in result.stdout + result.stderr, result.stdout + result.stderr


def test_snakefmt_is_clean():
    result = subprocess.run([str(BIN / "snakefmt"), "--check", "Snakefile", "rules"], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
