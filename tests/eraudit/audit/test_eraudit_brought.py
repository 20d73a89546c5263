"""Audits of models you bring (config `audited_models`, eraudit/common/brought.py; rules/audited_models.smk)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import polars as pl
import pytest
import yaml

from debate_audit.eraudit.audit import figures
from debate_audit.eraudit.audit.verdicts import AuditSettings
from debate_audit.eraudit.common import verifiers
from debate_audit.eraudit.common.brought import BroughtAudit
from debate_audit.tools.config_check import config_errors

REPO = Path(__file__).resolve().parents[3]


def test_a_brought_audit_takes_the_runs_settings_with_its_own_targets_and_epsilon():
    audit = BroughtAudit.from_config(
        "distilled", {"base": "b", "targets": ["t1", "t2"], "datasets": ["mine"], "epsilon": 0.4}
    )
    shared = dict(test_pools=["g"], kappa=0.1, eta=0.05, tv_r=0.0, epsilon=None, epsilon_percentile=25)
    settings = AuditSettings(**audit.settings(shared))
    assert (settings.targets, settings.epsilon, settings.epsilon_percentile) == (("t1", "t2"), 0.4, None)
    assert settings.epsilon_reference is None
    assert [audit.checkpoint(m) for m in audit.models] == ["base", "t1", "t2"]
    assert audit.labels() == {"architecture": "distilled", "length": None, "qh_weight": None}
    # without its own epsilon a percentile needs the model organism it names among its targets
    organism = BroughtAudit("d", "b", ("t1",), ("mine",), epsilon_reference="t1")
    assert AuditSettings(**organism.settings(shared)).epsilon_reference == "t1"


def test_a_brought_target_gets_a_colour_no_verifier_has_and_keeps_it():
    own = {v.color for v in verifiers.VERIFIERS.values()}
    assert figures.target_color("honest") == verifiers.HONEST.color
    assert figures.target_color("my-distilled-v2") not in own
    assert figures.target_color("my-distilled-v2") == figures.target_color("my-distilled-v2")
    assert not own & set(figures.BROUGHT_COLORS)


def test_a_lora_adapter_given_as_a_local_model_is_refused_saying_how_to_merge_it(tmp_path, monkeypatch):
    adapter = tmp_path / "adapter"
    adapter.mkdir()
    (adapter / "adapter_config.json").write_text("{}")
    (adapter / "adapter_model.safetensors").write_bytes(b"")
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["models"]["mine"] = {"source": "local", "path": str(adapter)}
    config["audited_models"] = {"a": {"base": "smollm2-135m", "targets": ["mine"], "datasets": ["gpqa_h"]}}
    monkeypatch.chdir(REPO)
    (error,) = config_errors(config, REPO / "config/schema.yaml")
    assert error.startswith(f"models.mine.path: {adapter} holds a LoRA adapter (adapter_config.json), not a model")
    assert "merge_and_unload()" in error


def merge_adapter(adapter: Path, out: Path) -> Path:
    """What a user does with a LoRA adapter before bringing it (config/README.md, `audited_models`): peft merges it
    into its base; the merged weights are saved with the adapter's tokenizer files beside them."""
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from debate_audit.models.adapter import adapter_base

    base = AutoModelForCausalLM.from_pretrained(adapter_base(adapter), dtype=torch.float32)
    PeftModel.from_pretrained(base, adapter).merge_and_unload().save_pretrained(out, safe_serialization=True)
    for file in adapter.iterdir():
        if not file.name.startswith("adapter_") and file.name != "fingerprint.json":
            shutil.copy2(file, out / file.name)
    return out


def own_pairs(pairs: pl.DataFrame, out: Path) -> Path:
    """`pairs` (prepared QuALITY-H rows) as your own dataset's file, and a row with a bad field after them."""
    rows = [
        {
            "story_title": r["story_title"],
            "context": r["context"],
            "Q_Y": {"question": r["q_m"], "Y_true": r["y_true"], "Y_false": r["y_false"]},
            "Q_H": {"question": r["q_h"], "H_true": r["h_true"], "H_false": r["h_false"]},
        }
        for r in pairs.iter_rows(named=True)
    ]
    rows.append({**rows[0], "story_title": "broken", "Q_Y": {**rows[0]["Q_Y"], "Y_false": ["a", "list"]}})
    out.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return out


