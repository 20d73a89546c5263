"""Model specifications as written in the config (`models:` section).

A spec holds two kinds of settings (`NUMBER_KEYS`, `RUN_KEYS`):

- what defines the model's numbers: which weights (source, id, path, revision, gguf_file, and a random
  stand-in's tokenizer and init), the dtype they compute in, and the chat template's switches
  (chat_template_kwargs). The first (`FILE_KEYS`) enter `prepare_model`'s params and the prepared
  directory's fingerprint.json, which every model-bound rule takes as an input: changing one prepares the
  model again and reruns everything that used it. The template switches change the prompts, not the files:
  they rerun what used the model (a tracked param, rules/model_refs.smk `model_numbers`) without preparing it.
  So do a hosted model's `provider` and `request` (what its API is asked: models/api.py) and an endpoint's
  `logprobs` (whether it returns log-probabilities: a CW-POR judge without them has no LLC).
- how the model runs: device, batch size, generation and scoring backends, server URL and key variable,
  requests in flight, vLLM engine settings. They reach the rules as params Snakemake does not track (rules/model_refs.smk,
  `model_ref`), so changing one reruns nothing: on a CPU the in-process results are the same bits at any
  batch size (models/decoding.py), and the call cache keeps each backend's generations apart
  (models/serving.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

Source = Literal["hf", "gguf-package", "local", "openai", "random"]
GenerationBackendKind = Literal["local", "vllm", "server"]
ScoringBackendKind = Literal["local", "server"]
Provider = Literal["openai", "anthropic"]
PROVIDERS = ("openai", "anthropic")
# `request` keys the client sets itself (model, messages; the timeout follows the token budget, models/api.py)
# or that would change what one request returns (a stream, n choices), and the SDKs' escape hatches, which
# would send what the request does not show.
RESERVED_REQUEST_KEYS = frozenset(
    {"model", "messages", "stream", "n", "timeout", "extra_headers", "extra_query", "extra_body"}
)

# Every field of ModelSpec but `name` is exactly one of these (tests/test_models_spec.py checks it).
FILE_KEYS = ("source", "id", "path", "revision", "gguf_file", "dtype", "tokenizer", "init")
NUMBER_KEYS = (*FILE_KEYS, "chat_template_kwargs", "provider", "request", "logprobs")
# Number keys added after results existed: left out of `number_settings` while unset, so a model that does
# not use them keeps the tracked param it had and nothing reruns.
LATER_NUMBER_KEYS = ("provider", "request", "logprobs")
RUN_KEYS = (
    "device",
    "batch_size",
    "generation_backend",
    "scoring_backend",
    "base_url",
    "api_key_env",
    "concurrency",
    "vllm",
)


@dataclass(frozen=True)
class VLLMSettings:
    """How the workflow starts a model's vLLM engine (`generation_backend: vllm`); run settings only.

    The engine is a vLLM OpenAI-compatible server started by the job that needs it, from the environment
    holding vLLM (`python`, made by `make vllm`), on a loopback port, serving the prepared directory; the
    job stops it when it ends (models/serving.py, `VLLMServer`)."""

    python: str = ".venv-vllm/bin/python"  # interpreter of the environment holding vLLM
    max_model_len: int | None = None  # None: the model's own context length
    tensor_parallel_size: int = 1
    gpu_memory_utilization: float = 0.85  # share of the GPU's memory the engine reserves
    enable_prefix_caching: bool = True
    max_num_seqs: int | None = None  # sequences decoded at once (None: vLLM's default)
    enforce_eager: bool = False  # skip CUDA-graph / compile warm-up (faster start, slower decoding)
    cpu_kvcache_gb: int = 4  # CPU engine only: GiB of key/value cache (VLLM_CPU_KVCACHE_SPACE)
    start_timeout_s: int = 1800  # loading a 31B model from a network filesystem takes minutes
    # Further `vllm serve` arguments, passed as written (e.g. ["--language-model-only"] for a vision-language
    # checkpoint read as text only). Like the rest of this block a run setting: they must not change the
    # numbers (a quantization or a different dtype would; use the model's own keys for those).
    extra_args: tuple[str, ...] = ()

    @classmethod
    def from_config(cls, name: str, entry: dict[str, Any] | None) -> VLLMSettings:
        entry = dict(entry or {})
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(entry) - known
        if unknown:
            raise ValueError(f"models.{name}.vllm: unknown key(s) {sorted(unknown)}; allowed: {sorted(known)}")
        extra = entry.get("extra_args", ())
        if isinstance(extra, str) or not all(isinstance(arg, str) for arg in extra):
            raise ValueError(f"models.{name}.vllm.extra_args must be a list of strings, got {extra!r}")
        return cls(**{**entry, "extra_args": tuple(extra)})


@dataclass(frozen=True)
class ModelSpec:
    name: str
    source: Source
    # hub id (hf), package name (gguf-package), model name (openai) or transformers model type (random)
    id: str | None = None
    path: str | None = None  # local directory (local)
    revision: str | None = None
    gguf_file: str | None = None
    dtype: str = "auto"  # auto: float32 on CPU, bfloat16 on CUDA
    device: str = "auto"
    batch_size: int | str = 8  # or "auto" (GPU: probed scoring batch)
    base_url: str | None = None  # openai / generation_backend server: an OpenAI-compatible server (vLLM)
    api_key_env: str | None = None  # name of the environment variable holding the server's key
    # Who computes uncached generate calls of a local model: in-process transformers, a vLLM engine the job
    # starts, or the server at base_url.
    generation_backend: GenerationBackendKind = "local"
    # Who computes uncached choice_logprobs of a local model: in-process transformers, or the server of its
    # generation backend (the vLLM engine the job starts, or the server at base_url), sent the rendered
    # prompt's token ids and asked for the labels' log-probabilities at the answer slot (serving.py).
    scoring_backend: ScoringBackendKind = "local"
    concurrency: int = 64  # requests in flight to a server (vllm, server, openai)
    vllm: VLLMSettings = field(default_factory=VLLMSettings)  # generation_backend vllm: engine settings
    # source random: a tiny randomly initialised model of architecture `id` (a transformers model type such
    # as llama or qwen2) that borrows the tokenizer of the prepared model `tokenizer`; `init` overrides
    # its small default shape. For rehearsing a configuration's wiring offline; its outputs mean nothing.
    tokenizer: str | None = None
    init: dict[str, Any] | None = None
    # Switches of the model's own chat template, passed to it wherever the model's prompts are rendered
    # (models/chat.py): Qwen3 / Qwen3.5 {enable_thinking: false} (no reasoning block before the answer),
    # GPT-OSS {reasoning_effort: low|medium|high}. They change the prompts, so the model's numbers.
    chat_template_kwargs: dict[str, Any] | None = None
    # source openai only: a hosted API called through its provider's own SDK (models/api.py), `openai` (the
    # OpenAI SDK's chat completions) or `anthropic` (the Anthropic SDK's Messages API); unset: the project's
    # OpenAI-compatible client (a local vLLM server, a gateway). `request`: the provider's request settings,
    # passed to its SDK as the provider names them (reasoning_effort, temperature, max_tokens, thinking,
    # output_config, ...). They are the whole request besides the model and the messages: the sampling
    # settings a stage passes (temperature, top_p, max_new_tokens, seed) are not sent to a provider model.
    provider: Provider | None = None
    request: dict[str, Any] | None = None
    # source openai only: whether the endpoint returns log-probabilities (None: inferred, `no_logprobs`).
    # Without them it can generate and judge (a CW-POR judge then has no LLC) but not score answers.
    logprobs: bool | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_config(cls, name: str, entry: dict[str, Any]) -> ModelSpec:
        known = {f for f in cls.__dataclass_fields__ if f not in ("name", "extra")}
        unknown = set(entry) - known
        if unknown:
            raise ValueError(f"models.{name}: unknown key(s) {sorted(unknown)}; allowed: {sorted(known)}")
        spec = cls(name=name, **{**entry, "vllm": VLLMSettings.from_config(name, entry.get("vllm"))})
        required = {"hf": "id", "gguf-package": "id", "local": "path", "openai": "id", "random": "id"}[spec.source]
        if getattr(spec, required) is None:
            raise ValueError(f"models.{name}: source {spec.source!r} needs the key {required!r}")
        if spec.source == "gguf-package" and spec.gguf_file is None:
            raise ValueError(f"models.{name}: source 'gguf-package' needs the key 'gguf_file'")
        if spec.source == "random" and spec.tokenizer is None:
            raise ValueError(f"models.{name}: source 'random' needs the key 'tokenizer' (a model from models:)")
        if spec.source != "random" and (spec.tokenizer is not None or spec.init is not None):
            raise ValueError(f"models.{name}: 'tokenizer' and 'init' apply to source 'random' only")
        if spec.generation_backend not in ("local", "vllm", "server"):
            raise ValueError(
                f"models.{name}: generation_backend must be local, vllm or server, not {spec.generation_backend!r}"
            )
        if spec.generation_backend == "server" and not spec.base_url:
            raise ValueError(f"models.{name}: generation_backend 'server' needs the key 'base_url'")
        if spec.source == "openai" and spec.chat_template_kwargs:
            raise ValueError(
                f"models.{name}: source 'openai' is rendered by its server; 'chat_template_kwargs' "
                "applies to models with a local chat template"
            )
        if spec.source == "openai" and spec.generation_backend != "local":
            raise ValueError(f"models.{name}: source 'openai' is served already; drop generation_backend")
        _check_scoring(spec)
        _check_provider(spec)
        return spec

    def number_settings(self) -> dict[str, Any]:
        """The settings that define the model's numbers (`NUMBER_KEYS`), with its name: a tracked param of
        every rule using the model."""
        return {
            "name": self.name,
            **{
                key: getattr(self, key)
                for key in NUMBER_KEYS
                if key not in LATER_NUMBER_KEYS or getattr(self, key) is not None
            },
        }

    def file_settings(self) -> dict[str, Any]:
        """The settings that define the prepared files (`FILE_KEYS`), with its name: prepare_model's params."""
        return {"name": self.name, **{key: getattr(self, key) for key in FILE_KEYS}}

    def run_settings(self) -> dict[str, Any]:
        """How the model runs (`RUN_KEYS`): nothing computed depends on these."""
        return {key: getattr(self, key) for key in RUN_KEYS}


