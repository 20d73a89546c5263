"""The workflow end to end on the smoke overlay, in a scratch copy of the project."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

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
    table1 = pl.read_parquet(workdir / "results/er_audit/verifier/table1.parquet")
    assert set(table1["verifier"]) == {"base", "honest", "adv", "org"}
    assert set(table1["dataset"]) == {"quality_h", "gpqa_h"}
    # the paper's population (every prepared pair), the train and the eval split, each with its own n
    pairs = {d: pl.read_parquet(workdir / f"data/{d}.parquet").height for d in ("quality_h", "gpqa_h")}
    all_n = dict(table1.filter(pl.col("population") == "all").group_by("dataset").agg(pl.col("n").max()).iter_rows())
    assert all_n == pairs
    assert set(table1["population"]) == {"all", "train", "eval"}
    assert (
        "## Counterexample ratio, statuses and average lower bound"
        in (workdir / "results/er_audit/audit/summary.md").read_text()
    )
    for variant in ("honest", "adv", "org_qh10"):
        assert (workdir / f"resources/verifiers/smollm2-135m/quality_h/w20/{variant}/fingerprint.json").exists()


@pytest.mark.slow
def test_model_bound_outputs_record_the_run_that_wrote_them(smoke_run):
    import json

    from debate_audit.runtime.provenance import project_version, read_provenance

    workdir, _ = smoke_run
    judgments = sorted((workdir / "results/cwpor").glob("*/judge-*/judgments_v*.parquet"))
    assert judgments
    found = read_provenance(judgments[0])
    assert found["rule"] == "cwpor_judge"
    assert found["version"] == project_version()  # the commit (and dirty flag) when run from a checkout
    assert found["wildcards"]["model"] == judgments[0].parent.parent.name
    assert found["wildcards"]["judge"] == judgments[0].parent.name.removeprefix("judge-")
    judge = found["params"]["judge"]
    # the judge template by name, and the code that ran: the one rerun mechanism's fingerprint (rules/stage_inputs.smk)
    assert found["params"]["template"] == "v4" and found["params"]["library"] and judge["api_key_env"] is None
    weights = json.loads((workdir / judge["directory"] / "fingerprint.json").read_text())["weights_sha256"]
    (model,) = found["models"]
    assert {k: model[k] for k in ("name", "directory", "weights_sha256")} == {
        "name": judge["name"],
        "directory": judge["directory"],
        "weights_sha256": weights,
    }
    # which engine wrote the judge's generations (one per question and reply slot): the in-process loop
    (engine,) = model["generations"]
    assert engine.startswith("in-process transformers") and model["generations"][engine] % 6 == 0
    # a fine-tuned verifier is recorded with the base weights it was trained from
    honest = next(workdir.glob("results/er_audit/verifier/*/*/*/honest/eval.parquet"))
    (verifier,) = read_provenance(honest)["models"]
    assert verifier["base_weights_sha256"] == weights and verifier["weights_sha256"] != weights
    figure = next((workdir / "results/cwpor/figures").glob("*.png"))
    assert read_provenance(figure)["rule"] == "cwpor_figures"


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


def undeclared_files(workdir: Path, listing: str) -> list[str]:
    """Files the run wrote under results/, logs/ and resources/ that no rule declares (from the output of
    `snakemake --list-untracked`, which walks the folder and subtracts every job's inputs, outputs and logs).
    By design not declared: the model-call cache (config `cache`, written by every model job: a shared
    store, not one rule's output), the files of a model folder, whose declared handle is the
    fingerprint.json beside them (written last, after the weights), and the run's configuration
    (results/config.yaml, results/runs/: written by the Snakefile's onstart handler, no rule's output)."""
    files = []
    for line in listing.splitlines():
        path = workdir / line
        if not line.startswith(("results/", "logs/", "resources/")) or line.startswith(
            ("results/cache/", "results/runs/")
        ):
            continue
        if line == "results/config.yaml":
            continue
        if (path.parent / "fingerprint.json").is_file() and path.name != "fingerprint.json":
            continue
        files.append(line)
    return files


@pytest.mark.slow
def test_every_file_the_run_wrote_is_declared_by_a_rule(smoke_run):
    workdir, _ = smoke_run
    probe = workdir / "results/er_audit/audit/undeclared_probe.txt"  # shows the check sees an undeclared file
    probe.write_text("not an output of any rule\n")
    try:
        listing = snakemake(workdir, "--list-untracked").stdout
    finally:
        probe.unlink()
    assert undeclared_files(workdir, listing) == ["results/er_audit/audit/undeclared_probe.txt"], listing


def test_lint_is_clean_but_for_the_software_definition():
    # The rules declare no conda environment on purpose (tests/lint_workflow.py says why); any other lint fails.
    from lint_workflow import other_lints

    lints, output = other_lints()
    assert lints == [], output


def test_snakefmt_is_clean():
    result = subprocess.run(
        [str(BIN / "snakefmt"), "--check", "Snakefile", "rules"], cwd=REPO, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["ruff-check", "ruff-format"])
def test_ruff_is_clean(command):
    # what `make lint` (pre-commit's hooks) checks besides the rules, here so that CI runs it too
    result = subprocess.run([str(BIN / "ruff"), *command, "."], cwd=REPO, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_snakemake_start_up_imports_no_torch():
    # Every start-up (a dry run, each job of a cluster run) parses the rule files and plans the jobs; importing
    # torch would add ~1.7 s to each, so the ids the rules take from the verifier library come from its
    # torch-free module (eraudit/verifier/training_rows.py).
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "snakemake", "-n", "--quiet", "rules"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    timings = [line for line in result.stderr.splitlines() if line.startswith("import time:")]
    assert "torch" not in {line.rsplit("|", 1)[-1].strip() for line in timings}


# The report and the results browser of the smoke run (issue 14); the browser checks live in test_browser.py.
from test_browser import browser, check_planted_reply_in_smoke_results, check_smoke_page  # noqa: E402, F401


@pytest.mark.slow
def test_report_of_the_smoke_run_holds_every_figure_and_table(smoke_run, tmp_path):
    import hashlib
    import zipfile

    workdir, _ = smoke_run
    out = tmp_path / "report.zip"
    snakemake(workdir, "--report", str(out))
    with zipfile.ZipFile(out) as archive:
        names = archive.namelist()
        held = {hashlib.sha256(archive.read(n)).hexdigest() for n in names}
    assert "report/report.html" in names
    results = workdir / "results"
    expected = sorted(results.rglob("*.png")) + [
        results / p
        for p in (
            "cwpor/tables/summary.csv",
            "cwpor/tables/fig3_examples.md",
            "er_audit/verifier/table1.csv",
            "er_audit/audit/summary.csv",
            "er_audit/audit/table3_runtime.csv",
            "er_audit/audit/table3_gpu_seconds.csv",
            "browse/index.html",
        )
    ]
    assert len(expected) >= 10 + 6
    missing = [str(p.relative_to(workdir)) for p in expected if hashlib.sha256(p.read_bytes()).hexdigest() not in held]
    assert not missing, f"not in the report: {missing}"


@pytest.mark.slow
def test_browser_page_of_the_smoke_run_in_chromium(smoke_run, browser, tmp_path):  # noqa: F811 (the fixture)
    workdir, _ = smoke_run
    check_smoke_page(browser, workdir, tmp_path)
    check_planted_reply_in_smoke_results(browser, workdir, tmp_path)