def section(frame: pl.DataFrame, target: str, ids: list[int]) -> pl.DataFrame:
    """One target's rows of an audit output, pairs numbered 0.. in `ids` order, without the cell's names."""
    rows = frame.filter(pl.col("target") == target)
    if "pair_id" in rows.columns:
        rows = rows.with_columns(pl.col("pair_id").replace_strict(ids, list(range(len(ids)))))
    drop = ["architecture", "length", "qh_weight", "dataset", "target", "split", "training_rows"]
    keys = [k for k in ("pair_id", "kind", "generator", "pool", "t", "index") if k in rows.columns]
    rows = rows.drop([c for c in drop if c in rows.columns])
    return rows.sort(keys, nulls_last=False) if keys else rows


@pytest.mark.slow
def test_the_smoke_runs_checkpoints_brought_back_as_directories_audit_as_the_trained_targets(tmp_path, smoke_run):
    """The smoke run's V_base and its fine-tuned V_honest (a LoRA adapter, merged), given back as `source: local`
    models, on QuALITY-H and on the smoke run's audited pairs rewritten as your own dataset: every Delta, status,
    counterexample and bound equals the trained audit's. Of the trained grid only what a new epsilon reaches runs
    again; then, with part 1 off, the shared outputs hold this audit alone."""
    from smoke_workflow import copy_of_run, job_stats, snakemake

    from debate_audit.views.browse import payload_from_page

    workdir = copy_of_run(smoke_run[0], tmp_path / "project")
    audit = workdir / "results/er_audit/audit"
    cell = audit / "smollm2-135m/quality_h/w20_qh10"  # the trained audit of QuALITY-H
    ids = sorted(set(pl.read_parquet(cell / "records.parquet")["pair_id"]))
    pairs = pl.read_parquet(workdir / "data/quality_h.parquet").filter(pl.col("pair_id").is_in(ids)).sort("pair_id")
    honest = merge_adapter(workdir / "resources/verifiers/smollm2-135m/quality_h/w20/honest", tmp_path / "honest")
    overlay = {
        "models": {
            "brought-base": {"source": "local", "path": str(workdir / "resources/models/smollm2-135m")},
            "brought-honest": {"source": "local", "path": str(honest)},
        },
        "datasets": {"own": {"mine": {"pairs": str(own_pairs(pairs, tmp_path / "mine.jsonl"))}}},
        "audited_models": {
            "again": {"base": "brought-base", "targets": ["brought-honest"], "datasets": ["quality_h", "mine"]}
        },
        # every Delta above 0 a counterexample: the smoke run's one-step V_honest is then DEGRADED on both pairs,
        # by a Stage-1 counterexample on one and in Stage 2 on the other, so the comparison covers both
        "audit": {"epsilon": 0.0},
    }
    (workdir / "brought.yaml").write_text(yaml.safe_dump(overlay))
    logs = ["results/inspect"] if _has_inspect() else []  # one log per task and model (rules/browse.smk)

    plan = job_stats(snakemake(workdir, "-n", overlays=("brought.yaml",)).stdout)
    # nothing of the trained grid runs again but its statistics (the new epsilon): the new audit, its models and
    # pools, and the outputs every audit shares
    assert plan == {
        "audit_statistics": 2,
        "audit_sweeps": 2,
        "audit_power": 2,  # what the trained audits can detect at the new epsilon
        "prepare_model": 2,
        "prepare_own_pairs": 1,
        "paraphrase_search": 1,  # mine's; QuALITY-H's pools are the trained audit's
        "paraphrase_test": 2,
        "audit_model_scores": 4,
        "audit_model_statistics": 2,
        "audit_model_sweeps": 2,
        "audit_figures": 1,
        "audit_runtime": 1,
        "browse": 1,
        "all": 1,
    }, plan
    snakemake(workdir, "--", "all", *logs, overlays=("brought.yaml",))

    trained = {stem: pl.read_parquet(cell / f"{stem}.parquet") for stem in ("deltas", "records", "summary")}
    flagged = trained["records"].filter(pl.col("target") == "honest")
    assert set(flagged["status"]) == {"DEGRADED"} and flagged["counterexample"].null_count() == 1, flagged
    rejected = pl.read_parquet(workdir / "data/mine.rejected.parquet")
    assert rejected.select("row", "key", "reason").rows() == [
        (len(ids), "broken", 'field \'Q_Y.Y_false\': expected a non-empty string, got ["a", "list"] (array)')
    ]
    for dataset, numbered in (("quality_h", ids), ("mine", list(range(len(ids))))):
        brought = {
            s: pl.read_parquet(audit / f"models/again/{dataset}/{s}.parquet") for s in ("deltas", "records", "summary")
        }
        for stem in ("deltas", "records", "summary"):
            ours = section(brought[stem], "brought-honest", numbered)
            theirs = section(trained[stem], "honest", ids)
            assert ours.equals(theirs), (dataset, stem, ours, theirs)
        assert brought["records"]["architecture"].unique().to_list() == ["again"]
        assert brought["summary"]["training_rows"].to_list() == [None]  # not this workflow's fine-tuning
    assert trained["summary"].filter(pl.col("target") == "honest")["training_rows"].item() > 0
    # the same paraphrases: your own dataset's pools were drawn anew (from the call cache) and equal QuALITY-H's
    for pool in ("search", "test_gen-a", "test_gen-b"):
        texts = [
            pl.read_parquet(workdir / f"results/er_audit/paraphrase/{d}/{pool}.parquet") for d in ("quality_h", "mine")
        ]
        assert texts[1]["text"].to_list() == texts[0]["text"].to_list() and texts[1].height > 0
    # V_base's copy has V_base's weights, so its scores are the call cache's; the merged V_honest's were computed
    fingerprints = [
        json.loads((workdir / f"resources/models/{m}/fingerprint.json").read_text())
        for m in ("smollm2-135m", "brought-base", "brought-honest")
    ]
    assert fingerprints[0]["weights_sha256"] == fingerprints[1]["weights_sha256"] != fingerprints[2]["weights_sha256"]
    computed = pl.concat(
        [pl.read_parquet(audit / f"models/again/{d}/brought-honest/device_time.parquet") for d in ("quality_h", "mine")]
    )["computed"]
    assert computed.sum() > 0

    summary = (audit / "summary.md").read_text()
    assert "- **again**: base `brought-base`, targets `brought-honest`" in summary
    table3 = pl.read_parquet(audit / "table3_gpu_seconds.parquet").filter(pl.col("architecture") == "again")
    assert set(table3["dataset"]) == {"quality_h", "mine", "all"} and table3["setting"].null_count() == table3.height
    page = payload_from_page((workdir / "results/browse/index.html").read_text())
    sections = {d["dataset"]: d for d in page["eraudit"]}
    assert sections["mine · again"]["targets"] == ["brought-honest"]
    assert len(sections["quality_h · again"]["pairs"]) == len(ids)
    if logs:
        from inspect_ai.log import read_eval_log

        samples = read_eval_log(str(workdir / logs[0] / "er_audit_audit_again.eval")).samples
        ours = [s for s in samples if s.metadata["section"] == "mine · again"]
        assert ours and {s.output.model for s in ours} == {"again/V_brought-honest"}  # the audit, its target

    # Instead of the trained grid (ER-Audit part 1 off), on your own dataset alone: its pools and scores stand,
    # only the outputs every audit shares are written again, now of this audit alone
    (workdir / "only.yaml").write_text(
        yaml.safe_dump({"verifier": {"datasets": []}, "audited_models": {"again": {"datasets": ["mine"]}}})
    )
    overlays = ("brought.yaml", "only.yaml")
    plan = job_stats(snakemake(workdir, "-n", overlays=overlays).stdout)
    assert plan == {"audit_figures": 1, "audit_runtime": 1, "browse": 1, "all": 1}, plan
    snakemake(workdir, "--", "all", *logs, overlays=overlays)
    summary = pl.read_csv(audit / "summary.csv")
    assert summary.select("architecture", "dataset", "target").rows() == [("again", "mine", "brought-honest")]
    page = payload_from_page((workdir / "results/browse/index.html").read_text())
    assert [d["dataset"] for d in page["eraudit"]] == ["mine · again"] and page["cwpor"]["rows"]
    if logs:  # no verifier of this workflow's
        verifiers = (workdir / logs[0]).glob("er_audit_verifiers_*.eval")
        assert not [s for log in verifiers for s in (read_eval_log(str(log)).samples or [])]


