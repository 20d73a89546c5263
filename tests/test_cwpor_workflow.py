"""CW-POR through Snakemake on the smoke overlay.

The coverage check reads the session's smoke run (tests/conftest.py, `smoke_run`), which runs CW-POR with the
same overlay; the rerun check works on a copy of that run's state (its results and Snakemake's records), so
changing only the judge template is seen to plan and rerun only the judge and what follows, with the debates
left as they were.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
import yaml
from helpers import run_snakemake, venv_env

pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))
CWPOR_RULES = [
    "cwpor_questions",
    "cwpor_debate",
    "cwpor_judge",
    "cwpor_metrics",
    "cwpor_tables",
    "cwpor_figures",
    "cwpor_calibration",
    "cwpor_reliability",
]
TARGETS = [
    "results/cwpor/metrics.parquet",
    "results/cwpor/tables/summary.md",
    "results/cwpor/tables/fig3_examples.md",
    "results/cwpor/figures/fig2_category.png",
    "results/cwpor/figures/fig6_confidence.png",
    "results/cwpor/tables/calibration.md",
    "results/cwpor/figures/reliability_llc.png",
]


@pytest.fixture(scope="module")
def workdir(tmp_path_factory, smoke_run):
    """A copy of the finished smoke run (times kept, Snakemake's metadata included; the model linked)."""
    from smoke_workflow import copy_of_run

    return copy_of_run(smoke_run[0], tmp_path_factory.mktemp("cwpor_workflow") / "project")


def snakemake(
    work: Path, *args: str, overlay: dict | None = None, targets: list[str] = TARGETS
) -> subprocess.CompletedProcess:
    (work / "overlay.yaml").write_text(yaml.safe_dump(overlay or {}))
    cmd = [
        SNAKEMAKE,
        "--cores",
        "2",
        "--resources",
        "gpu=1",
        "--configfile",
        "config/config.yaml",
        "tests/smoke/config.yaml",
        "overlay.yaml",
        # nothing outside the stage may run here
        "--allowed-rules",
        "prepare_truthfulqa",
        *CWPOR_RULES,
        *args,
        "--",
        *targets,
    ]
    return subprocess.run(cmd, cwd=work, capture_output=True, text=True, env=venv_env(), timeout=900)


def planned_rules(result: subprocess.CompletedProcess) -> set[str]:
    return {
        line.split()[0]
        for line in (result.stdout + result.stderr).splitlines()
        if line.split() and line.split()[0] in CWPOR_RULES
    }


def test_smoke_run_covers_every_question_and_verbosity(smoke_run):
    work, _ = smoke_run
    smoke = yaml.safe_load((REPO / "tests/smoke/config.yaml").read_text())["cwpor"]
    questions = pl.read_parquet(work / "results/cwpor/questions.parquet")
    assert len(questions) == smoke["subset"]
    for v in smoke["verbosity"]:
        responses = pl.read_parquet(work / f"results/cwpor/smollm2-135m/responses_v{v}.parquet")
        judgments = pl.read_parquet(work / f"results/cwpor/smollm2-135m/judge-smollm2-135m/judgments_v{v}.parquet")
        assert sorted(responses.select("question_id", "role").rows()) == sorted(
            (q, role) for q in questions["question_id"] for role in ("neutral", "persuasive")
        )
        assert sorted(judgments["question_id"]) == sorted(questions["question_id"])
    metrics = pl.read_parquet(work / "results/cwpor/metrics.parquet")
    assert metrics["verbosity"].to_list() == [None, *smoke["verbosity"]]
    for target in TARGETS:
        assert (work / target).stat().st_size > 0


def test_changing_only_the_judge_template_reruns_only_judge_and_downstream(workdir):
    unchanged = snakemake(workdir, "--dry-run", "--quiet", "rules")
    assert unchanged.returncode == 0, unchanged.stderr[-2000:]
    assert planned_rules(unchanged) == set()

    overlay = {"cwpor": {"judge_template": "v1-skeptical"}}
    plan = snakemake(workdir, "--dry-run", "--quiet", "rules", overlay=overlay)
    assert plan.returncode == 0, plan.stderr[-2000:]
    assert planned_rules(plan) == {
        "cwpor_judge",
        "cwpor_metrics",
        "cwpor_tables",
        "cwpor_figures",
        "cwpor_calibration",
        "cwpor_reliability",
    }

    responses = workdir / "results/cwpor/smollm2-135m/responses_v20.parquet"
    before = responses.stat().st_mtime_ns
    rerun = snakemake(workdir, overlay=overlay)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert responses.stat().st_mtime_ns == before
    judged = pl.read_parquet(workdir / "results/cwpor/smollm2-135m/judge-smollm2-135m/judgments_v20.parquet")
    assert judged["template"].str.starts_with("v1-skeptical:").all()


def test_paper_rehearsal_judgments_carry_no_example(tmp_path, embedded_model_dir, shared_data):
    """The paper overlay's judge, run on its rehearsal (a random Llama stand-in, real TruthfulQA): the
    judgments record the `paper` template and no example reply (issue 23 item 1)."""
    root = tmp_path / "root"
    work = root / "work"
    (work / "data").mkdir(parents=True)
    (root / "shared").symlink_to(shared_data.parent)  # the overlays read ../shared/data
    for name in ("config", "tests"):
        (work / name).symlink_to(REPO / name)
    (work / "data" / "demo").symlink_to(REPO / "data" / "demo")
    (work / "resources" / "models").mkdir(parents=True)
    (work / "resources" / "models" / embedded_model_dir.name).symlink_to(embedded_model_dir)
    (work / "overlay.yaml").write_text(yaml.safe_dump({"cache": str(work / "cache"), "cwpor": {"verbosity": [30]}}))
    target = "results/cwpor/llama-3.2-3b-instruct/judge-llama-3.2-3b-instruct/judgments_v30.parquet"
    args = [
        "-s",
        str(REPO / "Snakefile"),
        "-d",
        str(work),
        "--cores",
        "2",
        "--resources",
        "gpu=1",
        "--configfile",
        "config/config.yaml",
        "config/paper.yaml",
        "config/rehearsal.yaml",
        "overlay.yaml",
        "--allowed-rules",
        "prepare_truthfulqa",
        "prepare_model",
        "cwpor_questions",
        "cwpor_debate",
        "cwpor_judge",
        "--",
        target,
    ]
    run_snakemake(work, *args, env=venv_env(HF_HUB_OFFLINE="1"), timeout=900)
    judged = pl.read_parquet(work / target)
    assert judged["template"].str.starts_with("paper:").all()
    assert judged["example_choice"].is_null().all() and judged["example_confidence"].is_null().all()
    assert judged["protocol"].unique().to_list() == ["single"]


def test_one_job_per_model_writes_each_word_limit_s_files_as_one_job_per_word_limit(smoke_run, tmp_path):
    """cwpor.job_split: a model's word limits debated and judged in one job (its engine started once) write the
    files one job per word limit writes, cell for cell, computed afresh (another call cache)."""
    from smoke_workflow import copy_of_run

    work = copy_of_run(smoke_run[0], tmp_path / "project")
    files = [
        f"results/cwpor/smollm2-135m/{kind}_v{v}.parquet"
        for v in (12, 20)
        for kind in ("responses", "judge-smollm2-135m/judgments")
    ]
    # two questions, short judgments: the check is the files' identity, not their content
    small = {"subset": 2, "verbosity": [20, 12], "judge_max_new_tokens": 12}
    apart = {"cwpor": {**small, "job_split": "word_limit"}}
    first = snakemake(work, overlay=apart, targets=files)
    assert first.returncode == 0, first.stderr[-3000:]
    assert planned_rules(first) >= {"cwpor_debate", "cwpor_judge"}
    expected = {f: pl.read_parquet(work / f) for f in files}
    together = {"cwpor": {**small, "job_split": "model"}, "cache": "results/cache/per_model"}
    plan = snakemake(work, "--dry-run", "--quiet", "rules", overlay=together, targets=files)
    counts = {line.split()[0]: int(line.split()[1]) for line in plan.stdout.splitlines() if line.startswith("cwpor_")}
    assert counts["cwpor_debate"] == counts["cwpor_judge"] == 1, plan.stdout
    second = snakemake(work, overlay=together, targets=files)
    assert second.returncode == 0, second.stderr[-3000:]
    for f in files:
        assert pl.read_parquet(work / f).equals(expected[f]), f
    log = (work / "logs/cwpor/judge/smollm2-135m_judge-smollm2-135m.log").read_text()
    assert "v=12 judged" in log and "v=20 judged" in log
    # computed again, into the other cache, not read from the first run's
    assert any(p.is_file() for p in (work / "results/cache/per_model").rglob("*"))
