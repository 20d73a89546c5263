"""What model-bound jobs ask a scheduler for besides GPUs and memory (tools/job_sizes.py, config `cluster`): cores
as vLLM sizes an engine, time limits from `make plan`'s estimate that retries scale, and caches on scratch."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from debate_audit.models.spec import ModelSpec
from debate_audit.runtime.cluster import CACHE_VARIABLES, ClusterSettings, cache_environment
from debate_audit.tools.job_sizes import JobTimes, job_cpus, job_minutes, model_job_cpus, wanted_minutes
from debate_audit.tools.plan import load_config
from debate_audit.tools.plan_hours import LOAD_SECONDS_PER_B, VLLM_THROUGHPUT

REPO = Path(__file__).resolve().parents[1]
PAPER = [str(REPO / "config/config.yaml"), str(REPO / "config/paper.yaml")]
SETTINGS = ClusterSettings()


def spec(name: str, **entry) -> ModelSpec:
    return ModelSpec.from_config(name, {"source": "hf", "id": f"org/{name}-8B", **entry})


def test_a_vllm_engine_over_n_gpus_gets_two_plus_n_cores_and_one_for_the_job():
    # vLLM: an API server, an engine core and one worker per GPU, each a busy process
    for n in (1, 2, 4, 8):
        engine = spec("m", generation_backend="vllm", vllm={"tensor_parallel_size": n})
        assert model_job_cpus(SETTINGS, [engine], scores=False) == 2 + n + 1
    # a job that only scores with that model starts no engine: one GPU of in-process work
    engine = spec("m", generation_backend="vllm", vllm={"tensor_parallel_size": 4})
    assert model_job_cpus(SETTINGS, [engine], scores=True, generates=False) == SETTINGS.cpus_per_gpu
    # the judge generates through its engine, then scores in-process: the larger of the two
    assert model_job_cpus(SETTINGS, [engine], scores=True) == 7


def test_in_process_work_gets_cores_per_gpu_and_served_models_cost_only_the_job():
    assert model_job_cpus(SETTINGS, [spec("m")], scores=True) == 4
    assert model_job_cpus(SETTINGS, [spec("m")], scores=False) == 4  # in-process generation
    served = spec("s", generation_backend="server", base_url="http://127.0.0.1:9/v1")
    assert model_job_cpus(SETTINGS, [served], scores=False) == 1
    api = ModelSpec.from_config("a", {"source": "openai", "id": "gpt", "base_url": "http://h/v1", "api_key_env": "K"})
    assert model_job_cpus(SETTINGS, [api], scores=False) == 1
    # fine-tuning: each process its share; the optimizer on the host wants more
    assert job_cpus(SETTINGS, compute_gpus=4) == 16
    assert job_cpus(SETTINGS, compute_gpus=4, offload=True) == 32
    assert job_cpus(ClusterSettings(cpus_per_gpu=8), compute_gpus=1) == 8


def test_a_time_limit_is_the_estimate_with_its_margin_above_a_floor_and_retries_scale_it():
    settings = ClusterSettings(runtime_margin=2.0, min_runtime=30)
    assert job_minutes(settings, 1.0) == 120
    assert job_minutes(settings, 1.0, attempt=2) == 240 and job_minutes(settings, 1.0, attempt=3) == 360
    assert job_minutes(settings, 0.01) == 30 and job_minutes(settings, 0.01, attempt=2) == 60
    assert job_minutes(settings, 100 / 60 / 2 + 1e-9) == 101  # minutes round up
    capped = ClusterSettings(max_runtime=2880)
    assert job_minutes(capped, 20.0) == 2400 and job_minutes(capped, 20.0, attempt=2) == 2880
    # what the job wants is kept apart from the cap: make plan warns where the first attempt wants more
    assert wanted_minutes(capped, 30.0) == 3600 and job_minutes(capped, 30.0) == 2880
    assert job_minutes(ClusterSettings(max_runtime=None), 30.0) == 3600


def test_time_limits_are_capped_at_48_hours_unless_a_config_says_otherwise():
    # 48 h, a common GPU partition's MaxTime: a job asking for more is one SLURM will not start there
    assert ClusterSettings().max_runtime == 2880
    # the shipped config, the schema's defaults (what a config without the keys gets) and the class agree
    assert ClusterSettings.from_config(yaml.safe_load((REPO / "config/config.yaml").read_text())) == ClusterSettings()
    schema = yaml.safe_load((REPO / "config/schema.yaml").read_text())["properties"]["cluster"]
    assert schema["default"]["runtime"]["max_minutes"] == schema["properties"]["runtime"]["default"]["max_minutes"]
    assert schema["properties"]["runtime"]["properties"]["max_minutes"]["default"] == 2880
    # null: no cap, as before
    assert ClusterSettings.from_config({"cluster": {"runtime": {"max_minutes": None}}}).max_runtime is None


@pytest.fixture(scope="module")
def paper_times():
    config = load_config(PAPER)
    return config, JobTimes.from_config(config)


def test_a_job_over_all_word_limits_takes_their_calls_and_one_engine_start(paper_times):
    config, times = paper_times
    model = "qwen2.5-14b-instruct"
    words = config["cwpor"]["verbosity"]
    apart = [times.hours("cwpor_debate", {"model": model, "verbosity": str(v)}) for v in words]
    together = times.hours("cwpor_debate", {"model": model})
    # 14.77B weights read by the engine, and its start-up: once per job
    load = (14.77 * LOAD_SECONDS_PER_B + VLLM_THROUGHPUT["start_seconds"]) / 3600
    assert together == pytest.approx(sum(apart) - (len(words) - 1) * load)
    assert apart == sorted(apart)  # longer answers take longer
    # QuALITY-H's stories make its debates longer than GPQA-H's short contexts
    quality, gpqa = (
        times.hours("debate_generate", {"dataset": d, "length": "w150", "debate_mode": "adversarial"})
        for d in ("quality_h", "gpqa_h")
    )
    assert quality > gpqa > 0
    # the Gemma debater runs over 4 GPUs: its calls take a quarter of the wall time of one GPU's
    config["models"]["gemma-4-31b-it"]["vllm"]["tensor_parallel_size"] = 1
    one = JobTimes.from_config(config).hours(
        "debate_generate", {"dataset": "quality_h", "length": "w150", "debate_mode": "adversarial"}
    )
    start = (31.27 * LOAD_SECONDS_PER_B + VLLM_THROUGHPUT["start_seconds"]) / 3600
    assert one - start == pytest.approx(4 * (quality - start))


def test_a_rule_without_counted_calls_gets_the_floor(paper_times):
    _, times = paper_times
    assert times.hours("verifier_copy", {"architecture": "qwen3.5-9b"}) == 0
    assert job_minutes(SETTINGS, 0.0) == SETTINGS.min_runtime


def test_caches_go_under_the_configured_scratch_and_a_variable_already_set_is_kept(tmp_path):
    settings = ClusterSettings.from_config({"cluster": {"cache_dir": "$SCRATCH/cache"}})
    env = cache_environment(settings, {"SCRATCH": str(tmp_path), "TRITON_CACHE_DIR": "/mine"})
    assert env == {
        "VLLM_CACHE_ROOT": f"{tmp_path}/cache/vllm",
        "HF_HUB_CACHE": f"{tmp_path}/cache/huggingface/hub",
        "HF_XET_CACHE": f"{tmp_path}/cache/huggingface/xet",
        "HF_DATASETS_CACHE": f"{tmp_path}/cache/huggingface/datasets",
    }
    # HF_HOME set by the user: the hub's caches stay under it (its token lives there too)
    assert set(cache_environment(settings, {"SCRATCH": str(tmp_path), "HF_HOME": "/h"})) == {
        "VLLM_CACHE_ROOT",
        "TRITON_CACHE_DIR",
    }
    # unset: the job's scratch
    default = cache_environment(ClusterSettings(), {"TMPDIR": str(tmp_path)})
    assert set(default) == set(CACHE_VARIABLES)
    assert all(v.startswith(f"{tmp_path}/debate-audit-cache-{os.getuid()}/") for v in default.values())
    with pytest.raises(
        ValueError, match=r"cluster.cache_dir: '\$NOWHERE_SET/c' names an unset environment variable NOWHERE_SET"
    ):
        cache_environment(ClusterSettings(cache_dir="$NOWHERE_SET/c"), {})


def test_a_job_s_processes_find_their_caches_where_it_put_them(tmp_path, monkeypatch):
    """The variables reach the libraries of the processes the job starts: huggingface_hub here, and vLLM and
    Triton in vLLM's own environment where `make vllm` made one."""
    from test_offline_jobs import fake_job

    from debate_audit.runtime.job import rule_context

    for name in (*CACHE_VARIABLES, "HF_HOME"):
        monkeypatch.delenv(name, raising=False)
    job = fake_job("verifier_evaluate", tmp_path)
    job.config = yaml.safe_load(f"cluster: {{cache_dir: {tmp_path}/scratch}}")
    with rule_context(job):
        code = "from huggingface_hub import constants; print(constants.HF_HUB_CACHE, constants.HF_XET_CACHE)"
        hub = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
        assert hub == [f"{tmp_path}/scratch/huggingface/hub", f"{tmp_path}/scratch/huggingface/xet"]
        vllm_python = REPO / ".venv-vllm/bin/python"
        if vllm_python.exists():
            code = "import vllm.envs, triton.knobs as k; print(vllm.envs.VLLM_CACHE_ROOT, k.cache.dir)"
            out = subprocess.run([str(vllm_python), "-c", code], capture_output=True, text=True, check=True)
            assert out.stdout.split() == [f"{tmp_path}/scratch/vllm", f"{tmp_path}/scratch/triton"]
    assert not any(name in os.environ for name in CACHE_VARIABLES)  # the test's process as it was
    assert f"VLLM_CACHE_ROOT={tmp_path}/scratch/vllm" in (tmp_path / "verifier_evaluate.log").read_text()
