"""The ER-Audit grid (eraudit/common/grid.py): several verifier architectures, debate lengths and L_qh weights
in one run, through wildcards."""

from __future__ import annotations

import json

import polars as pl
import pytest

from debate_audit.eraudit.common import grid
from debate_audit.eraudit.verifier.table1 import TABLE1_SCHEMA, markdown_table

ARCHS = ["smollm2-135m", "tiny-qwen2"]


def test_checkpoint_path_ids_round_trip():
    for cp in [
        grid.Checkpoint("base"),
        grid.Checkpoint("honest", "w50"),
        grid.Checkpoint("adv", "release"),
        grid.Checkpoint("org", "w150", 2.0),
        grid.Checkpoint("org", "w150", 0.5),
    ]:
        assert grid.Checkpoint.parse(cp.path_id) == cp
    assert grid.Checkpoint("org", "w150", 2.0).path_id == "w150/org_qh2"
    with pytest.raises(ValueError, match="unknown variant 'org'"):
        grid.Checkpoint.parse("w150/org")  # V_org always names its weight


def test_lengths_weights_and_architectures_from_config():
    assert grid.lengths({"word_limit": [50, 150, 50]}) == ["w50", "w150"]
    assert grid.lengths({"word_limit": 40}) == ["w40"]
    assert grid.lengths({"word_limit": [50, 150], "transcripts": {"source": "release"}}) == ["release"]
    assert grid.qh_weights({"loss_weights": {"qh": [1, 2.0]}}) == [1.0, 2.0]
    assert grid.base_models({"base_models": ["a", "b"], "base_model": None}) == ["a", "b"]
    assert grid.base_models({"base_models": ["a", "b"], "base_model": "c"}) == ["c"]
    assert grid.variant_ids([1.0, 2.5]) == ["honest", "adv", "org_qh1", "org_qh2.5"]


def test_only_v_org_trains_with_its_own_settings_and_null_keeps_the_shared_value():
    verifier = {"epochs": 3, "org_training": {"epochs": 5, "learning_rate": None, "qh_items": "train"}}
    assert grid.own_training(verifier, grid.Checkpoint("org", "w20", 10.0)) == {"epochs": 5, "qh_items": "train"}
    assert grid.own_training(verifier, grid.Checkpoint("honest", "w20")) == {}
    assert grid.own_training(verifier, grid.Checkpoint("adv", "w20")) == {}
    assert grid.own_training({"epochs": 3, "org_training": None}, grid.Checkpoint("org", "w20", 10.0)) == {}


def test_a_setting_audits_base_and_the_targets_of_its_length_and_weight():
    setting = grid.Setting("w50", 4.0)
    assert setting.path_id == "w50_qh4"
    assert [cp.path_id for cp in setting.checkpoints(["honest", "adv", "org"])] == [
        "base",
        "w50/honest",
        "w50/adv",
        "w50/org_qh4",
    ]
    assert [cp.path_id for cp in setting.checkpoints(["org"])] == ["base", "w50/org_qh4"]


def _release_ablations_plan() -> grid.Plan:
    import yaml
    from conftest import REPO

    overlay = yaml.safe_load((REPO / "config" / "ablations.yaml").read_text())
    return grid.Plan.from_config({"debate": overlay["debate"], "verifier": overlay["verifier"]})


