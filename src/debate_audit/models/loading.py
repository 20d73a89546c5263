"""The one way to get a model for inference: a `ModelRef` (what rules pass to scripts) opened with
`open_model`, which picks the backend the spec names and closes it (flushing the call cache, stopping an
engine it started) on exit.

    with open_model(ref, cache=cache) as lm:
        lm.generate(...)

Whatever the backend (in-process transformers, a local model generating and scoring through a vLLM engine
the job starts or an OpenAI-compatible server, a model behind an endpoint through its provider's SDK:
`api.EndpointChatModel`), the object satisfies `ChatModel`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .params import ChatPrompt, ChoiceScores, GenerationParams, Reply
from .prepare import read_fingerprint
from .serving import CompletionsBackend, VLLMServer
from .spec import ModelSpec, VLLMSettings, no_logprobs

Messages = list[dict[str, str]]


class ChatModel(Protocol):
    """What every stage may ask of a model.

    Scoring answer labels: `scoring_prompt(messages, assistant_prefix)` gives what `choice_scores` takes for
    this model (a local model's rendered text ending at the answer slot; an endpoint model's `ChatPrompt`, the
    conversation its endpoint renders), and `choice_scores` each label's log-probability with the flag of a
    bound (a label outside an endpoint's top-k). `no_logprobs`: why the model cannot score (an endpoint
    without log-probabilities, naming the key), else None. `choice_logprobs` takes rendered text (local
    models) and gives the values alone; a model behind an endpoint has no local template: its `render_chat`
    raises, naming the model. `renders_own_template`: True for a model behind a chat endpoint, whose endpoint
    renders the conversation (what readers such as eraudit/common/readout.py branch on)."""

    no_logprobs: str | None
    renders_own_template: bool

    def generate(
        self, conversations: Sequence[Messages], params: GenerationParams, *, desc: str = ...
    ) -> list[list[str]]: ...

    def generate_replies(
        self, conversations: Sequence[Messages], params: GenerationParams, *, desc: str = ...
    ) -> list[list[Reply]]: ...

    def choice_logprobs(
        self, prompts: Sequence[str], labels: Sequence[str], *, desc: str = ...
    ) -> list[list[float]]: ...

    def scoring_prompt(self, messages: Messages, assistant_prefix: str | None = None) -> str | ChatPrompt: ...

    def choice_scores(
        self, prompts: Sequence[str | ChatPrompt], labels: Sequence[str], *, desc: str = ...
    ) -> list[ChoiceScores]: ...

    def render_chat(self, messages: Messages, assistant_prefix: str | None = None) -> str: ...


@dataclass(frozen=True)
class ModelRef:
    """A prepared model directory and the fields of its spec that inference needs: the directory and dtype
    (which, with the weights' fingerprint, define the numbers) and the spec's run settings (spec.RUN_KEYS).

    A fine-tuned verifier is its base model's reference with the verifier's directory. `api_key_env` is the
    name of the environment variable holding the server's key, never the key.
    """

    name: str  # the model's key under `models:` (a fine-tuned verifier: its base model's)
    directory: str  # resources/models/<name>, or a fine-tuned verifier's directory
    source: str = "local"
    id: str | None = None
    device: str = "auto"
    dtype: str = "auto"
    batch_size: int | str = 8
    base_url: str | None = None
    api_key_env: str | None = None
    generation_backend: str = "local"
    scoring_backend: str = "local"  # local (in-process) or server (the generation backend's server)
    chat_template_kwargs: dict[str, Any] | None = None
    concurrency: int = 64
    vllm: VLLMSettings = VLLMSettings()
    provider: str | None = None  # source openai: a hosted API through its SDK (models/api.py)
    request: dict[str, Any] | None = None  # the provider's request settings, sent as written
    logprobs: bool | None = None  # source openai: whether its endpoint returns log-probabilities (spec.no_logprobs)

    @classmethod
    def from_spec(cls, spec: ModelSpec, directory: str | Path) -> ModelRef:
        shared = {f.name for f in dataclasses.fields(cls)} - {"directory"}
        return cls(directory=str(directory), **{k: getattr(spec, k) for k in shared})

    def to_params(self) -> dict[str, Any]:
        """Plain values (a rule's params, the provenance of its outputs)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> ModelRef:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(params) - known
        if unknown:
            raise ValueError(f"model reference {params.get('name')!r}: unknown field(s) {sorted(unknown)}")
        fields = dict(params)
        if isinstance(fields.get("vllm"), Mapping):
            fields["vllm"] = VLLMSettings(**fields["vllm"])
        return cls(**fields)

    def fingerprint(self) -> dict[str, Any]:
        """The directory's fingerprint.json record (weights sha256, and a verifier's base weights)."""
        return read_fingerprint(self.directory)


def _load(ref: ModelRef, cache: str | Path | None) -> Any:
    if ref.source == "openai":
        from .api import EndpointChatModel  # the provider's SDK: only when a model behind an endpoint is used

        return EndpointChatModel(
            name=ref.name,
            provider=ref.provider,
            model=ref.id,
            base_url=ref.base_url,
            api_key_env=ref.api_key_env,
            request=ref.request,
            fingerprint=ref.fingerprint()["weights_sha256"],
            cache=None if cache is None else str(cache),
            directory=ref.directory,
            concurrency=ref.concurrency,
            no_logprobs=no_logprobs(ref),
        )
    from .lm import LanguageModel  # torch: only when a local model is loaded
    from .spec import resolve_device, resolve_dtype

    backend = None
    if ref.generation_backend == "vllm":
        # The engine computes in the dtype the in-process model would (fp32 on a CPU, bf16 on a GPU).
        device = resolve_device(ref.device, ref.name)
        dtype = str(resolve_dtype(ref.dtype, device)).removeprefix("torch.")
        backend = VLLMServer(
            ref.directory, name=ref.name, dtype=dtype, settings=ref.vllm, concurrency=ref.concurrency, device=device
        )
    elif ref.generation_backend == "server":
        backend = CompletionsBackend(
            ref.base_url, ref.directory, name=ref.name, api_key_env=ref.api_key_env, concurrency=ref.concurrency
        )
    elif ref.generation_backend != "local":
        raise ValueError(f"model {ref.name}: unknown generation_backend {ref.generation_backend!r}")
    if ref.scoring_backend not in ("local", "server") or (ref.scoring_backend == "server" and backend is None):
        raise ValueError(
            f"models.{ref.name}.scoring_backend: {ref.scoring_backend!r} needs generation_backend vllm or server"
        )
    return LanguageModel(
        ref.directory,
        device=resolve_device(ref.device, ref.name),
        dtype=ref.dtype,
        batch_size=ref.batch_size,
        cache=cache,
        generation_backend=backend,
        chat_template_kwargs=ref.chat_template_kwargs,
        scoring_backend=backend if ref.scoring_backend == "server" else None,
    )


@contextlib.contextmanager
def open_model(ref: ModelRef, cache: str | Path | None = None) -> Iterator[ChatModel]:
    """The model `ref` names, loaded the way its spec says; closed (its call cache flushed) on exit. Inside a
    rule (`rule_context`), its fingerprint (and what runs a Qwen3.5's linear-attention layers) joins the
    provenance of every output written afterwards."""
    from debate_audit.runtime.provenance import record_model

    # first, so that what the model records while loading (LanguageModel: a Qwen3.5's kernels) has its entry
    record_model(ref.name, ref.directory, ref.fingerprint())
    model = _load(ref, cache)
    try:
        yield model
    finally:
        model.close()
