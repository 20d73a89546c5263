"""A cost plan for a configuration, before any model runs: jobs, model calls, tokens and GPU hours per rule.

Job counts come from Snakemake's own dry run; calls and tokens from the config and the datasets (their
sizes and mean text lengths); GPU time from the throughput that `benchmarks/gpu_bench.py` measured on an
H200 at Llama-8B shape (benchmarks/README.md), scaled by parameter count, and, for the generations of a
model whose `generation_backend` is `vllm` or `server`, from vLLM's published throughput (VLLM_THROUGHPUT). The estimate is for planning a
cluster bill, not a promise: generated tokens are upper bounds (every reply runs to its budget), and the
throughput figures carry the uncertainty given in THROUGHPUT.

Models served by an API (`source: openai`: a provider's hosted model or an OpenAI-compatible server) cost
calls and tokens, not GPU time: the plan lists their calls, input tokens (the prompt estimate above) and
output tokens (the budget: the provider request's own token cap where it sets one, else the stage's
max_new_tokens) and, from the config's `prices` table (USD per million tokens, the user's to set), the
estimated cost (`api_plans`).

The audit's operating characteristic (`power_plan`, eraudit/audit/power.py): for the configured pools, the
smallest per-paraphrase degradation rate p the audit flags with 80% power, whether its test pools can
certify tau_c at all and P(certify) at p = 0.01; for `audit.operating_characteristic.target`, the pool sizes
that reach it and what they cost in calls, tokens and (where `prices` are set) USD.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from debate_audit.data.markdown import markdown_table
from debate_audit.eraudit.common import grid
from debate_audit.models.calls import TOKENS_PER_WORD, RulePlan, tokens
from debate_audit.models.memory import TrainingMemory
from debate_audit.models.size import bytes_per_param, params_b
from debate_audit.models.size import model_config as size_config
from debate_audit.models.spec import ModelSpec

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
# Memory torch reports for one GPU (GiB): what a fine-tuning job must fit in.
GPU_GIB = {"H100 80 GB": 79.6, "H200": 139.0}
MODELS_DIR = "resources/models"  # prepared models (rules/common.smk, model_dir): their config.json, once there
# What the API table's figures rest on (printed under it, and in --json).
API_BASIS = (
    "calls: the generations counted above (paraphrase pools: their planned draws, top-up rounds "
    "included) and the scorings (a CW-POR judge's LLC; the audit's readouts of a verifier behind an endpoint, "
    "audit_model_scores, two per question, one per answer order; a selector's: one request for one token "
    "each, its input carrying the one-letter instruction models/api.py appends), from scratch, with "
    "nothing in the call cache; input tokens: the plan's prompt estimate, "
    f"the stage's prompt template and the dataset's mean text lengths at {TOKENS_PER_WORD} tokens per "
    "word (the provider's tokenizer and any system prompt differ); output tokens: a budget, every reply "
    "run to the provider request's own token cap (request.max_tokens / max_completion_tokens) where it "
    "sets one, else to the stage's max_new_tokens, which for a provider model without a cap is an "
    "estimate (it is not sent; reasoning tokens are billed as output); cost: input x input_per_mtok + "
    "output x output_per_mtok (USD per million tokens, config `prices`, yours to set)"
)
LOAD_SECONDS_PER_B = 4.0  # reading bf16 safetensors from a shared filesystem at ~0.5 GB/s per job
TRAIN_FLOP_FACTOR = 3.0  # forward + backward ~ 3 forward passes
# Nominal sizes when a dataset is not on local disk (the releases' counts; mean words measured on the
# copies in ../shared/data).
NOMINAL = {
    "truthfulqa": {"n": 817, "question_words": 11.0, "answer_words": 9.0},
    "quality_h": {"n": 222, "question_words": 14.0, "context_words": 4700.0},
    "gpqa_h": {"n": 101, "question_words": 40.0, "context_words": 230.0},
}


@dataclass
class FinetuneMemory:
    """GPU memory of one architecture's fine-tuning jobs at their peak, term by term (models/memory.py,
    training_memory_bytes: the figure the job checks before loading; eraudit/verifier/finetune.py)."""

    architecture: str
    params_b: float | None
    lora: bool
    gib: float | None  # per GPU at the peak; None: the model's config.json is not at hand
    terms_gib: dict[str, float] = field(default_factory=dict)  # memory.TrainingMemory.terms(), GiB
    peak_at: str | None = None  # the moment of the peak: head, layer or end (of the backward)
    host_gib: float = 0.0  # per process, on the host: the offloaded shards and optimizer (cpu_offload)
    # one saved checkpoint on a GPU: full weights in the evaluation dtype, or a LoRA adapter (~10-50 MB)
    checkpoint_gib: float | None = None
    adapter: bool = False
    processes: int = 1  # GPUs per job (verifier.distributed.processes)
    cpu_offload: bool = False
    linear_attention: bool = False  # layers that keep a recurrent state (Qwen3.5): kernels of the `gpu` extra


@dataclass
class ApiPlan:
    """One model served by an API (source openai): its calls and tokens over the run, and their price."""

    model: str
    provider: str  # openai, anthropic, or openai-compatible (no provider: a vLLM server, a gateway)
    rules: list[str]
    calls: float
    input_tokens: float  # estimate: the plan's prompt_tokens (template + the dataset's mean lengths)
    output_tokens: float  # budget: calls x the request's cap, or the stage's max_new_tokens
    output_budget: str  # where the output budget per call comes from
    output_estimated: bool  # no cap on the request: output counted at the stage's max_new_tokens, an estimate
    input_per_mtok: float | None = None  # USD per million tokens (config `prices`)
    output_per_mtok: float | None = None
    cost_usd: float | None = None  # None: no price set


@dataclass
class PoolOption:
    """Pool sizes of the audit and what they cost (`power_plan`)."""

    name: str  # configured / equal pools / larger search pool
    search_size: int  # M_search
    test_size: int  # M_test per generator
    clean_reads: int  # paraphrases the paper's test reads on a q_h without a counterexample
    p_flag: float  # P(flagged) at the target's p
    generations: float  # paraphrase_search + paraphrase_test, the whole run
    scorings: float  # audit_scores, the whole run
    prompt_tokens: float  # of those calls
    new_tokens: float  # generated-token budget of those calls
    api_models: int  # of their models, served by an API
    cost_usd: float | None  # the API models' cost at `prices`; None: no price set (or no API model)
    priced_all: bool  # every API model has a price


@dataclass
class PowerPlan:
    """The audit's operating characteristic for planning (`audit.operating_characteristic`, power.py)."""

    search_size: int
    test_size: int
    generators: int
    eta: float
    tau: float | None
    certify_tau: float
    clean_reads: int  # N: paraphrases read on a q_h without a counterexample
    detectable_p: float | None  # smallest p flagged with 80% power (power.DETECTABLE_POWER)
    certifiable: bool  # the test pools can lift the paper's common bound to certify_tau
    clean_bound: float  # the paper's common bound of a clean q_h
    certify_test_size: int  # M_test per generator that certifying certify_tau needs
    p_certify_paper: float  # at CERTIFY_P
    p_certify_betting: float  # at CERTIFY_P
    p_certify_betting_se: float | None  # Monte Carlo standard error; None: exact
    target_p: float
    target_power: float
    target_reads: int  # paraphrases read that reach the target
    options: list[PoolOption] = field(default_factory=list)