def test_the_release_ablations_plan_only_the_releases_cells():
    plan = _release_ablations_plan()
    assert plan.lengths == ("w150", "w50", "w250") and plan.weights == (2.0, 1.0, 3.0, 4.0, 5.0)
    gpt, llama, targets = "gpt-oss-20b", "llama-3.1-8b-instruct", ["honest", "adv", "org"]
    # main cells: every architecture and dataset, V_org at the main weight; GPT-20B's V_org at every weight
    assert plan.variants(llama, "gpqa_h", "w150") == ["honest", "adv", "org_qh2"]
    assert plan.variants(gpt, "gpqa_h", "w150") == ["honest", "adv"] + [f"org_qh{w}" for w in (2, 1, 3, 4, 5)]
    # the length ablation: honest debates and V_honest only, QuALITY-H only, GPT-20B only
    assert plan.variants(gpt, "quality_h", "w50") == ["honest"] == plan.variants(gpt, "quality_h", "w250")
    assert plan.variants(gpt, "gpqa_h", "w50") == [] == plan.variants(llama, "quality_h", "w250")
    assert plan.debate_modes("quality_h", "w250") == ["honest"] and plan.debate_modes("gpqa_h", "w50") == []
    assert plan.debate_modes("gpqa_h", "w150") == ["honest", "adversarial"]
    assert plan.adjudication_modes(gpt, "quality_h", "w50") == ["honest"]
    assert plan.adjudication_modes(llama, "quality_h", "w50") == []
    assert plan.checkpoints(gpt, "quality_h")[-2:] == ["w50/honest", "w250/honest"]
    # audits where every target was trained: one per weight on GPT-20B, none at the honest-only lengths
    assert [s.path_id for s in plan.settings(gpt, "quality_h", targets)] == [f"w150_qh{w}" for w in (2, 1, 3, 4, 5)]
    assert [s.path_id for s in plan.settings(llama, "quality_h", targets)] == ["w150_qh2"]
    # auditing V_honest alone: one audit per length, never a copy per weight
    assert [s.path_id for s in plan.settings(gpt, "quality_h", ["honest"])] == ["w150_qh2", "w50_qh2", "w250_qh2"]


def test_a_plan_without_reach_keys_is_the_full_grid():
    plan = grid.Plan.from_config({"debate": {"word_limit": [50, 150]}, "verifier": {"loss_weights": {"qh": [1, 4]}}})
    for length in ("w50", "w150"):
        assert plan.variants("a", "gpqa_h", length) == ["honest", "adv", "org_qh1", "org_qh4"]
        assert plan.debate_modes("gpqa_h", length) == ["honest", "adversarial"]
    assert [s.path_id for s in plan.settings("a", "gpqa_h", ["org"])] == ["w50_qh1", "w50_qh4", "w150_qh1", "w150_qh4"]


def test_the_sweeps_reach_only_this_runs_architectures_datasets_and_lengths():
    from debate_audit.tools.config_check import name_errors

    debate = {"word_limit": [150, 50], "prompt_word_limits": {"w250": 200}, "length_sweep": {"datasets": ["gpqa_h"]}}
    verifier = {"base_models": ["a"], "datasets": ["quality_h"], "qh_sweep": {"architectures": ["b"]}}
    assert name_errors({"debate": debate, "verifier": verifier}, "debate.") + name_errors(
        {"debate": debate, "verifier": verifier}, "verifier.qh_sweep"
    ) == [
        "debate.length_sweep.datasets[0]: dataset 'gpqa_h' is not defined under verifier.datasets "
        "(defined: ['quality_h'])",
        "debate.prompt_word_limits.w250: debate length 'w250' is not defined under debate.word_limit "
        "(defined: ['w150', 'w50']); did you mean 'w50'?",
        "verifier.qh_sweep.architectures[0]: verifier architecture 'b' is not defined under verifier.base_models "
        "(defined: ['a'])",
    ]


def test_labels_come_first_and_panels_name_only_what_varies():
    frame = pl.DataFrame({"dataset": ["gpqa_h", "gpqa_h"], "x": [1, 2]})
    a = grid.with_labels(frame, {"architecture": "a", "length": "w50", "qh_weight": 2.0})
    assert a.columns[:3] == ["architecture", "length", "qh_weight"]
    b = grid.with_labels(frame, {"architecture": "b", "length": "w50", "qh_weight": 2.0})
    both = pl.concat([a, b])
    assert grid.panel(both, "dataset").to_list() == ["gpqa_h · a"] * 2 + ["gpqa_h · b"] * 2
    assert grid.panel(a, "dataset").to_list() == ["gpqa_h", "gpqa_h"]
    with pytest.raises(ValueError, match="unknown grid label"):
        grid.with_labels(frame, {"model": "a"})


def table1_rows(rows: list[tuple]) -> pl.DataFrame:
    """Rows given without the population and training rows: all in population `eval`, 4 training rows
    for a fine-tuned verifier, 0 for V_base."""
    keys = [k for k in TABLE1_SCHEMA if k not in ("population", "training_rows")]
    return pl.DataFrame(
        [dict(zip(keys, r), population="eval", training_rows=0 if r[4] == "base" else 4) for r in rows],
        schema=TABLE1_SCHEMA,
    )


