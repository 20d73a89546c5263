"""GPU hours of a configuration's calls (`make plan`) and of one job (its time limit, tools/job_sizes.py): the
calls and tokens each stage counts, at the throughput `benchmarks/gpu_bench.py` measured on an H200 at
Llama-8B shape (benchmarks/README.md) scaled by parameter count, or at vLLM's published throughput for
the generations of a model whose `generation_backend` is `vllm` or `server`, plus loading the weights. A
Qwen3.5 model's in-process work is priced at transformers' torch fallback where config
`cluster.linear_attention_kernels` says the GPU nodes lack the `gpu` extra's kernels (LINEAR_ATTENTION_FALLBACK)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from debate_audit.models.calls import RulePlan
from debate_audit.models.linear_kernels import uses_gated_delta_net
from debate_audit.models.size import model_config, params_b
from debate_audit.models.spec import ModelSpec
from debate_audit.runtime.cluster import ClusterSettings
from debate_audit.tools.plan_memory import job_gpus

# Measured on one H200, bf16, Llama-8B shape (benchmarks/README.md, "GPU" section): scoring 149 prompts/s of
# 307 tokens; greedy generation at batch 64 1120 new tokens/s, sampling 595. Throughput is taken as inversely
# proportional to parameter count (both regimes are weight-bound at these batch sizes); an H100 has ~70% of
# the H200's memory bandwidth, which bounds generation, and about the same bf16 compute for prefill.
THROUGHPUT = {
    "reference_params_b": 8.03,
    "prefill_tokens_per_s": 149 * 307,
    "greedy_tokens_per_s": 1120,
    "sampled_tokens_per_s": 595,
    "h100_generation_factor": 0.7,
    "uncertainty": "x0.5 to x2: random-weight shapes, synthetic prompts, one run each; real replies stop "
    "early (fewer tokens), paper batch 128 and vLLM run faster, long prompts (8k-token stories) slower",
}
# Generation by vLLM (generation_backend vllm / server): not measured by this project on a GPU (no GPU build
# of vLLM was at hand); the figure is MLPerf Inference v5.1's Llama-3.1-8B Offline result of Red Hat's
# submission: 5777 output tokens/s on one H100 with vLLM 0.10.0 (FP8 weights, CNN/DailyMail prompts of
# ~800 tokens and ~100-token summaries, many requests in flight). It is taken for bf16 on an H200 as it
# stands (bf16 moves twice FP8's weight bytes, the H200 has 1.4x the H100's memory bandwidth) and for
# sampling too (vLLM samples inside the same batched step); prompts are still counted at the prefill rate
# above, so the estimate leans high. Per job the engine's start-up (memory profiling, CUDA-graph capture)
# comes on top of loading the weights.
VLLM_THROUGHPUT = {
    "reference_params_b": 8.03,
    "generated_tokens_per_s": 5777,
    "start_seconds": 120,
    "source": "MLPerf Inference v5.1, Llama-3.1-8B Offline, Red Hat (vLLM 0.10.0, 1x H100, FP8): 5777 tokens/s",
    "uncertainty": "x0.5 to x2: another GPU, dtype and vLLM version, other prompt and reply lengths; "
    "start-up not measured here",
}
# Qwen3.5 without the `gpu` extra's kernels (flash-linear-attention, causal-conv1d): transformers runs the
# gated delta rule of 24 of Qwen3.5-9B's 32 layers in fp32, looping in Python over 64-token chunks (and the
# backward through that loop). Not measured by this project (no GPU with both at hand, issue 53): the factor
# multiplies the model's in-process hours (scoring, training, in-process generation); a vLLM engine brings its
# own kernels and is left as priced. THROUGHPUT is taken to be the kernels' speed.
LINEAR_ATTENTION_FALLBACK = {
    "factor": 2.0,
    "source": "a whole-model forward on an NVIDIA A2 at batch 16, transformers 5.17: 51 ms a request with the "
    "torch fallback against 28 with flash-linear-attention 0.5.2 (1.8x; 1.06x at batch 1), "
    "iapp-technology/openthai-systemone issue 2",
    "uncertainty": "x0.7 to x5: another GPU and batch shape; 8192-token training rows loop over 128 chunks a "
    "layer, forward and backward, where short batched prompts loop over a few",
}
LOAD_SECONDS_PER_B = 4.0  # reading bf16 safetensors from a shared filesystem at ~0.5 GB/s per job
TRAIN_FLOP_FACTOR = 3.0  # forward + backward ~ 3 forward passes


def fallback_factor(config: dict, spec: ModelSpec | None, model_dir: str | Path | None = None) -> float:
    """LINEAR_ATTENTION_FALLBACK's factor for a model with Qwen3.5's linear-attention layers (its prepared or
    published config.json; a random one by its architecture) where `cluster.linear_attention_kernels` is false;
    1 otherwise."""
    if spec is None or spec.source == "openai" or ClusterSettings.from_config(config).linear_attention_kernels:
        return 1.0
    return LINEAR_ATTENTION_FALLBACK["factor"] if linear_attention_model(spec, model_dir) else 1.0


def linear_attention_model(spec: ModelSpec, model_dir: str | Path | None = None) -> bool:
    """Whether `spec`'s model has Qwen3.5's linear-attention layers, as far as is known before it runs."""
    found = model_config(spec, model_dir) or ({"model_type": spec.id} if spec.source == "random" else None)
    return found is not None and uses_gated_delta_net(found)


def gpu_hours(rp: RulePlan, size_b: float | None, fallback: float = 1.0) -> tuple[float, float]:
    """H200 and H100 hours of `rp`'s calls; `fallback` (fallback_factor) multiplies what runs in-process: the
    prompts unless vLLM generates them and nothing is scored, and the generations the in-process loop runs."""
    if size_b is None:
        return 0.0, 0.0
    scale = size_b / THROUGHPUT["reference_params_b"]
    prefill = (rp.prompt_tokens + TRAIN_FLOP_FACTOR * rp.train_tokens) / THROUGHPUT["prefill_tokens_per_s"] * scale
    if rp.engine != "vllm" or rp.scorings or rp.train_tokens:
        prefill *= fallback
    if rp.engine == "vllm":
        rate = (
            VLLM_THROUGHPUT["generated_tokens_per_s"]
            * THROUGHPUT["reference_params_b"]
            / VLLM_THROUGHPUT["reference_params_b"]
        )
    else:
        rate = THROUGHPUT["sampled_tokens_per_s"] if rp.sampled else THROUGHPUT["greedy_tokens_per_s"]
    generation = rp.new_tokens / rate * scale * (fallback if rp.engine != "vllm" else 1.0)
    h200 = (prefill + generation) / 3600
    h100 = (prefill + generation / THROUGHPUT["h100_generation_factor"]) / 3600
    return h200, h100


def job_hours(
    config: dict, spec: ModelSpec | None, rp: RulePlan, model_dir: str | Path | None = None
) -> tuple[float, float]:
    """Wall hours of one job on H100s: of the calls in `rp` (one job's, as its stage's cost.py counts them) at
    the H100 throughput, shared by the GPUs the job holds (job_gpus); and of readying its model: the weights
    read at LOAD_SECONDS_PER_B by the vLLM engine it starts (plus the engine's start-up) and again in-process
    where it scores, trains or generates in-process. (0, 0) for a model served elsewhere (source openai) or of
    unknown size; a Qwen3.5 model's calls at the torch fallback where the nodes lack its kernels
    (fallback_factor). tools/job_sizes.py turns them into the job's time limit."""
    if spec is None or spec.source == "openai":
        return 0.0, 0.0
    size = params_b(spec, model_dir)
    if size is None:
        return 0.0, 0.0
    served = bool(rp.generations) and spec.generation_backend in ("vllm", "server")
    row = dataclasses.replace(rp, engine="vllm" if served else "in-process")
    _, h100 = gpu_hours(row, size, fallback_factor(config, spec, model_dir))
    gpus, _ = job_gpus(config, spec, row, size, memory=False)
    engine = bool(rp.generations) and spec.generation_backend == "vllm"
    in_process = bool(rp.scorings or rp.train_tokens) or (bool(rp.generations) and spec.generation_backend == "local")
    load_s = size * LOAD_SECONDS_PER_B * (int(engine) + int(in_process))
    load_s += VLLM_THROUGHPUT["start_seconds"] if engine else 0
    return h100 / max(1, gpus), load_s / 3600