@dataclass
class Plan:
    rules: list[RulePlan] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    training: list[FinetuneMemory] = field(default_factory=list)
    api: list[ApiPlan] = field(default_factory=list)
    api_notes: list[str] = field(default_factory=list)
    power: PowerPlan | None = None
    cluster: Any = None  # runtime/sizing.ClusterSettings the job sizes were computed with


def dry_run_jobs(configfiles: Sequence[str], workdir: str | Path = ".") -> dict[str, int]:
    """Jobs per rule of a from-scratch run, from `snakemake -n` (`--forceall`: what a new cluster runs)."""
    snakemake = Path(sys.executable).parent / "snakemake"
    cmd = [str(snakemake), "-n", "--forceall", "--quiet", "rules", "--configfile", *configfiles]
    result = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{result.stderr[-3000:]}")
    jobs = {}
    for line in result.stdout.splitlines():
        match = re.fullmatch(r"(\w+)\s+(\d+)", line.strip())
        if match and match.group(1) not in ("total", "job"):
            jobs[match.group(1)] = int(match.group(2))
    return jobs


def _words(text: Any) -> int:
    return len(str(text or "").split())


def dataset_stats(config: dict, shared: Path | None) -> tuple[dict[str, dict[str, float]], list[str]]:
    """Item counts and mean words per dataset, from the configured files when local, else the copies in
    `shared`, else NOMINAL."""
    from debate_audit.data.pairs import load_pairs, load_quality_stories
    from debate_audit.data.truthfulqa import records_from_csv

    def local(location: str | None, shared_rel: str) -> str | None:
        if location and "://" not in location and Path(location).exists():
            return location
        if shared is not None and (shared / shared_rel).exists():
            return str(shared / shared_rel)
        return None

    stats: dict[str, dict[str, float]] = {}
    notes = []
    ds = config["datasets"]
    # With hf_id set the run reads the hub dataset (the same 817 questions as the CSV release).
    tqa_path = None if ds["truthfulqa"].get("hf_id") else ds["truthfulqa"].get("path")
    tqa = local(tqa_path, "truthfulqa/TruthfulQA.csv")
    if tqa:
        records = [r for r in records_from_csv(tqa)[0] if r is not None]
        stats["truthfulqa"] = {
            "n": len(records),
            "question_words": sum(_words(r.get("question")) for r in records) / len(records),
            "answer_words": sum(_words(r.get("best_answer")) for r in records) / len(records),
        }
        notes.append(f"truthfulqa: {len(records)} questions from {tqa}")
    for name, ctx_key, shared_pairs, shared_ctx in (
        ("quality_h", "stories", "quality_h/QuALITY-H-pairs.json", "quality_h/QuALITY-H-stories-partial.jsonl.gz"),
        ("gpqa_h", "contexts", "gpqa_h/GPQA-H-pairs.json.gz", "gpqa_h/GPQA-H-title-story.json.gz"),
    ):
        pairs_at = local(ds[name].get("pairs"), shared_pairs)
        ctx_at = local(ds[name].get(ctx_key), shared_ctx)
        if not pairs_at:
            continue
        pairs = [pair for pair in load_pairs(pairs_at)[0] if pair is not None]
        entry = {"n": len(pairs), "question_words": sum(_words(p.get("q_m")) for p in pairs) / len(pairs)}
        if ctx_at and name == "quality_h":
            stories = load_quality_stories(ctx_at, {p["story_title"] for p in pairs})[0]  # the stories the run reads
            entry["context_words"] = sum(map(_words, stories.values())) / max(1, len(stories))
        elif ctx_at:
            from debate_audit.data.io import read_json

            contexts = read_json(ctx_at)
            values = list(contexts.values()) if isinstance(contexts, dict) else contexts
            entry["context_words"] = sum(map(_words, values)) / max(1, len(values))
        stats[name] = entry
        notes.append(f"{name}: {len(pairs)} pairs from {pairs_at}")
    # your own datasets (datasets.own): counted from their files, read by the real loader's row checks
    from debate_audit.data.own_pairs import check_row, read_rows

    for name, entry in (ds.get("own") or {}).items():
        at = entry["pairs"] if "://" not in entry["pairs"] and Path(entry["pairs"]).is_file() else None
        if not at:
            stats[name] = {"n": 0.0, "question_words": 0.0}
            notes.append(f"{name}: {entry['pairs']} is not on local disk; its pairs are not counted")
            continue
        rows = [r for r, _ in (check_row(item) for item, why in read_rows(at) if why is None) if r is not None]
        stats[name] = {
            "n": len(rows),
            "question_words": sum(_words(r["q_m"]) for r in rows) / max(1, len(rows)),
            "context_words": sum(_words(r["context"]) for r in rows) / max(1, len(rows)),
        }
        notes.append(f"{name}: {len(rows)} pairs from {at}")
    for name, nominal in NOMINAL.items():
        merged = {**nominal, **stats.get(name, {})}
        if name not in stats:
            notes.append(f"{name}: not on local disk; nominal size {nominal['n']} items")
        stats[name] = merged
    return stats, notes