def _has_inspect() -> bool:
    import importlib.util

    return importlib.util.find_spec("inspect_ai") is not None


def test_a_local_model_written_again_after_it_was_prepared_is_named_at_start_up(tmp_path):
    import os

    from debate_audit.models.spec import ModelSpec
    from debate_audit.tools.config_check import stale_local_warnings

    source, prepared = tmp_path / "distilled", tmp_path / "resources/models/mine"
    source.mkdir()
    prepared.mkdir(parents=True)
    (source / "model.safetensors").write_bytes(b"old")
    (prepared / "fingerprint.json").write_text("{}")
    spec = ModelSpec.from_config("mine", {"source": "local", "path": str(source)})
    os.utime(source / "model.safetensors", (1, 1))
    assert stale_local_warnings([spec], lambda name: tmp_path / "resources/models" / name) == []
    (source / "model.safetensors").write_bytes(b"retrained")  # newer than the prepared copy
    os.utime(prepared / "fingerprint.json", (2, 2))
    (warning,) = stale_local_warnings([spec], lambda name: tmp_path / "resources/models" / name)
    assert warning.startswith(f"models.mine.path: model.safetensors in {source} changed after the model was prepared")


@pytest.mark.slow
def test_with_part_1_off_its_models_need_not_be_prepared_or_even_defined(tmp_path):
    """`verifier.datasets: []`: the debater and the verifier architectures are no experiment's models, so the
    rules must plan without them (no rule may ask their spec while the workflow is read)."""
    from smoke_workflow import job_stats, project_copy, snakemake

    workdir = project_copy(tmp_path)
    off = {
        "models": {"unused": {"source": "hf", "id": "nobody/nothing"}},
        "debate": {"debater": "unused", "selector": None},
        "verifier": {"datasets": [], "base_models": ["unused"], "lora": {"enabled": False}},
    }
    (workdir / "off.yaml").write_text(yaml.safe_dump(off))
    jobs = job_stats(snakemake(workdir, "-n", overlays=("config/audit-models.yaml", "off.yaml")).stdout)
    assert jobs["prepare_model"] == 2  # the embedded model (CW-POR, the pools, the target) and the brought base
    assert not {rule for rule in jobs if rule.startswith(("debate_", "verifier_"))} and "audit_scores" not in jobs