def test_table1_markdown_has_a_row_per_architecture_length_and_question_and_org_per_weight():
    rows = []
    for arch in ("a", "b"):
        for q in ("q_m", "q_h"):
            rows.append((arch, None, None, "gpqa_h", "base", q, 0.5, 0.5, 4))
            for length in ("w50", "w150"):
                rows.append((arch, length, None, "gpqa_h", "honest", q, 0.75, 0.6, 4))
                for w in (1.0, 2.0):
                    rows.append((arch, length, w, "gpqa_h", "org", q, 0.25 * w, 0.1 * w, 4))
    text = markdown_table(table1_rows(rows))
    lines = text.strip().splitlines()
    header = [c.strip() for c in lines[0].strip("|").split("|")]
    assert header[:4] == ["dataset", "architecture", "length", "question"]
    assert "V_org qh=1 Acc" in header and "V_org qh=2 MTP" in header and "V_base Acc" in header
    body = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert len(body) == 2 * 2 * 3  # architectures x lengths x (questions, training rows)
    assert [r[3] for r in body[:3]] == ["q_m", "q_h", "training rows"]
    assert body[2][header.index("V_base Acc")] == "0" and body[2][header.index("V_org qh=2 Acc")] == "4"
    row = body[0]
    assert row[:4] == ["gpqa_h", "a", "w50", "q_m"]
    assert row[header.index("V_base Acc")] == "0.500"  # V_base repeats on every length's rows
    assert row[header.index("V_org qh=2 Acc")] == "0.500" and row[header.index("V_org qh=1 Acc")] == "0.250"


def test_table1_without_sweeps_keeps_the_papers_columns():
    rows = [
        ("a", None, None, "gpqa_h", "base", "q_m", 0.5, 0.5, 3),
        ("a", "w40", 2.0, "gpqa_h", "org", "q_m", 1.0, 0.9, 3),
    ]
    header = markdown_table(table1_rows(rows)).splitlines()[0]
    assert "qh=" not in header and "V_org Acc" in header and "| length |" in header