def model_calls(config: dict, stats: dict[str, dict[str, float]]) -> list[RulePlan]:
    """Calls and tokens per model-bound rule (whole run, all jobs of the rule together), as each stage
    counts them (its `cost.py`)."""
    from debate_audit.cwpor import cost as cwpor_cost
    from debate_audit.eraudit.audit import cost as audit_cost
    from debate_audit.eraudit.debate import cost as debate_cost
    from debate_audit.eraudit.paraphrase import cost as paraphrase_cost
    from debate_audit.eraudit.verifier import cost as verifier_cost

    return [
        *cwpor_cost.calls(config, stats),
        *debate_cost.calls(config, stats),
        *verifier_cost.calls(config, stats),
        *paraphrase_cost.calls(config, stats),
        *audit_cost.calls(config, stats),
    ]


def gpu_hours(rp: RulePlan, size_b: float | None) -> tuple[float, float]:
    if size_b is None:
        return 0.0, 0.0
    scale = size_b / THROUGHPUT["reference_params_b"]
    prefill = (rp.prompt_tokens + TRAIN_FLOP_FACTOR * rp.train_tokens) / THROUGHPUT["prefill_tokens_per_s"] * scale
    if rp.engine == "vllm":
        rate = (
            VLLM_THROUGHPUT["generated_tokens_per_s"]
            * THROUGHPUT["reference_params_b"]
            / VLLM_THROUGHPUT["reference_params_b"]
        )
    else:
        rate = THROUGHPUT["sampled_tokens_per_s"] if rp.sampled else THROUGHPUT["greedy_tokens_per_s"]
    generation = rp.new_tokens / rate * scale
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
    unknown size. runtime/sizing.py turns them into the job's time limit."""
    import dataclasses

    if spec is None or spec.source == "openai":
        return 0.0, 0.0
    size = params_b(spec, model_dir)
    if size is None:
        return 0.0, 0.0
    served = bool(rp.generations) and spec.generation_backend in ("vllm", "server")
    row = dataclasses.replace(rp, engine="vllm" if served else "in-process")
    _, h100 = gpu_hours(row, size)
    gpus, _ = job_gpus(config, spec, row, size, memory=False)
    engine = bool(rp.generations) and spec.generation_backend == "vllm"
    in_process = bool(rp.scorings or rp.train_tokens) or (bool(rp.generations) and spec.generation_backend == "local")
    load_s = size * LOAD_SECONDS_PER_B * (int(engine) + int(in_process))
    load_s += VLLM_THROUGHPUT["start_seconds"] if engine else 0
    return h100 / max(1, gpus), load_s / 3600


def job_sizes(config: dict, specs: dict[str, ModelSpec], rules: Sequence[RulePlan]) -> Any:
    """Set each (rule, model) row's `cpus` and `runtime_min`: what its jobs ask the scheduler for (the most of
    them), computed as the workflow computes them (runtime/sizing.py, with the models prepared under
    resources/models/ where they are)."""
    from debate_audit.cwpor.jobs import job_wildcards
    from debate_audit.runtime.cluster import ClusterSettings
    from debate_audit.runtime.sizing import JobTimes, job_cpus, job_minutes, model_job_cpus

    settings = ClusterSettings.from_config(config)
    times = JobTimes.from_config(config, {name: Path("resources/models") / name for name in specs})
    for rp in rules:
        spec = specs.get(rp.model)
        if spec is None:
            continue
        if rp.rule == "verifier_finetune":
            shards = grid.distributed_settings(config["verifier"], rp.model)
            rp.cpus = job_cpus(settings, compute_gpus=shards["processes"], offload=shards["cpu_offload"])
        else:
            rp.cpus = model_job_cpus(settings, [spec], scores=rp.scorings > 0, generates=rp.generations > 0)
        jobs = {
            tuple(sorted(job_wildcards(config, rp.rule, cell).items()))
            for cell, model, *_ in times.rows.get(rp.rule, [])
            if model == rp.model
        }
        rp.runtime_min = max(
            (job_minutes(settings, times.hours(rp.rule, dict(job))) for job in jobs), default=settings.min_runtime
        )
    return settings


def finetune_memory(config: dict, spec: ModelSpec) -> TrainingMemory | None:
    """memory.training_memory_bytes of `spec`'s fine-tunes as configured (the largest checkpoint: V_org, with
    its L_qh pass), from its prepared config.json or the published one (size.KNOWN_CONFIGS); None where
    neither is at hand."""
    from debate_audit.models.memory import TrainingSetup, training_memory_bytes

    model_config = size_config(spec, Path(MODELS_DIR) / spec.name)
    if model_config is None:
        return None
    settings = {
        **config["verifier"],
        "lora": grid.lora_settings(config["verifier"], spec.name),
        **grid.distributed_settings(config["verifier"], spec.name),
    }
    return training_memory_bytes(model_config, TrainingSetup.of(settings, with_qh=True))