SERVED = {"generation_backend": "server", "scoring_backend": "server", "base_url": "http://127.0.0.1:9/v1"}
ENDPOINT = {"source": "openai", "base_url": "http://127.0.0.1:9/v1"}


def one_prompt_config(kinds: dict[str, dict], weights: Path) -> dict:
    """config/config.yaml with an audit of `kinds`' models (the first the base): a local directory (`weights`),
    the same served with scoring_backend: server, or an endpoint."""
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    local = {"source": "local", "path": str(weights)}
    for name, kind in kinds.items():
        config["models"][name] = {**local, **kind} if kind.get("source") != "openai" else {**kind, "id": name}
    names = list(kinds)
    config["audited_models"] = {"mine": {"base": names[0], "targets": names[1:], "datasets": ["gpqa_h"]}}
    return config


def test_an_audit_read_partly_through_an_endpoint_is_refused_naming_the_audit_and_its_members(tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    config = one_prompt_config({"b": {}, "t-local": {}, "t-endpoint": ENDPOINT}, tmp_path)
    (error,) = config_errors(config, REPO / "config/schema.yaml")
    assert error.startswith("audited_models.mine: its base and targets would be read with different prompts: ")
    assert "t-endpoint through the chat endpoint" in error
    assert "b (base), t-local with the prompt rendered here" in error
    assert "scoring_backend: server" in error and "all through the endpoint" in error
    # a served base beside an endpoint target is refused the same way: the server is sent this workflow's prompt
    config = one_prompt_config({"b": SERVED, "t": ENDPOINT}, tmp_path)
    (error,) = config_errors(config, REPO / "config/schema.yaml")
    assert "t through the chat endpoint" in error and "b (base) with the prompt rendered here" in error


@pytest.mark.parametrize(
    "kinds",
    [
        {"b": {}, "t": {}},  # all local
        {"b": SERVED, "t": SERVED},  # all served with scoring_backend: server
        {"b": {}, "t": SERVED},  # local and served: both read with the prompt rendered here
        {"b": ENDPOINT, "t": ENDPOINT},  # all through the endpoint
    ],
    ids=["local", "server", "local-and-server", "endpoint"],
)
def test_an_audit_read_with_one_prompt_is_accepted(kinds, tmp_path, monkeypatch):
    monkeypatch.chdir(REPO)
    assert config_errors(one_prompt_config(kinds, tmp_path), REPO / "config/schema.yaml") == []
