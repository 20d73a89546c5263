"""Every shipped overlay validates and dry-runs, with the jobs per rule written here.

Update EXPECTED when a rule or an overlay changes the plan (the counts are explained next to them).
The dry runs are offline: URLs and hub ids are only planned, never fetched (proxies point nowhere).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml
from helpers import offline_snakemake
from smoke_workflow import job_stats, project_copy
from snakemake.utils import update_config

from debate_audit.tools.config_check import config_errors, used_models

REPO = Path(__file__).resolve().parents[1]


def er_audit(
    archs: int = 1,
    datasets: int = 2,
    lengths: int = 1,
    weights: int = 1,
    *,
    generate: bool = True,
    adjudicators: int | None = None,
    null: bool = True,
    gcg: bool | int = False,
) -> dict[str, int]:
    """ER-Audit jobs with the default roles: 2 debate modes; per architecture x dataset x length the
    variants honest, adv and one org per L_qh weight; checkpoints: base + those; 2 test generators (gen-a,
    gen-b); one audit per architecture x dataset x length x weight. `adjudicators`: who writes the L_lm
    targets, one teacher or (None) each architecture. `null`: the default's audit target `copy` (V_base saved
    again per architecture, scored per dataset); the paper overlay audits the fine-tuned verifiers only.
    `gcg`: debate.gcg on, one debate_gcg_merge job per dataset x length of the adversarial debates and as many
    debate_gcg jobs (an int: that many, the ranges make plan's estimate needs under cluster.runtime.max_minutes)."""
    variants = 2 + weights
    checkpoints = 1 + lengths * variants
    jobs = {
        "debate_split": datasets,
        # every shipped configuration trains on adjudication targets (verifier.lm_target)
        "verifier_adjudicate": (archs if adjudicators is None else adjudicators) * datasets * lengths * 2,
        "verifier_finetune": archs * datasets * lengths * variants,
        "verifier_loss_figure": archs * datasets * lengths,
        "verifier_evaluate": archs * datasets * checkpoints,
        "verifier_table1": 1,
        "paraphrase_search": datasets,
        "paraphrase_test": datasets * 2,
        "audit_scores": archs * datasets * (checkpoints + null),
        "audit_statistics": archs * datasets * lengths * weights,
        "audit_sweeps": archs * datasets * lengths * weights,
        "audit_power": archs * datasets * lengths * weights,
        "audit_figures": 1,
        "audit_runtime": 1,
    }
    if null:
        jobs["verifier_copy"] = archs
    if generate:
        jobs |= {"debate_generate": datasets * lengths * 2, "debate_select": datasets * lengths * 2}
        if gcg:
            jobs["debate_gcg"] = datasets * lengths if gcg is True else gcg
            jobs["debate_gcg_merge"] = datasets * lengths
    else:
        jobs |= {"debate_import": datasets * 2}
    return jobs


PREPARE_DATASETS = {"prepare_quality_h": 1, "prepare_gpqa_h": 1}
# config/audit-models.yaml's audit of a brought pair on its own pairs file: 2 models scored, 1 audit
BROUGHT = {"prepare_own_pairs": 1, "audit_model_scores": 2, "audit_model_statistics": 1, "audit_model_sweeps": 1}
ER_AUDIT = {**PREPARE_DATASETS, **er_audit()}
CWPOR_FIXED = {
    "prepare_truthfulqa": 1,
    "cwpor_questions": 1,
    "cwpor_metrics": 1,
    "cwpor_tables": 1,
    "cwpor_figures": 1,
    "cwpor_calibration": 1,
    "cwpor_reliability": 1,
}


def cwpor(
    models: int, verbosities: int, *, judges: int = 1, protocols: int = 0, halves: int = 0, per_model: bool = False
) -> dict[str, int]:
    """CW-POR jobs: responses once per model and word limit (plus the length control's `halves` extra word
    limits v // 2), every judge of a model reading them; each rebuttal protocol's debates once per model and
    word limit, judged by every judge. `per_model` (cwpor.job_split: model): a model's word limits debated in
    one job, judged in one job per judge (and protocol)."""
    limits = 1 if per_model else verbosities
    jobs = {
        **CWPOR_FIXED,
        "cwpor_debate": models * (1 if per_model else verbosities + halves),
        "cwpor_judge": models * judges * limits,
    }
    if judges > 1:
        jobs["cwpor_cross_judge"] = 1
    if protocols:
        jobs |= {
            "cwpor_rebuttal": models * protocols * verbosities,
            "cwpor_judge_rebuttal": models * judges * protocols * limits,
            "cwpor_rebuttal_effects": 1,
        }
    return jobs


# config/ablations.yaml over the paper's 3 architectures x 2 datasets, beyond the main cells (er_audit(3)):
# 2 honest debates (+ selection) at 50 / 250 words on QuALITY-H; GPT-20B (the paper overlay's one teacher,
# 4 main adjudications) adjudicates them (2) and trains
# V_honest on them (2) and V_org at L_qh 1, 3, 4, 5 on both datasets (8); 2 more loss figures; 10 more
# checkpoints evaluated; 4 more V_org scored and audited per dataset's GPT-20B (8), none at the honest-only
# lengths.
RELEASE_ABLATIONS = {
    "debate_generate": 4 + 2,
    "debate_select": 4 + 2,
    "verifier_adjudicate": 4 + 2,
    "verifier_finetune": 18 + 10,
    "verifier_loss_figure": 6 + 2,
    "verifier_evaluate": 24 + 10,
    "audit_scores": 24 + 8,
    "audit_statistics": 6 + 8,
    "audit_sweeps": 6 + 8,
    "audit_power": 6 + 8,
}

# overlay -> jobs per rule of a dry run from nothing (no model prepared yet); browse: the results page
EXPECTED = {
    # 5 CW-POR models x 10 verbosities, one debate and one judge job per model (cwpor.job_split: model);
    # GCG: QuALITY-H's training candidates in 2 ranges (one job would want 3,803 min, over the 2,880 cap),
    # GPQA-H's in 1;
    # 9 models prepared: the 5 CW-POR ones (Llama-3B is also gen-a,
    # Mistral gen-b, Qwen-14B the search generator), the release's debater Gemma-4-31B and the three verifier
    # architectures GPT-20B (also the selector and the one adjudication teacher), Qwen-9B and Llama-8B. The
    # embedded model stays under `models:` through the merge but no experiment uses it.
    "config/paper.yaml": {
        "prepare_model": 9,
        **cwpor(5, 10, per_model=True),
        **PREPARE_DATASETS,
        **er_audit(3, null=False, adjudicators=1, gcg=3),
        "browse": 1,
        "all": 1,
    },
    # the release's ablations: lengths 50 / 250 honest-only on QuALITY-H with GPT-20B, L_qh 1..5 of GPT-20B's
    # V_org on both datasets (main: 150 words, L_qh 2 everywhere)
    "config/paper.yaml config/ablations.yaml": {
        "prepare_model": 9,
        **cwpor(5, 10, per_model=True),
        **PREPARE_DATASETS,
        **er_audit(3, null=False, adjudicators=1, gcg=3),
        **RELEASE_ABLATIONS,
        "browse": 1,
        "all": 1,
    },
    # a full grid: three debate lengths x three L_qh weights on the paper's line-up
    "config/paper.yaml config/ablations-grid.yaml": {
        "prepare_model": 9,
        **cwpor(5, 10, per_model=True),
        **PREPARE_DATASETS,
        **er_audit(3, null=False, lengths=3, weights=3, adjudicators=1, gcg=9),
        "browse": 1,
        "all": 1,
    },
    # the paper's generator roles on API models: 3 more models prepared (no weights: a fingerprint each)
    "config/paper.yaml config/api-generators.yaml": {
        "prepare_model": 12,
        **cwpor(5, 10, per_model=True),
        **PREPARE_DATASETS,
        **er_audit(3, null=False, adjudicators=1, gcg=3),
        "browse": 1,
        "all": 1,
    },
    # the default's 1 model x 2 verbosities on the real releases
    "config/shared-data.yaml": {"prepare_model": 1, **cwpor(1, 2), **ER_AUDIT, "browse": 1, "all": 1},
    # every generating rule through vLLM: the default's jobs (the engines start inside them), CW-POR's word
    # limits gathered per model
    "config/vllm.yaml": {"prepare_model": 1, **cwpor(1, 2, per_model=True), **ER_AUDIT, "browse": 1, "all": 1},
    # a second judge (Gemma 3 270M) of the default's debates: responses still once per model and word
    # limit (2), judgments per judge (4); one more model prepared
    "config/cross-judge.yaml": {"prepare_model": 2, **cwpor(1, 2, judges=2), **ER_AUDIT, "browse": 1, "all": 1},
    # a second verifier architecture (Gemma 3 270M): every ER-Audit job per architecture twice, the L_lm
    # targets written once by the one teacher (the embedded model, 4 adjudication jobs); one more model prepared
    "config/two-families.yaml": {
        "prepare_model": 2,
        **cwpor(1, 2),
        **PREPARE_DATASETS,
        **er_audit(2, adjudicators=1),
        "browse": 1,
        "all": 1,
    },
    # three rebuttal protocols on the default: the length control's round 1 at v // 2 adds the 15-word
    # single-turn debate (30 // 2; 60 // 2 = 30 is configured already)
    "config/rebuttal.yaml": {
        "prepare_model": 1,
        **cwpor(1, 2, protocols=3, halves=1),
        **ER_AUDIT,
        "browse": 1,
        "all": 1,
    },
    # 1 model x 1 verbosity
    "tests/smoke/config.yaml": {"prepare_model": 1, **cwpor(1, 1), **ER_AUDIT, "browse": 1, "all": 1},
    # the paper's five models and Llama-3.1-8B judging every model's debates: responses once per model
    # (5), judgments per judge (5 x 6), each job over the 10 word limits; Llama-8B is prepared anyway
    "config/paper.yaml config/paper-cross-judge.yaml": {
        "prepare_model": 9,
        **cwpor(5, 10, judges=6, per_model=True),
        **PREPARE_DATASETS,
        **er_audit(3, null=False, adjudicators=1, gcg=3),
        "browse": 1,
        "all": 1,
    },
    # the paper's plan with random stand-ins: the embedded model is prepared too, as their tokenizer
    "config/paper.yaml config/rehearsal.yaml": {
        "prepare_model": 10,
        **cwpor(5, 10, per_model=True),
        **PREPARE_DATASETS,
        **er_audit(3, null=False, adjudicators=1, gcg=True),
        "browse": 1,
        "all": 1,
    },
    # the release's GCG suffixes on the default: one debate_gcg job (one range) and its merge per dataset's
    # adversarial debates
    "config/gcg.yaml": {
        "prepare_model": 1,
        **cwpor(1, 2),
        **ER_AUDIT,
        "debate_gcg": 2,
        "debate_gcg_merge": 2,
        "browse": 1,
        "all": 1,
    },
    # the default's verifiers fine-tuned over 2 processes: the same jobs
    "config/distributed-cpu.yaml": {"prepare_model": 1, **cwpor(1, 2), **ER_AUDIT, "browse": 1, "all": 1},
    # the release's own split files on the real releases: the same jobs as shared-data
    "config/shared-data.yaml config/release-split.yaml": {
        "prepare_model": 1,
        **cwpor(1, 2),
        **ER_AUDIT,
        "browse": 1,
        "all": 1,
    },
    # the release's transcripts on GPQA-H only (the QuALITY-H files are not shipped): one dataset, no
    # debate generation or selection, 2 imports (honest, adversarial)
    "config/shared-data.yaml config/release-split.yaml config/release-transcripts.yaml": {
        "prepare_model": 1,
        **cwpor(1, 2),
        **er_audit(datasets=1, generate=False),
        **PREPARE_DATASETS,
        "browse": 1,
        "all": 1,
    },
    # models you bring beside the trained grid: the hub's SmolLM2-135M base prepared (1 more model), the demo's
    # own pairs prepared, their pools (a search pool and one per test generator), the base and the embedded
    # model scored, one audit and its sweeps; the shared figures, Table 3 and browser read it too
    "config/audit-models.yaml": {
        "prepare_model": 2,
        **cwpor(1, 2),
        **ER_AUDIT,
        **BROUGHT,
        "paraphrase_search": 2 + 1,
        "paraphrase_test": 4 + 2,
        "browse": 1,
        "all": 1,
    },
    # ... and instead of it: no debate, fine-tuning, Table 1 or trained audit
    "config/audit-models.yaml config/audit-models-only.yaml": {
        "prepare_model": 2,
        **cwpor(1, 2),
        **PREPARE_DATASETS,
        **BROUGHT,
        "paraphrase_search": 1,
        "paraphrase_test": 2,
        "audit_figures": 1,
        "audit_runtime": 1,
        "browse": 1,
        "all": 1,
    },
}
# overlays (a key of EXPECTED may chain several, applied in order after config/config.yaml)
NEEDS_SHARED = {
    "config/shared-data.yaml",
    "config/paper.yaml config/rehearsal.yaml",
    "config/shared-data.yaml config/release-split.yaml",
    "config/shared-data.yaml config/release-split.yaml config/release-transcripts.yaml",
}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return project_copy(tmp_path_factory.mktemp("overlays"))


def merged(overlay: str, workdir: Path) -> dict:
    config = yaml.safe_load((workdir / "config/config.yaml").read_text())
    for path in overlay.split():
        update_config(config, yaml.safe_load((workdir / path).read_text()))
    return config


def skip_without_shared(overlay: str, workdir: Path) -> None:
    if overlay in NEEDS_SHARED and not (workdir.parent / "shared").is_dir():
        pytest.skip(f"{overlay} reads ../shared/data, absent here")


@pytest.mark.parametrize("overlay", EXPECTED)
def test_overlay_validates(project, overlay, monkeypatch):
    skip_without_shared(overlay, project)
    monkeypatch.chdir(project)
    assert config_errors(merged(overlay, project), project / "config/schema.yaml") == []


def test_paper_overlay_prepares_only_the_models_it_uses(project):
    models = used_models(merged("config/paper.yaml", project))
    assert "smollm2-135m" in merged("config/paper.yaml", project)["models"]
    assert sorted(models) == sorted(
        [
            "llama-3.2-3b-instruct",
            "mistral-7b-instruct",
            "granite-3.2-8b-instruct",
            "qwen2.5-14b-instruct",
            "phi-4",
            "gemma-4-31b-it",
            "gpt-oss-20b",
            "qwen3.5-9b",
            "llama-3.1-8b-instruct",
        ]
    )


def test_paper_overlay_names_the_papers_verifiers_and_the_releases_debater(project):
    config = merged("config/paper.yaml", project)
    ids = {name: spec["id"] for name, spec in config["models"].items()}
    assert {ids[n] for n in ("gpt-oss-20b", "qwen3.5-9b", "llama-3.1-8b-instruct")} == {
        "openai/gpt-oss-20b",
        "Qwen/Qwen3.5-9B",
        "meta-llama/Llama-3.1-8B-Instruct",
    }
    assert ids[config["debate"]["debater"]] == "google/gemma-4-31B-it"
    assert config["verifier"]["base_models"] == ["gpt-oss-20b", "qwen3.5-9b", "llama-3.1-8b-instruct"]
    v = config["verifier"]
    assert (v["learning_rate"], v["epochs"], v["batch_size"] * v["grad_accum"]) == (1e-5, 3, 8)
    # V_org trains as V_adv (the default's own V_org epochs stay out of the overlay)
    assert not any(v["org_training"].values()) and merged("", project)["verifier"]["org_training"]["epochs"]
    assert (v["warmup_steps"], v["lr_schedule"]) == (10, "cosine")  # the release's Trainer schedule
    assert v["loss_weights"] == {"lm": 1.0, "fc": 2.0, "qh": 2.0}
    # ER-Audit part 1 as the release does it (config/README.md, differences)
    assert v["readout"] == "release"
    assert v["adjudication"]["teacher"] == "gpt-oss-20b" and v["adjudication"]["protocol"] == "blind-first"
    d = config["debate"]
    assert (d["selector"], d["selection_order"]) == ("gpt-oss-20b", "seeded")
    assert (d["temperature"], d["top_p"], d["scratchpad"]) == (0.4, 1.0, True)


def test_paper_overlay_judges_with_the_papers_template_without_an_example(project):
    from debate_audit.cwpor.prompts import judge_template

    for overlay in ("config/paper.yaml", "config/paper.yaml config/rehearsal.yaml"):
        cwpor = merged(overlay, project)["cwpor"]
        assert cwpor["judge_template"] == "paper" and judge_template("paper").example is None
        assert cwpor["headline_por"] == "all"  # the paper's POR divides by all N
    default = merged("tests/smoke/config.yaml", project)["cwpor"]
    assert judge_template(default["judge_template"]).example == "varied"  # v4 stays for the embedded model


def test_rehearsal_has_a_random_stand_in_of_each_used_paper_model(project):
    paper = merged("config/paper.yaml", project)["models"]
    config = merged("config/paper.yaml config/rehearsal.yaml", project)
    hub = [name for name in used_models(config) if paper[name]["source"] == "hf"]
    assert "llama-3.1-8b-instruct" in hub and "gemma-4-31b-it" in hub
    for name in hub:  # the embedded model is used too, as the stand-ins' tokenizer
        assert config["models"][name]["source"] == "random", name


@pytest.mark.slow
@pytest.mark.parametrize("overlay", EXPECTED)
def test_overlay_dry_run_plans_the_expected_jobs(project, overlay):
    skip_without_shared(overlay, project)
    output = offline_snakemake(project, "-n", "--configfile", "config/config.yaml", *overlay.split())
    assert job_stats(output) == EXPECTED[overlay]


def planned_resources(text: str) -> list[tuple[str, str, dict[str, str]]]:
    """(rule, first output, resources) of every job a dry run prints."""
    jobs = []
    for block in re.split(r"\n(?=(?:local)?rule \w+:)", text):
        rule = re.match(r"(?:local)?rule (\w+):", block)
        output = re.search(r"^\s+output: ([^,\n]+)", block, re.M)
        resources = re.search(r"^\s+resources: (.+)$", block, re.M)
        if rule and output and resources:
            pairs = dict(item.strip().split("=", 1) for item in resources.group(1).split(",") if "=" in item)
            jobs.append((rule.group(1), output.group(1), pairs))
    return jobs


@pytest.mark.slow
def test_paper_overlay_asks_each_model_job_for_the_gpus_its_model_needs(project):
    """On SLURM (the shipped profile, no local cap): the debater's jobs as many GPUs as its vLLM engine's
    tensor_parallel_size, a verifier's fine-tuning as many as verifier.distributed.processes, scoring one."""
    output = offline_snakemake(
        project, "-n", "--workflow-profile", "profiles/slurm", "--configfile", "config/config.yaml", "config/paper.yaml"
    )
    config = merged("config/paper.yaml", project)
    debater_tp = config["models"][config["debate"]["debater"]]["vllm"]["tensor_parallel_size"]
    from debate_audit.eraudit.common.grid import distributed_settings

    processes = {a: distributed_settings(config["verifier"], a)["processes"] for a in config["verifier"]["base_models"]}
    jobs = planned_resources(output)
    gpus: dict[tuple[str, str], set[int]] = {}
    for rule, output, resources in jobs:
        key = (rule, output.split("/")[2] if rule == "verifier_finetune" else "")
        gpus.setdefault(key, set()).add(int(resources.get("gpu", 0)))
    assert debater_tp == 4 and gpus[("debate_generate", "")] == {debater_tp}
    for architecture in config["verifier"]["base_models"]:
        assert gpus[("verifier_finetune", architecture)] == {processes[architecture]}, architecture
    assert set(processes.values()) == {4}  # all three in full over 4 GPUs, as the release
    assert gpus[("verifier_evaluate", "")] == {1} and gpus[("audit_scores", "")] == {1}
    # the GCG suffix search backpropagates through the selector in-process: one GPU per job, each job one range
    # of a dataset's candidates (QuALITY-H's 2, to fit the 48 h cap; GPQA-H's 1), one merge per dataset on a CPU
    assert gpus[("debate_gcg", "")] == {1} and gpus[("debate_gcg_merge", "")] == {0}
    assert sum(rule == "debate_gcg" for rule, _, _ in jobs) == 3
    assert sum(rule == "debate_gcg_merge" for rule, _, _ in jobs) == len(config["verifier"]["datasets"])


def test_every_shipped_overlay_has_its_expected_jobs():
    shipped = {
        str(p.relative_to(REPO))
        for p in (REPO / "config").glob("*.yaml")
        if p.name not in ("config.yaml", "schema.yaml")
    }
    planned = {path for key in EXPECTED for path in key.split()}
    assert shipped - planned == set(), "add the overlay's jobs per rule to EXPECTED"