def training_memory(config: dict, specs: dict[str, ModelSpec]) -> list[FinetuneMemory]:
    """Per verifier architecture: the GPU memory of its fine-tuning jobs, full-parameter or LoRA as configured
    (the job itself refuses to start on a GPU that is too small)."""
    from debate_audit.eraudit.verifier.finetune import saves_adapter
    from debate_audit.models.activations import model_shape

    rows = []
    for arch in grid.base_models(config["verifier"]):
        spec = specs.get(arch)
        size = params_b(spec) if spec is not None else None
        lora = grid.uses_lora(config["verifier"], arch)
        shards = grid.distributed_settings(config["verifier"], arch)
        memory = finetune_memory(config, spec) if spec is not None else None
        adapter = saves_adapter(grid.lora_settings(config["verifier"], arch))
        saved = None
        if size is not None:  # finetune.py saves a full checkpoint in the dtype it is evaluated in (on a GPU)
            saved = 0.0 if adapter else size * 1e9 * bytes_per_param(spec, gpu=True) / 2**30
        config_json = size_config(spec, Path(MODELS_DIR) / arch) if spec is not None else None
        linear = config_json is not None and "linear_attention" in model_shape(config_json).layer_kinds
        rows.append(
            FinetuneMemory(
                arch,
                size,
                lora,
                None if memory is None else memory.total / 2**30,
                {} if memory is None else {k: v / 2**30 for k, v in memory.terms().items()},
                None if memory is None else memory.peak_at,
                0.0 if memory is None else memory.host / 2**30,
                saved,
                adapter,
                **shards,
                linear_attention=linear,
            )
        )
    return rows


def job_gpus(
    config: dict, spec: ModelSpec | None, rp: RulePlan, size_b: float | None, *, memory: bool = True
) -> tuple[int, float | None]:
    """GPUs of one job of `rp.rule` with `spec`'s model and the memory each holds: a fine-tuning job's
    processes and memory.training_memory_bytes at its peak (the figure the job checks); a job whose vLLM
    engine generates, its tensor_parallel_size and the bf16 weights over them; else one GPU holding the weights
    in-process. Served models (source openai, generation_backend server) hold nothing here. `memory=False`:
    a fine-tuning job's GPUs alone, without measuring its activations (which imports torch: a workflow's
    start-up sizes its jobs with this and must not)."""
    server_scores = spec is not None and spec.scoring_backend == "server"
    if (
        spec is None
        or spec.source == "openai"
        or (spec.generation_backend == "server" and (not rp.scorings or server_scores))
    ):
        return 0, None
    if rp.rule == "verifier_finetune":
        processes = grid.distributed_settings(config["verifier"], spec.name)["processes"]
        if not memory:
            return processes, None
        needed = finetune_memory(config, spec)
        return processes, None if needed is None else needed.total / 2**30
    engine = spec.generation_backend == "vllm" and (rp.generations or server_scores)
    gpus = spec.vllm.tensor_parallel_size if engine else 1
    gib = None if size_b is None else size_b * 1e9 * bytes_per_param(spec, gpu=True) / gpus / 2**30
    return gpus, gib


def check_prices(config: dict) -> None:
    """`prices` names models under `models:` only (config_check.price_errors, which start-up runs too;
    the schema checks the figures: numbers >= 0 or null)."""
    from debate_audit.tools.config_check import price_errors

    errors = price_errors(config)
    if errors:
        raise ValueError("; ".join(errors))


def token_cap(spec: ModelSpec) -> tuple[str, int] | None:
    """The token cap a provider model's own request sets (models/api.py, TOKEN_CAPS), as (key, value)."""
    from debate_audit.models.api import TOKEN_CAPS

    if spec.provider is None:
        return None
    request = spec.request or {}
    return next(((k, request[k]) for k in TOKEN_CAPS[spec.provider] if request.get(k) is not None), None)


def api_plans(config: dict, rules: Sequence[RulePlan], specs: dict[str, ModelSpec]) -> tuple[list[ApiPlan], list[str]]:
    """Per model served by an API: calls, input and output tokens of the rows in `rules` it generates, and
    the cost at the config's `prices` (None where no price is set). A capped provider model's rows get their
    output budget set to calls x cap here too, so the rule table and this one agree."""
    prices = config.get("prices") or {}
    by_model: dict[str, list[RulePlan]] = {}
    for rp in rules:
        spec = specs.get(rp.model)
        if spec is not None and spec.source == "openai" and (rp.generations or rp.scorings):
            by_model.setdefault(rp.model, []).append(rp)
    from debate_audit.models.api import ONE_LETTER

    plans, notes = [], []
    instruction = tokens(len(ONE_LETTER.format(letters="A or B").split()))
    for model, rows in by_model.items():
        spec = specs[model]
        cap = token_cap(spec)
        for rp in rows:
            # a scoring request asks for one token (models/api.py, EndpointChatModel.scoring_request), its last
            # user turn carrying the one-letter instruction
            rp.new_tokens = (rp.generations * cap[1] if cap is not None else rp.new_tokens) + rp.scorings
            rp.prompt_tokens += rp.scorings * instruction
        generations = sum(rp.generations for rp in rows)
        scorings = sum(rp.scorings for rp in rows)
        calls = generations + scorings
        output = sum(rp.new_tokens for rp in rows)
        per_generation = (output - scorings) / generations if generations else 0.0
        if not generations:
            budget, estimated = "", False
        elif cap is not None:
            budget, estimated = f"{cap[1]} (request.{cap[0]})", False
        elif spec.provider is None:  # the OpenAI-compatible client sends the stage's max_new_tokens as max_tokens
            budget, estimated = f"{per_generation:.0f} (stage max_new_tokens, sent as max_tokens)", False
        else:
            budget, estimated = f"{per_generation:.0f} (stage max_new_tokens; no cap: estimate)", True
        if scorings:
            scored = "1 per scoring (one-token request)"
            budget = f"{budget} per generation; {scored}" if generations else scored
        price = prices.get(model) or {}
        inp, out = price.get("input_per_mtok"), price.get("output_per_mtok")
        prompt = sum(rp.prompt_tokens for rp in rows)
        cost = None if inp is None or out is None else (prompt * inp + output * out) / 1e6
        plans.append(
            ApiPlan(
                model,
                spec.provider or "openai-compatible",
                sorted({rp.rule for rp in rows}),
                calls,
                prompt,
                output,
                budget,
                estimated,
                inp,
                out,
                cost,
            )
        )
    for name in prices:
        if name not in by_model and any(v is not None for v in (prices[name] or {}).values()):
            served = specs[name].source == "openai"
            notes.append(
                f"prices.{name}: not used, {name} "
                + (
                    "makes no call in this plan"
                    if served
                    else f"is not served by an API here (source {specs[name].source}; its GPU-hours are above)"
                )
            )
    return plans, notes


