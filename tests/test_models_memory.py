"""Host memory of a model-bound job (models/memory.py, every rule's mem_mb): the figure from a model's prepared
weights, counted once per model, nothing for a served one, an engine's copy for vLLM."""

import json
import math

import torch
from safetensors.torch import save_file

from debate_audit.models.memory import (
    INFERENCE_HEADROOM,
    JOB_BASE_MB,
    TRAINING_HEADROOM,
    UNKNOWN_MODEL_PARAMS,
    VLLM_ENGINE_MB,
    host_mem_mb,
)
from debate_audit.models.spec import ModelSpec


def _prepared(tmp_path, n_params: int):
    """A prepared directory whose safetensors headers hold exactly `n_params` parameters."""
    save_file({"w": torch.zeros(n_params)}, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    return tmp_path


def test_an_inference_job_asks_its_base_plus_headroom_times_the_prepared_weights(tmp_path):
    spec = ModelSpec.from_config("m", {"source": "local", "path": str(tmp_path), "dtype": "float32"})
    directory = _prepared(tmp_path, 1_000_000)
    weights_mb = 1_000_000 * 4 / 1e6
    assert host_mem_mb([(spec, directory)]) == JOB_BASE_MB + math.ceil(INFERENCE_HEADROOM * weights_mb)
    assert host_mem_mb([(spec, directory)], training=True) == JOB_BASE_MB + math.ceil(TRAINING_HEADROOM * weights_mb)


def test_bf16_halves_the_weights_and_an_unknown_size_counts_as_eight_billion(tmp_path):
    directory = _prepared(tmp_path, 1_000_000)
    bf16 = ModelSpec.from_config("m", {"source": "local", "path": str(tmp_path), "dtype": "bfloat16"})
    assert host_mem_mb([(bf16, directory)]) == JOB_BASE_MB + math.ceil(INFERENCE_HEADROOM * 2.0)
    unnamed = ModelSpec.from_config("mystery", {"source": "hf", "id": "someone/mystery", "dtype": "float32"})
    assert host_mem_mb([(unnamed, None)]) == JOB_BASE_MB + math.ceil(
        INFERENCE_HEADROOM * UNKNOWN_MODEL_PARAMS * 4 / 1e6
    )


def test_a_served_model_holds_nothing_and_a_vllm_engine_holds_its_own_copy(tmp_path):
    directory = _prepared(tmp_path, 1_000_000)
    served = ModelSpec.from_config("api", {"source": "openai", "id": "gpt-x", "base_url": "http://127.0.0.1:1/v1"})
    assert host_mem_mb([(served, None)]) == JOB_BASE_MB
    engine = ModelSpec.from_config(
        "v",
        {
            "source": "local",
            "path": str(tmp_path),
            "dtype": "float32",
            "generation_backend": "vllm",
            "vllm": {"cpu_kvcache_gb": 2},
        },
    )
    weights_mb = 4.0
    # generating only: the engine's processes, its copy of the weights and (on a CPU) its key/value cache
    assert host_mem_mb([(engine, directory)], scores=False) == JOB_BASE_MB + math.ceil(
        VLLM_ENGINE_MB + weights_mb + 2 * 1024
    )
    # scoring too: the weights in-process as well
    assert host_mem_mb([(engine, directory)]) == JOB_BASE_MB + math.ceil(
        INFERENCE_HEADROOM * weights_mb + VLLM_ENGINE_MB + weights_mb + 2 * 1024
    )


def test_two_models_add_up(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    specs = [
        (ModelSpec.from_config(n, {"source": "local", "path": str(d), "dtype": "float32"}), _prepared(d, k))
        for n, d, k in (("a", a, 1_000_000), ("b", b, 3_000_000))
    ]
    assert host_mem_mb(specs) == JOB_BASE_MB + math.ceil(INFERENCE_HEADROOM * 16.0)
    assert host_mem_mb(specs) > host_mem_mb(specs[:1])


def test_no_model_is_the_base_alone():
    assert host_mem_mb([]) == JOB_BASE_MB
