"""Named runs (config `run`): a named run plans everything that depends on its configuration under
runs/<run>/ and nothing under results/; unnamed, the paths are today's. Two dry runs of the default config
in a scratch copy (~15 s together); the config check of the name is in test_bad_inputs.py."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from helpers import run_snakemake
from smoke_workflow import job_stats, project_copy

from debate_audit.runtime.runs import results_dir, run_root

REPO = Path(__file__).resolve().parents[1]
# what every run shares: the prepared models, with prepare_model's log and benchmark
SHARED = re.compile(r"resources/models/|logs/models/prepare_|benchmarks/rules/models/prepare_")


def test_the_unnamed_run_keeps_todays_paths_and_a_named_one_moves_under_runs():
    assert (run_root(None), results_dir("default"), results_dir("")) == ("", Path("results"), Path("results"))
    assert (run_root("lr3x"), results_dir("lr3x")) == ("runs/lr3x/", Path("runs/lr3x/results"))
    with pytest.raises(ValueError, match="run: '..' is a path"):
        run_root("..")


def planned(workdir: Path, *args: str) -> tuple[dict[str, int], set[str], set[str]]:
    """A dry run's jobs per rule, the paths its jobs write (outputs, logs, benchmarks) and those they read."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    text = run_snakemake(workdir, "-n", "--cores", "1", *args, env=env)
    fields = {
        key: {p for line in re.findall(rf"^\s+{key}: (.+)$", text, re.M) for p in line.split(", ")}
        for key in ("input", "output", "log", "benchmark")
    }
    return job_stats(text), fields["output"] | fields["log"] | fields["benchmark"], fields["input"]


@pytest.fixture(scope="module")
def dry_runs(tmp_path_factory):
    workdir = project_copy(tmp_path_factory.mktemp("runs"))
    return planned(workdir), planned(workdir, "--config", "run=trial")


def test_a_named_run_plans_every_output_under_its_folder_and_none_under_results(dry_runs):
    (jobs, written, read), (named_jobs, named_written, named_read) = dry_runs
    assert named_jobs == jobs and jobs["verifier_finetune"] > 0  # the same jobs, elsewhere
    moved = {p for p in written if not SHARED.match(p)}
    assert named_written == {f"runs/trial/{p}" for p in moved} | (written - moved)
    assert {p.split("/")[0] for p in named_written if not SHARED.match(p)} == {"runs"}
    # inputs: this run's files, the shared models and the configured dataset files
    assert {p for p in named_read if not p.startswith("runs/trial/")} == {
        p for p in read if SHARED.match(p) or p.startswith("data/demo/")
    }


def test_the_unnamed_run_plans_todays_paths(dry_runs):
    (_, written, _), _ = dry_runs
    assert not any(p.startswith("runs/") for p in written)
    for path in (
        "results/cwpor/metrics.parquet",
        "results/browse/index.html",
        "data/quality_h.parquet",
        "logs/cwpor/metrics.log",
        "benchmarks/rules/cwpor/judge/smollm2-135m_judge-smollm2-135m_v30.tsv",
        "resources/verifiers/smollm2-135m/quality_h/w40/org_qh10/fingerprint.json",
        "resources/models/smollm2-135m/fingerprint.json",
    ):
        assert path in written, path