CERTIFY_P = 0.01  # the nearly clean q_h whose P(certify) make plan prints
PLAN_DRAWS = 4000  # at most this many Monte Carlo streams for the betting bound in make plan (a few tenths of a second)


def power_plan(config: dict, stats: dict[str, dict[str, float]], specs: dict[str, ModelSpec]) -> PowerPlan:
    """The configured audit's operating characteristic, and the pool sizes that reach the config's target
    (`audit.operating_characteristic.target`) with their cost: the configured pools, the smallest equal pools
    (M search + M per test generator, the paper's 100 + 100 shape) and, where the configured pools fall short,
    the configured test pools with the smallest search pool that makes up the rest."""
    from debate_audit.eraudit.audit import cost as audit_cost
    from debate_audit.eraudit.audit import power
    from debate_audit.eraudit.audit.stats import samples_to_certify

    design = power.design_from_config(config)
    settings = config["audit"]["operating_characteristic"]
    target = settings["target"]
    p, level = target["detectable_p"], target["power"]
    betting, betting_se, _ = power.betting_pool_certify(
        design, CERTIFY_P, draws=min(settings["monte_carlo_draws"], PLAN_DRAWS), seed=settings["seed"]
    )
    designs = [("configured", design), ("equal pools", power.equal_pools_for(design, p, level))]
    if power.flag_probability(design, p)[0] < level:
        designs.append(("larger search pool", power.search_pool_for(design, p, level)))
    options = []
    for name, option in designs:
        test_size = option.test_sizes[0] if option.test_sizes else 0
        rules = audit_cost.pool_calls(config, stats, option.search_size, test_size)
        sized = audit_cost.with_pools(config, option.search_size, test_size)
        api, _ = api_plans(sized, rules, specs)
        priced = [a.cost_usd for a in api if a.cost_usd is not None]
        options.append(
            PoolOption(
                name=name,
                search_size=option.search_size,
                test_size=test_size,
                clean_reads=option.clean_reads,
                p_flag=float(power.flag_probability(option, p)[0]),
                generations=sum(r.generations for r in rules),
                scorings=sum(r.scorings for r in rules),
                prompt_tokens=sum(r.prompt_tokens for r in rules),
                new_tokens=sum(r.new_tokens for r in rules),
                api_models=len(api),
                cost_usd=sum(priced) if priced else None,
                priced_all=len(priced) == len(api),
            )
        )
    return PowerPlan(
        search_size=design.search_size,
        test_size=design.test_sizes[0] if design.test_sizes else 0,
        generators=len(design.test_sizes),
        eta=design.eta,
        tau=design.tau,
        certify_tau=design.certify_tau,
        clean_reads=design.clean_reads,
        detectable_p=power.detectable_p(design, power.DETECTABLE_POWER),
        certifiable=design.certifiable,
        clean_bound=design.clean_bound,
        certify_test_size=samples_to_certify(design.certify_tau, design.eta),
        p_certify_paper=float(power.paper_certify_probability(design, CERTIFY_P)[0]),
        p_certify_betting=betting,
        p_certify_betting_se=betting_se,
        target_p=p,
        target_power=level,
        target_reads=power.reads_for_power(p, level),
        options=options,
    )


def render_power(power: PowerPlan) -> str:
    """make plan's section on the audit's operating characteristic."""
    from debate_audit.eraudit.audit.power import DETECTABLE_POWER

    tau = "no tau (each test pool read to its end)" if power.tau is None else f"tau {power.tau:g}"
    detectable = "nothing (no paraphrase is read)" if power.detectable_p is None else f"p = {power.detectable_p:.4g}"
    betting = f"{power.p_certify_betting:.3f}" + (
        " (exact)" if power.p_certify_betting_se is None else f" ± {power.p_certify_betting_se:.3f} (Monte Carlo)"
    )
    lines = [
        "Audit operating characteristic (audit.operating_characteristic; p: the share of a hidden question's "
        "paraphrases that are degraded, independently, in every pool):",
        "",
        f"- Configured pools: search {power.search_size} + test {power.test_size} x {power.generators} generators, "
        f"eta {power.eta:g}, {tau}: {power.clean_reads} paraphrases read on a clean q_h; flagged with "
        f"{power_percent(DETECTABLE_POWER)} power from {detectable}.",
        f"- Certifying tau_c = {power.certify_tau:g}: "
        + (
            f"possible (the paper's bound of a clean q_h: {power.clean_bound:.3f})"
            if power.certifiable
            else f"**not possible** with these test pools (the paper's bound of a clean q_h stays at "
            f"{power.clean_bound:.3f}; it needs {power.certify_test_size} test paraphrases per generator)"
        )
        + f"; P(certify | p = {CERTIFY_P:g}): paper's bound {power.p_certify_paper:.3f}, betting bound {betting}.",
        f"- Target (audit.operating_characteristic.target): p = {power.target_p:g} flagged with "
        f"{power_percent(power.target_power)} power, {power.target_reads} paraphrases read on a clean q_h:",
        "",
    ]
    header = [
        "pools",
        "search",
        "test per generator",
        "read if clean",
        f"P(flagged | p = {power.target_p:g})",
        "paraphrase generations",
        "audit scorings",
        "prompt tokens",
        "new tokens (max)",
        "est. cost USD (API models)",
    ]
    rows = [
        [
            o.name,
            str(o.search_size),
            str(o.test_size),
            str(o.clean_reads),
            f"{o.p_flag:.3f}" + ("" if o.p_flag >= power.target_power else " (short)"),
            _fmt(o.generations),
            _fmt(o.scorings),
            _fmt(o.prompt_tokens),
            _fmt(o.new_tokens),
            "no API model"
            if not o.api_models
            else (
                "no price set"
                if o.cost_usd is None
                else _usd(o.cost_usd) + ("" if o.priced_all else " (priced models only)")
            ),
        ]
        for o in power.options
    ]
    lines += [
        markdown_table(header, rows).rstrip("\n"),
        "",
        "Calls and tokens of paraphrase_search, paraphrase_test and audit_scores over the whole run; the search "
        "pool's sampled replies scale with its size (eraudit/audit/cost.py with_pools).",
    ]
    return "\n".join(lines)


