"""Settings that only change how a model runs rerun nothing (issue 22, section 3).

After the smoke run, a dry run with one run setting of the model changed (models/spec.py RUN_KEYS) plans no
job; a setting that defines the numbers (dtype) plans every job that used the model. The backend is a run
setting too, but sampled generations come from the backend's own random stream: switching it plans exactly
the sampling rules (the paraphrase pools) and what follows them, never the greedy ones. V_org's own training
settings (verifier.org_training) retrain V_org alone. The processes (GPUs) a fine-tuning job shards a verifier over,
and where its optimizer state lives, are speed and memory settings too: changing them retrains nothing.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml
from smoke_workflow import job_stats, snakemake

MODEL = "smollm2-135m"

RUN_SETTINGS = {
    "batch_size": {"batch_size": 3},
    "device": {"device": "cpu"},
    "server URL": {"base_url": "http://127.0.0.1:9/v1", "api_key_env": "SOME_KEY"},
    "engine settings": {
        "vllm": {
            "max_model_len": 2048,
            "max_num_seqs": 4,
            "gpu_memory_utilization": 0.5,
            "tensor_parallel_size": 2,
            "enable_prefix_caching": False,
            "cpu_kvcache_gb": 2,
        }
    },
    "concurrency": {"concurrency": 3},
}

# what the paraphrase pools (sampled) reach
AFTER_POOLS = {
    "paraphrase_search",
    "paraphrase_test",
    "audit_scores",
    "audit_statistics",
    "audit_sweeps",
    "audit_power",
    "audit_figures",
    "audit_runtime",
    "browse",
    "all",
}


def dry_run_listing(workdir, name: str, config: dict) -> str:
    """What a dry run prints (its job listing) with `config` as one more overlay, which is removed after."""
    # outside the smoke run's folder, which the other worker's tests copy meanwhile
    with tempfile.TemporaryDirectory() as folder:
        overlay = Path(folder) / f"run_setting_{name.replace(' ', '_')}.yaml"
        overlay.write_text(yaml.safe_dump(config))
        result = snakemake(workdir, "-n", overlays=(str(overlay),))
    return result.stdout + result.stderr


def dry_run(workdir, name: str, settings: dict) -> dict[str, int]:
    """The jobs a dry run plans, per rule, with the model's `settings` changed."""
    return job_stats(dry_run_listing(workdir, name, {"models": {MODEL: settings}}))


@pytest.mark.slow
@pytest.mark.parametrize("setting", RUN_SETTINGS)
def test_changing_a_run_setting_plans_no_job(smoke_run, setting):
    workdir, _ = smoke_run
    assert dry_run(workdir, setting, RUN_SETTINGS[setting]) == {}


@pytest.mark.slow
def test_changing_the_backend_reruns_only_what_was_sampled(smoke_run):
    workdir, _ = smoke_run
    planned = dry_run(workdir, "backend", {"generation_backend": "vllm"})
    assert set(planned) == AFTER_POOLS, planned
    planned = dry_run(workdir, "backend server", {"generation_backend": "server", "base_url": "http://127.0.0.1:9/v1"})
    assert set(planned) == AFTER_POOLS, planned
    # scoring on that server too (scoring_backend: a run setting, its results cached apart per engine)
    scored = {"generation_backend": "server", "base_url": "http://127.0.0.1:9/v1", "scoring_backend": "server"}
    planned = dry_run(workdir, "scoring server", scored)
    assert set(planned) == AFTER_POOLS, planned


@pytest.mark.slow
def test_changing_a_number_defining_setting_reruns_every_job_of_the_model(smoke_run):
    workdir, _ = smoke_run
    planned = dry_run(workdir, "dtype", {"dtype": "float32"})
    model_bound = {
        "cwpor_debate",
        "cwpor_judge",
        "debate_generate",
        "debate_select",
        "verifier_adjudicate",
        "verifier_finetune",
        "verifier_evaluate",
        "paraphrase_search",
        "paraphrase_test",
        "audit_scores",
    }
    assert model_bound <= set(planned), planned


@pytest.mark.slow
def test_v_orgs_own_training_settings_retrain_v_org_alone(smoke_run):
    workdir, _ = smoke_run
    listing = dry_run_listing(workdir, "org training", {"verifier": {"org_training": {"learning_rate": 3.0e-5}}})
    planned = job_stats(listing)
    # one V_org per dataset; V_honest and V_adv keep their checkpoints, and nothing upstream of training reruns
    assert planned["verifier_finetune"] == 2, planned
    assert not {"debate_generate", "debate_select", "verifier_adjudicate", "paraphrase_search"} & set(planned)
    assert "variant=org_qh10" in listing and "variant=honest" not in listing and "variant=adv" not in listing


@pytest.mark.slow
def test_changing_the_gpus_of_fine_tuning_retrains_nothing(smoke_run):
    # verifier.distributed: N processes train the one-process curve and weights up to the order of float
    # additions (tests/eraudit/verifier/test_eraudit_distributed.py), like a batch size on a GPU
    workdir, _ = smoke_run
    listing = dry_run_listing(
        workdir, "distributed", {"verifier": {"distributed": {"processes": 2, "cpu_offload": True}}}
    )
    assert job_stats(listing) == {}, listing[-2000:]