def _check_scoring(spec: ModelSpec) -> None:
    """Where a model's answer labels are scored, and whether its endpoint can, each mistake naming its key."""
    key = f"models.{spec.name}"
    if spec.scoring_backend not in ("local", "server"):
        raise ValueError(f"{key}.scoring_backend: must be local or server, not {spec.scoring_backend!r}")
    if spec.scoring_backend == "server" and spec.source == "openai":
        raise ValueError(
            f"{key}.scoring_backend: source 'openai' always scores through its endpoint; drop scoring_backend"
        )
    if spec.scoring_backend == "server" and spec.generation_backend == "local":
        raise ValueError(
            f"{key}.scoring_backend: 'server' scores on the model's generation server; set generation_backend "
            "to vllm (an engine the job starts) or server (the one at base_url)"
        )
    if spec.logprobs is not None and not isinstance(spec.logprobs, bool):
        raise ValueError(f"{key}.logprobs: true or false, not {spec.logprobs!r}")
    if spec.logprobs is not None and spec.source != "openai":
        raise ValueError(f"{key}.logprobs: applies to source 'openai' (an endpoint); a local model always has them")
    if spec.logprobs and spec.provider == "anthropic":
        raise ValueError(f"{key}.logprobs: the Anthropic Messages API returns no log-probabilities")