@pytest.mark.slow
def test_two_architectures_two_lengths_two_weights_in_one_run(tmp_path, smoke_run):
    """The grid on top of the session's smoke run: its main cell (the embedded model at the smoke run's length
    and weight) is the smoke run's and is not trained again; the sweeps add the rest. The whole grid is
    planned from nothing; the run itself takes the release's shape of the length ablation (honest debates and
    V_honest only at the second length, config/ablations.yaml), which reaches every rule at both lengths but
    the audit, in 5 new fine-tuning jobs instead of 8."""
    from smoke_workflow import copy_of_run, job_stats, project_copy, snakemake

    small, swept = ARCHS  # the overlay's sweeps reach tiny-qwen2 only: the embedded model trains the main cell
    targets = [
        "results/er_audit/verifier/table1.md",
        "results/er_audit/audit/summary.md",
        f"results/er_audit/verifier/{small}/gpqa_h/w20/loss_curves.png",
    ]
    targets += [f"results/er_audit/verifier/{swept}/gpqa_h/{w}/loss_curves.png" for w in ("w12", "w20")]
    # The whole grid's plan, from nothing
    plan = snakemake(project_copy(tmp_path / "plan"), "-n", *targets, overlays=("tests/smoke/grid.yaml",))
    jobs = job_stats(plan.stdout)
    # V_honest / V_adv once per architecture x reached length, V_org once per reached weight; V_base never
    assert jobs["verifier_finetune"] == 3 + 2 * (2 + 2)
    assert jobs["verifier_evaluate"] == (1 + 3) + (1 + 2 * 4)
    assert jobs["audit_scores"] == (1 + 3 + 1) + (1 + 2 * 4 + 1)  # and V_base's copy, the audit's null
    assert jobs["verifier_copy"] == 2
    assert jobs["audit_statistics"] == 1 + 2 * 2 and jobs["debate_generate"] == 2 * 2
    # The run, from the smoke run, honest-only at w12: the main cell's debates, checkpoints and scores are reused
    workdir = copy_of_run(smoke_run[0], tmp_path / "project")
    (workdir / "honest_w12.yaml").write_text("debate: {length_sweep: {modes: [honest]}}\n")  # merged into grid.yaml's
    overlays = ("tests/smoke/grid.yaml", "honest_w12.yaml")
    before = job_stats(snakemake(workdir, "-n", *targets, overlays=overlays).stdout)
    assert before["verifier_finetune"] == 2 + 2 + 1 and before["debate_generate"] == 1, before
    assert before["audit_statistics"] == 2, before  # tiny-qwen2 at w20, both weights; w12 trains no V_adv to audit
    snakemake(workdir, "--keep-going", *targets, overlays=overlays)  # a flag ends --configfile

    table = pl.read_parquet(workdir / "results/er_audit/verifier/table1.parquet")
    assert set(table["population"]) == {"all", "train", "eval"}
    assert set(table["architecture"]) == set(ARCHS)
    assert set(table["length"].drop_nulls()) == {"w12", "w20"}
    w12 = table.filter(pl.col("length") == "w12")
    assert set(w12["architecture"]) == {swept} and set(w12["verifier"]) - {"base"} == {"honest"}
    assert set(table.filter(pl.col("verifier") == "org")["qh_weight"]) == {10.0, 2.0}
    assert set(table.filter((pl.col("verifier") == "org") & (pl.col("architecture") == small))["qh_weight"]) == {10.0}
    text = (workdir / "results/er_audit/verifier/table1.md").read_text()
    assert "V_org qh=10 Acc" in text and "V_org qh=2 Acc" in text and "| tiny-qwen2 |" in text and "| w12 |" in text
    # one V_honest per architecture and length, serving both weights' audits
    fingerprints = {
        a: json.loads((workdir / f"resources/verifiers/{a}/gpqa_h/w20/honest/fingerprint.json").read_text())[
            "weights_sha256"
        ]
        for a in ARCHS
    }
    assert fingerprints[small] != fingerprints[swept]
    assert (workdir / f"resources/verifiers/{swept}/gpqa_h/w12/honest/fingerprint.json").exists()
    assert not (workdir / f"resources/verifiers/{swept}/gpqa_h/w12/adv").exists()
    # the smoke overlay trains the embedded model with LoRA (saved as an adapter) and tiny-qwen2 in full
    kinds = {
        a: json.loads((workdir / f"resources/verifiers/{a}/gpqa_h/w20/honest/fingerprint.json").read_text())[
            "checkpoint"
        ]
        for a in ARCHS
    }
    assert kinds == {small: "lora-adapter", swept: "full"}
    assert (workdir / f"resources/verifiers/{small}/gpqa_h/w20/honest/adapter_config.json").exists()
    settings = {small: ["w20_qh10"], swept: ["w20_qh10", "w20_qh2"]}
    for a, names in settings.items():
        audited = (workdir / f"results/er_audit/audit/{a}/gpqa_h").glob("*/summary.parquet")
        assert sorted(p.parent.name for p in audited) == names
        for setting in names:
            summary = pl.read_parquet(workdir / f"results/er_audit/audit/{a}/gpqa_h/{setting}/summary.parquet")
            assert summary["architecture"].unique().to_list() == [a]
            assert summary["length"].unique().to_list() == [setting.split("_")[0]]
            assert summary["qh_weight"].unique().to_list() == [float(setting.split("_qh")[1])]
    summary_md = (workdir / "results/er_audit/audit/summary.md").read_text()
    assert "tiny-qwen2" in summary_md and "w20" in summary_md
    curve = pl.read_parquet(workdir / f"results/er_audit/verifier/{swept}/gpqa_h/w12/honest/loss_curve.parquet")
    assert curve.height > 0 and curve["architecture"].unique().to_list() == [swept]
    # V_org of each weight records it (one adversarial item may leave V_org without training items)
    for weight in (10, 2):
        record = json.loads(
            (workdir / f"resources/verifiers/{swept}/gpqa_h/w20/org_qh{weight}/fingerprint.json").read_text()
        )
        assert (record["architecture"], record["length"], record["qh_weight"]) == (swept, "w20", weight)
