"""Switching `verifier.readout` reruns exactly the rules that read (and what depends on them).

A scratch copy of the workflow (as tests/test_overlays.py makes) gets the provenance of a finished smoke
run without running anything: `snakemake --touch` from nothing records every job's metadata (params
included), then every output and benchmark file is created with one common mtime. A dry run that then
switches the readout must plan the four reading rules, their descendants, and nothing upstream (the
debates, the paraphrase pools, CW-POR).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from helpers import offline_snakemake, run_snakemake
from smoke_workflow import job_stats, project_copy

REPO = Path(__file__).resolve().parents[3]
CONFIGS = ["--configfile", "config/config.yaml", "tests/smoke/config.yaml"]
READERS = {"debate_select", "verifier_finetune", "verifier_evaluate", "audit_scores"}
# 2 datasets: 2 debate modes, 3 fine-tuned variants, 4 checkpoints evaluated and audited, and V_base's copy
# (the audit's null) audited too; copying it reads nothing. The adjudication targets do not read, but they
# follow the transcripts that selection re-selects
EXPECTED = {
    "debate_select": 4,
    "verifier_adjudicate": 4,
    "verifier_finetune": 6,
    "verifier_evaluate": 8,
    "audit_scores": 10,
    "verifier_loss_figure": 2,
    "verifier_table1": 1,
    "audit_statistics": 2,
    "audit_sweeps": 2,
    "audit_power": 2,
    "audit_figures": 1,
    "audit_runtime": 1,
    "browse": 1,
    "all": 1,
}


@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> Path:
    """A scratch workflow copy that looks like a finished smoke run with the default readout."""
    workdir = project_copy(tmp_path_factory.mktemp("readout"))
    plan = offline_snakemake(workdir, "-n", *CONFIGS)
    offline_snakemake(workdir, "--touch", "-c1", *CONFIGS)  # records each job's params; touches nothing yet
    paths = set()
    for line in plan.splitlines():
        match = re.match(r"\s+(output|benchmark): (.+)", line)
        if match:
            paths.update(p.strip() for p in match[2].split(","))
    for path in paths:
        (workdir / path).parent.mkdir(parents=True, exist_ok=True)
        (workdir / path).touch()
        os.utime(workdir / path, (1.7e9, 1.7e9))  # one mtime: only params can trigger
    assert job_stats(offline_snakemake(workdir, "-n", "--rerun-triggers", "params", *CONFIGS)) == {}
    return workdir


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["plain", "chat"])
def test_switching_readout_reruns_exactly_the_reading_rules_and_descendants(finished, mode):
    overlay = finished / f"readout-{mode}.yaml"
    overlay.write_text(f"verifier:\n  readout: {mode}\n")
    output = offline_snakemake(finished, "-n", "--rerun-triggers", "params", *CONFIGS, overlay.name)
    assert job_stats(output) == EXPECTED
    changed = re.search(r"params have changed since last execution:\n\s+(.+)", output)
    assert changed and READERS - {"verifier_finetune"} <= set(changed[1].split(", ")) <= READERS


def _edited_library(tmp_path: Path, module: str, old: str, new: str) -> dict[str, str]:
    """PYTHONPATH of a copy of the library with one edit in `module`."""
    src = tmp_path / "src"
    shutil.copytree(REPO / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    path = src / "debate_audit" / module
    text = path.read_text()
    assert old in text
    path.write_text(text.replace(old, new, 1))
    return {"PYTHONPATH": str(src)}


def _dry_run_with(workdir: Path, env_extra: dict[str, str]) -> set[str]:
    env = {**os.environ, **env_extra, "HF_HUB_OFFLINE": "1"}
    output = run_snakemake(workdir, "-n", "--rerun-triggers", "params", *CONFIGS, env=env)
    return set(job_stats(output)) - {"all"}


@pytest.mark.slow
def test_an_er_debate_prompt_edit_in_the_library_reruns_the_debates_and_what_follows(finished, tmp_path):
    rerun = _dry_run_with(
        finished, _edited_library(tmp_path, "eraudit/debate/debates.py", "You are Debater", "You are debater")
    )
    assert {"debate_generate", "debate_select", "verifier_finetune", "audit_scores", "audit_statistics"} <= rerun
    assert not {r for r in rerun if r.startswith(("cwpor", "prepare", "paraphrase"))} | ({"debate_split"} & rerun)


@pytest.mark.slow
def test_a_judge_prompt_edit_in_the_library_reruns_cwpor_only(finished, tmp_path):
    rerun = _dry_run_with(finished, _edited_library(tmp_path, "cwpor/prompts.py", "judge", "Judge"))
    # prompts.py holds the debate and the judge templates; Table 3 (audit_runtime) reads every model job's
    # benchmark file, CW-POR's included, so it follows too.
    assert {"cwpor_debate", "cwpor_judge", "cwpor_metrics", "cwpor_figures", "browse", "audit_runtime"} <= rerun
    assert not {
        r for r in rerun - {"audit_runtime"} if r.startswith(("debate", "verifier", "audit", "paraphrase", "prepare"))
    }


@pytest.mark.slow
def test_an_unchanged_library_copy_reruns_nothing(finished, tmp_path):
    assert _dry_run_with(finished, _edited_library(tmp_path, "cwpor/prompts.py", "", "")) == set()