def power_percent(value: float) -> str:
    return f"{100 * value:g}%"


def plan_json(plan: Plan) -> str:
    """The plan for scripts: per rule and model its jobs, GPUs per job, memory per GPU, calls, tokens and
    GPU-hours; per verifier architecture its fine-tuning memory; per model served by an API its calls,
    tokens and estimated cost (`cost_usd` null: no price set)."""
    from dataclasses import asdict

    return json.dumps(
        {
            "rules": [{k: v for k, v in asdict(rp).items() if k != "cell"} for rp in plan.rules],
            "training": [asdict(t) for t in plan.training],
            "api": [asdict(a) for a in plan.api],
            "api_basis": API_BASIS if plan.api else None,
            "notes": plan.notes + plan.api_notes,
            "audit_power": asdict(plan.power) if plan.power else None,
        },
        indent=1,
    )


def build_plan(config: dict, jobs: dict[str, int], shared: Path | None) -> Plan:
    check_prices(config)
    stats, notes = dataset_stats(config, shared)
    specs = {name: ModelSpec.from_config(name, entry) for name, entry in config["models"].items()}
    merged: dict[tuple[str, str], RulePlan] = {}
    for rp in model_calls(config, stats):
        key = (rp.rule, rp.model)
        if key not in merged:
            merged[key] = RulePlan(rp.rule, model=rp.model, sampled=rp.sampled)
        into = merged[key]
        for attr in ("generations", "scorings", "prompt_tokens", "new_tokens", "train_tokens"):
            setattr(into, attr, getattr(into, attr) + getattr(rp, attr))
    plan = Plan(notes=notes, training=training_memory(config, specs))
    for (rule, model), rp in merged.items():
        size = params_b(specs[model]) if model in specs else None
        if model in specs and rp.generations and specs[model].generation_backend in ("vllm", "server"):
            rp.engine = "vllm"
        rp.gpu_hours_h200, rp.gpu_hours_h100 = gpu_hours(rp, size)
        loads = jobs.get(rule, 0) / max(1, sum(1 for (r, _) in merged if r == rule))
        load_h = loads * (size or 0) * LOAD_SECONDS_PER_B / 3600
        if rp.engine == "vllm" and specs[model].generation_backend == "vllm":  # the job starts its engine
            load_h += loads * VLLM_THROUGHPUT["start_seconds"] / 3600
        rp.gpu_hours_h200 += load_h
        rp.gpu_hours_h100 += load_h
        rp.gpus, rp.gpu_gib = job_gpus(config, specs.get(model), rp, size)
        plan.rules.append(rp)
    for rule, count in jobs.items():
        for rp in plan.rules:
            if rp.rule == rule:
                rp.jobs = count
    plan.cluster = job_sizes(config, specs, plan.rules)
    for rule, count in jobs.items():
        if not any(rp.rule == rule for rp in plan.rules):
            plan.rules.append(RulePlan(rule, jobs=count))
    plan.api, plan.api_notes = api_plans(config, plan.rules, specs)
    plan.power = power_plan(config, stats, specs)
    return plan


def _fmt(value: float) -> str:
    if value == 0:
        return "-"
    if value >= 1e6:
        return f"{value / 1e6:.1f}M"
    if value >= 1e3:
        return f"{value / 1e3:.1f}k"
    return f"{value:.3g}"


