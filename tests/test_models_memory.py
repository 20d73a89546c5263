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


def paper_gpt_oss() -> ModelSpec:
    """GPT-20B as config/paper.yaml has it: bf16, on a GPU, generating through vLLM."""
    return ModelSpec.from_config(
        "gpt-oss-20b",
        {
            "source": "hf",
            "id": "openai/gpt-oss-20b",
            "dtype": "bfloat16",
            "device": "cuda",
            "generation_backend": "vllm",
        },
    )


def test_a_gpu_fine_tune_asks_what_its_processes_hold_and_no_engine():
    from debate_audit.models.memory import finetune_host_mb

    gpt = paper_gpt_oss()
    params = 20.91e9  # size.KNOWN_PARAMS_B before the download
    # 4 processes each load the fp32 model (4 B a parameter) while their offloaded shards appear (4 B over all);
    # then the shards, gradients and moments (16 B) and the main process's gathered fp32 weights to save (4 B)
    offloaded = finetune_host_mb(gpt, None, lora=False, processes=4, cpu_offload=True)
    assert offloaded == 4 * JOB_BASE_MB + math.ceil(20 * params / 1e6)
    # the shards on the GPUs: the loading holds the most, 4 x 4 B; no vLLM engine in a fine-tune
    on_gpus = finetune_host_mb(gpt, None, lora=False, processes=4, cpu_offload=False)
    assert on_gpus == 4 * JOB_BASE_MB + math.ceil(16 * params / 1e6)
    assert on_gpus < 4 * host_mem_mb([(gpt, None)], training=True)  # what the job asked before: 4 x (4 x bf16 + engine)
    # LoRA: the bf16 base, loaded then moved to the GPU
    assert finetune_host_mb(gpt, None, lora=True, processes=1, cpu_offload=False) == JOB_BASE_MB + math.ceil(
        INFERENCE_HEADROOM * 2 * params / 1e6
    )
    # on a CPU, as before: each process the training headroom over its weights
    cpu = ModelSpec.from_config("c", {"source": "hf", "id": "openai/gpt-oss-20b", "dtype": "float32"})
    assert finetune_host_mb(cpu, None, lora=False, processes=2, cpu_offload=False) == 2 * host_mem_mb(
        [(cpu, None)], training=True
    )


def test_a_job_that_only_scores_holds_no_engine_copy_of_a_vllm_model():
    gpt = paper_gpt_oss()
    weights_mb = 20.91e9 * 2 / 1e6  # size.KNOWN_PARAMS_B before the download: 41,820 MB in bf16
    # selection, GCG, evaluation, the audits' scoring: the weights in-process, no engine started
    scoring = host_mem_mb([(gpt, None)], generates=False)
    assert scoring == JOB_BASE_MB + math.ceil(INFERENCE_HEADROOM * weights_mb) == 64_730
    # what such a job asked before: an engine's processes and copy of the weights on top (the judge's figure,
    # which generates through its engine, then scores)
    assert host_mem_mb([(gpt, None)]) == scoring + VLLM_ENGINE_MB + weights_mb == 109_550
    # the adjudicator generates only: the engine alone
    assert host_mem_mb([(gpt, None)], scores=False) == JOB_BASE_MB + VLLM_ENGINE_MB + weights_mb == 46_820
    # a model generating in-process loads its weights once, for generating as for scoring
    local = ModelSpec.from_config("m", {"source": "hf", "id": "org/m-8B", "dtype": "bfloat16"})
    assert host_mem_mb([(local, None)], generates=False) == host_mem_mb([(local, None)], scores=False)


def test_a_cpu_fine_tune_of_a_vllm_model_holds_no_engine():
    from debate_audit.models.memory import finetune_host_mb

    engine = ModelSpec.from_config(
        "v", {"source": "hf", "id": "org/v-1B", "dtype": "float32", "generation_backend": "vllm"}
    )
    weights_mb = 1e9 * 4 / 1e6
    assert finetune_host_mb(engine, None, lora=False, processes=2, cpu_offload=False) == 2 * (
        JOB_BASE_MB + math.ceil(TRAINING_HEADROOM * weights_mb)
    )