# OpenAI's reasoning models (request.reasoning_effort other than "none") refuse `logprobs`.
NO_REASONING = (None, "none")


def no_logprobs(spec: Any) -> str | None:
    """Why the model's endpoint returns no log-probabilities, naming the key that says so; None where it does
    (every local model; an endpoint unless its provider, its request or `logprobs: false` rules them out).
    `spec`: a ModelSpec, or a ModelRef (loading.py), which carries the same fields."""
    key = f"models.{spec.name}"
    if spec.source != "openai" or spec.logprobs:
        return None
    if spec.logprobs is False:
        return f"{key}.logprobs is false (its endpoint returns no log-probabilities)"
    if spec.provider == "anthropic":
        return f"{key}.provider is anthropic, whose Messages API returns no log-probabilities"
    effort = (spec.request or {}).get("reasoning_effort")
    if spec.provider == "openai" and effort not in NO_REASONING:
        return (
            f"{key}.request.reasoning_effort is {effort!r}: OpenAI's reasoning models return no log-probabilities "
            "(set logprobs: true if this one does)"
        )
    return None


def _check_provider(spec: ModelSpec) -> None:
    """A hosted model's provider and request settings, each mistake naming its key."""
    key = f"models.{spec.name}"
    if spec.provider is not None and spec.provider not in PROVIDERS:
        raise ValueError(
            f"{key}.provider: {spec.provider!r} is not a provider; use one of {list(PROVIDERS)} "
            "(or leave it unset for an OpenAI-compatible server such as vLLM)"
        )
    if spec.provider is not None and spec.source != "openai":
        raise ValueError(f"{key}.provider: applies to source 'openai' (a hosted API), not {spec.source!r}")
    if spec.request is not None and spec.provider is None:
        raise ValueError(
            f"{key}.request: the provider's request settings need 'provider' (openai or anthropic); "
            "an OpenAI-compatible server without one is sent the stage's sampling settings"
        )
    request = {} if spec.request is None else spec.request
    if not isinstance(request, dict) or not all(isinstance(k, str) for k in request):
        raise ValueError(
            f"{key}.request: must be a mapping of the provider's parameter names to values, got {request!r}"
        )
    reserved = sorted(set(request) & RESERVED_REQUEST_KEYS)
    if reserved:
        raise ValueError(
            f"{key}.request.{reserved[0]}: set by the client, not the config "
            f"(reserved: {sorted(RESERVED_REQUEST_KEYS)})"
        )
    if spec.provider == "anthropic":
        cap = request.get("max_tokens")
        if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1:
            raise ValueError(
                f"{key}.request.max_tokens: the Anthropic Messages API needs a positive token cap, got {cap!r}"
            )


def resolve_device(device: str, name: str | None = None) -> str:
    """`auto`: a GPU where torch sees one, else the CPU. A device that names CUDA fails here when CUDA is
    unusable, instead of the job running for hours on a CPU core (a paper model on a node without a working
    driver, or a CPU build of torch)."""
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        why = (
            "this torch is a CPU build"
            if torch.version.cuda is None
            else f"torch {torch.__version__} (CUDA {torch.version.cuda}) sees no usable GPU (driver, CUDA_VISIBLE_DEVICES)"
        )
        key = f"models.{name}.device" if name else "the model's device"
        raise RuntimeError(
            f"{key} is {device!r}, but {why}: run where a GPU is visible, or set it to auto or cpu to run on the CPU"
        )
    return device


def resolve_dtype(dtype: str, device: str):
    import torch

    if dtype == "auto":
        # bf16 matmul on these CPUs is ~100x slower than fp32.
        return torch.bfloat16 if device.startswith("cuda") else torch.float32
    return {"float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