def render(plan: Plan) -> str:
    header = [
        "rule",
        "jobs (whole rule)",
        "model",
        "generated by",
        "generations",
        "scorings",
        "prompt tokens",
        "new tokens (max)",
        "train tokens",
        "GPU-h H200",
        "GPU-h H100",
    ]
    rows = []
    for rp in plan.rules:
        rows.append(
            [
                rp.rule,
                str(rp.jobs),
                rp.model or "(cpu)",
                rp.engine if rp.generations else "-",
                _fmt(rp.generations),
                _fmt(rp.scorings),
                _fmt(rp.prompt_tokens),
                _fmt(rp.new_tokens),
                _fmt(rp.train_tokens),
                f"{rp.gpu_hours_h200:.2f}" if rp.model else "-",
                f"{rp.gpu_hours_h100:.2f}" if rp.model else "-",
            ]
        )
    total_h200 = sum(rp.gpu_hours_h200 for rp in plan.rules)
    total_h100 = sum(rp.gpu_hours_h100 for rp in plan.rules)
    total_gen = sum(rp.generations for rp in plan.rules)
    rows.append(
        [
            "**total**",
            str(sum({rp.rule: rp.jobs for rp in plan.rules}.values())),
            "",
            "",
            _fmt(total_gen),
            _fmt(sum(rp.scorings for rp in plan.rules)),
            _fmt(sum(rp.prompt_tokens for rp in plan.rules)),
            _fmt(sum(rp.new_tokens for rp in plan.rules)),
            _fmt(sum(rp.train_tokens for rp in plan.rules)),
            f"{total_h200:.1f}",
            f"{total_h100:.1f}",
        ]
    )
    lines = [markdown_table(header, rows).rstrip("\n")]
    lines += [
        "",
        "Datasets: " + "; ".join(plan.notes),
        f"Throughput (H200, Llama-8B shape, scaled by parameters): prefill {THROUGHPUT['prefill_tokens_per_s']} "
        f"tokens/s, greedy {THROUGHPUT['greedy_tokens_per_s']} and sampled {THROUGHPUT['sampled_tokens_per_s']} "
        f"new tokens/s; model load {LOAD_SECONDS_PER_B} s per billion parameters per job.",
        f"Uncertainty: {THROUGHPUT['uncertainty']}.",
        *(
            [
                f"Generated by vLLM: {VLLM_THROUGHPUT['generated_tokens_per_s']} new tokens/s at "
                f"{VLLM_THROUGHPUT['reference_params_b']}B, scaled by parameters, plus "
                f"{VLLM_THROUGHPUT['start_seconds']} s of engine start-up per job (source: "
                f"{VLLM_THROUGHPUT['source']}; uncertainty {VLLM_THROUGHPUT['uncertainty']})."
            ]
            if any(rp.engine == "vllm" for rp in plan.rules)
            else []
        ),
        "A rule whose jobs use several models has one row per model; its job count is the rule's.",
    ]
    sized = [rp for rp in plan.rules if rp.model and rp.runtime_min]
    if sized:
        lines += ["", render_job_sizes(plan, sized)]
    if plan.api or plan.api_notes:
        lines += [
            "",
            "Models served by an API (source openai): calls and tokens instead of GPU-hours, and the "
            "estimated cost at the config's `prices`:",
            "",
            render_api(plan),
        ]
    if plan.training:
        lines += ["", render_training(plan.training)]
        finetunes = next((rp.jobs for rp in plan.rules if rp.rule == "verifier_finetune"), 0)
        if finetunes and all(t.checkpoint_gib is not None for t in plan.training):
            each = finetunes / len(plan.training)  # the grid gives every architecture the same checkpoints
            total = sum(t.checkpoint_gib for t in plan.training) * each
            lines += [
                "",
                f"Checkpoints: {finetunes} verifier_finetune jobs, about {total:.0f} GiB on disk under "
                "resources/verifiers/ (LoRA adapters counted as nothing; lora.save: merged stores a full copy).",
            ]
    if plan.power:
        lines += ["", render_power(plan.power)]
    return "\n".join(lines)


# rows of the fine-tuning memory table: memory.TrainingMemory's terms
TERM_ROWS = {
    "shards": "fp32 shards: weights, gradients, AdamW moments (16 B/param / GPUs)",
    "root": "root unit (embeddings, norm, head) gathered in bf16, and its gradients",
    "layers": "decoder layers gathered in bf16 (computing + prefetched)",
    "layer_grads": "a layer's bf16 gradients and fp32 reduce-scatter buffers",
    "activations": "activations kept by every pass of a micro-batch",
    "at_head": "+ at the backward's start: logits and their fp32 loss",
    "at_layer": "+ in a layer's backward: its (recomputed) activations",
    "masks": "attention masks (kept with checkpointed layers)",
    "reserve": "CUDA context, NCCL, fragmentation (not measured here)",
}


def _training_kind(t: FinetuneMemory) -> str:
    if t.lora:
        return "LoRA on a bf16 base, 1 GPU"
    return f"full-parameter, FSDP2 over {t.processes} GPU{'s' if t.processes > 1 else ''}" + (
        ", shards on the host" if t.cpu_offload else ""
    )


def render_training(training: Sequence[FinetuneMemory]) -> str:
    """Per verifier architecture (a column), the GPU memory of one process of its fine-tuning jobs, term by
    term, its peak and where it fits."""

    def gib(value: float | None) -> str:
        return "?" if value is None else f"{value:.1f}"

    header = ["GiB per GPU", *(t.architecture for t in training)]
    rows = [
        ["parameters", *("?" if t.params_b is None else f"{t.params_b:.2f}B" for t in training)],
        ["training", *(_training_kind(t) for t in training)],
    ]
    for term, label in TERM_ROWS.items():
        rows.append([label, *(gib(t.terms_gib.get(term)) if t.terms_gib else "?" for t in training)])
    moments = {"head": "the backward's start", "layer": "a layer's backward", "end": "the backward's end"}
    rows.append(
        [
            "**peak** (at)",
            *("?" if t.gib is None else f"**{t.gib:.1f}** ({moments.get(t.peak_at or '', '?')})" for t in training),
        ]
    )
    for gpu, cap in GPU_GIB.items():
        rows.append(
            [
                f"fits an {gpu}" if gpu[0] == "H" else gpu,
                *("?" if t.gib is None else ("yes" if t.gib <= cap else "**no**") for t in training),
            ]
        )
    rows.append(
        ["host GiB per process: offloaded shards", *(f"{t.host_gib:.0f}" if t.cpu_offload else "-" for t in training)]
    )
    rows.append(
        [
            "disk GiB per checkpoint",
            *(
                "<0.1 (adapter)" if t.adapter else ("?" if t.checkpoint_gib is None else f"{t.checkpoint_gib:.0f}")
                for t in training
            ),
        ]
    )
    note = (
        "Fine-tuning memory, one process of a verifier_finetune job (models/memory.py, training_memory_bytes: "
        "the job checks the same figure before loading and refuses to start where it does not fit). The peak "
        "is the larger of the sums at the backward's start (shards, root, masks, kept activations, head) and in "
        "a layer's backward (shards, root, masks, kept activations, gathered layers, layer gradients, the "
        "layer's activations), or the root's reduction at the end. Activations are measured per layer kind on "
        "fake tensors at verifier.max_length x batch_size (models/activations.py), for V_org (its L_qh pass). "
        "verifier.distributed.processes spreads a fine-tune over GPUs, cpu_offload moves the shards to the "
        "host, gradient_checkpointing and max_length bound the activations; ? : the model's config.json is "
        "not at hand before `prepare_model`."
    )
    linear = [t.architecture for t in training if t.linear_attention]
    if linear:
        note += (
            f" {', '.join(linear)}: linear-attention layers; the figure counts transformers' torch implementation "
            "of them, and the GPU-hours above assume the `gpu` extra's kernels (flash-linear-attention, "
            "causal-conv1d; pyproject.toml), without which transformers runs that torch path, much slower."
        )
    return note + "\n\n" + markdown_table(header, rows).rstrip("\n")


def render_job_sizes(plan: Plan, sized: Sequence[RulePlan]) -> str:
    """What each model-bound job asks the scheduler for besides memory (runtime/sizing.py, config `cluster`)."""
    from debate_audit.runtime.cluster import ClusterSettings

    settings = plan.cluster or ClusterSettings()
    header = ["rule", "model", "jobs (whole rule)", "GPUs per job", "CPUs per job", "time limit (min), longest job"]
    rows = [[rp.rule, rp.model, str(rp.jobs), str(rp.gpus), str(rp.cpus), str(rp.runtime_min)] for rp in sized]
    cap = "" if settings.max_runtime is None else f", at most {settings.max_runtime}"
    return "\n".join(
        [
            "Job sizes (what each job asks SLURM for besides memory: `cpus_per_task`, which the SLURM plugin sends as "
            "--cpus-per-task, and `runtime`; config `cluster`):",
            "",
            markdown_table(header, rows).rstrip("\n"),
            "",
            f"CPUs: a vLLM engine over N GPUs {settings.engine_cpus} + N, and 1 for the job's own process; "
            f"{settings.cpus_per_gpu} per GPU of in-process work ({settings.offload_cpus_per_gpu} per fine-tuning "
            f"process with cpu_offload). Time limit: the job's estimate on H100s (its calls at the throughput above, "
            f"shared by its GPUs, plus loading its model and starting its engine) x {settings.runtime_margin:g}, at "
            f"least {settings.min_runtime} min{cap}; the n-th attempt asks n times that (the profile's `retries`). "
            "Estimated from the configured dataset files, else the nominal sizes, as the jobs estimate it.",
        ]
    )


def _usd(value: float) -> str:
    return f"{value:,.2f}"


def render_api(plan: Plan) -> str:
    header = [
        "model",
        "provider",
        "rules",
        "calls",
        "input tokens (est.)",
        "output tokens (budget)",
        "output budget per call",
        "USD / Mtok in, out",
        "est. cost USD",
    ]
    rows = [
        [
            a.model,
            a.provider,
            ", ".join(a.rules),
            _fmt(a.calls),
            _fmt(a.input_tokens),
            _fmt(a.output_tokens),
            a.output_budget,
            "no price set"
            if a.input_per_mtok is None and a.output_per_mtok is None
            else f"{'?' if a.input_per_mtok is None else a.input_per_mtok}, "
            f"{'?' if a.output_per_mtok is None else a.output_per_mtok}",
            "no price set" if a.cost_usd is None else _usd(a.cost_usd),
        ]
        for a in plan.api
    ]
    if plan.api:
        priced = [a.cost_usd for a in plan.api if a.cost_usd is not None]
        total = (
            _usd(sum(priced)) + ("" if len(priced) == len(plan.api) else " (priced models only)")
            if priced
            else "no price set"
        )
        rows.append(
            [
                "**total**",
                "",
                "",
                _fmt(sum(a.calls for a in plan.api)),
                _fmt(sum(a.input_tokens for a in plan.api)),
                _fmt(sum(a.output_tokens for a in plan.api)),
                "",
                "",
                total,
            ]
        )
    lines = [markdown_table(header, rows).rstrip("\n"), ""] if plan.api else []
    lines.append(f"Basis: {API_BASIS}.")
    if any(a.output_estimated for a in plan.api):
        lines.append(
            "Without a token cap ("
            + ", ".join(a.model for a in plan.api if a.output_estimated)
            + "): output counted at the stage's max_new_tokens per call, an estimate, not a bound."
        )
    if any(a.cost_usd is None for a in plan.api):
        lines.append(
            "No price set: add `prices: {<model>: {input_per_mtok: ..., output_per_mtok: ...}}` (USD per "
            "million tokens, your provider's current prices) to an overlay (config/README.md, `prices`)."
        )
    lines += plan.api_notes
    return "\n".join(lines)


def load_config(configfiles: Sequence[str]) -> dict:
    """The config Snakemake would see: the files deep-merged in order, validated against the schema."""
    import yaml
    from snakemake.utils import update_config, validate

    config: dict = {}
    for path in configfiles:
        update_config(config, yaml.safe_load(Path(path).read_text()) or {})
    validate(config, "config/schema.yaml")
    check_prices(config)
    return config


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configfile", nargs="+", default=["config/config.yaml", "config/paper.yaml"])
    parser.add_argument(
        "--shared",
        default="../shared/data",
        help="dataset copies used for sizes when the "
        "configured locations are URLs (default: ../shared/data; absent: nominal sizes)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the plan as JSON (per rule: jobs, GPUs per "
        "job, memory per GPU, calls, tokens, GPU-hours; per API model: calls, tokens, estimated "
        "cost) instead of tables",
    )
    args = parser.parse_args(argv)
    try:
        config = load_config(args.configfile)
    except ValueError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    jobs = dry_run_jobs(args.configfile)
    shared = Path(args.shared) if Path(args.shared).is_dir() else None
    plan = build_plan(config, jobs, shared)
    if args.json:
        print(plan_json(plan))
        return
    print(f"Cost plan for {' + '.join(args.configfile)} (a from-scratch run; no model is loaded)\n")
    print(render(plan))


if __name__ == "__main__":
    main()
