"""The one way to get a model for inference: a `ModelRef` (what rules pass to scripts) opened with
`open_model`, which picks the backend the spec names and closes it (flushing the call cache) on exit.

    with open_model(ref, cache=cache) as lm:
        lm.generate(...)

Whatever the backend (in-process transformers, a local model generating through an OpenAI-compatible server
or in-process vLLM, a remote chat model), the object satisfies `ChatModel`.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .params import GenerationParams
from .prepare import read_fingerprint
from .serving import OpenAIChatModel, OpenAICompatibleBackend, VLLMBackend
from .spec import ModelSpec

Messages = list[dict[str, str]]


class ChatModel(Protocol):
    """What every stage may ask of a model. A remote chat model (`source: openai`) has no local weights or
    tokenizer: its `choice_logprobs` and `render_chat` raise, naming the model."""

    def generate(self, conversations: Sequence[Messages], params: GenerationParams, *,
                 desc: str = ...) -> list[list[str]]: ...

    def choice_logprobs(self, prompts: Sequence[str], labels: Sequence[str], *,
                        desc: str = ...) -> list[list[float]]: ...

    def render_chat(self, messages: Messages, assistant_prefix: str | None = None) -> str: ...


@dataclass(frozen=True)
class ModelRef:
    """A prepared model directory and the fields of its spec that inference needs.

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
    chat_template_kwargs: dict[str, Any] | None = None

    @classmethod
    def from_spec(cls, spec: ModelSpec, directory: str | Path) -> ModelRef:
        shared = {f.name for f in dataclasses.fields(cls)} - {"directory"}
        return cls(directory=str(directory), **{k: getattr(spec, k) for k in shared})

    def to_params(self) -> dict[str, Any]:
        """Plain values, so Snakemake can compare a rule's params between runs."""
        return dataclasses.asdict(self)

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> ModelRef:
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(params) - known
        if unknown:
            raise ValueError(f"model reference {params.get('name')!r}: unknown field(s) {sorted(unknown)}")
        return cls(**params)

    def fingerprint(self) -> dict[str, Any]:
        """The directory's fingerprint.json record (weights sha256, and a verifier's base weights)."""
        return read_fingerprint(self.directory)


def _load(ref: ModelRef, cache: str | Path | None) -> Any:
    if ref.source == "openai":
        return OpenAIChatModel(base_url=ref.base_url, model=ref.id, api_key_env=ref.api_key_env,
                               fingerprint=ref.fingerprint()["weights_sha256"],
                               cache=None if cache is None else str(cache))
    backend = None
    if ref.generation_backend == "vllm":
        backend = VLLMBackend(ref.directory, dtype="bfloat16" if ref.dtype == "auto" else ref.dtype)
    elif ref.generation_backend == "server":
        # `vllm serve <hub id>` names the model by its id, `vllm serve <dir>` by the directory.
        served = ref.id if ref.source == "hf" else ref.directory
        backend = OpenAICompatibleBackend(ref.base_url, served, api_key_env=ref.api_key_env)
    elif ref.generation_backend != "local":
        raise ValueError(f"model {ref.name}: unknown generation_backend {ref.generation_backend!r}")
    from .lm import LanguageModel  # torch: only when a local model is loaded

    return LanguageModel(ref.directory, device=ref.device, dtype=ref.dtype, batch_size=ref.batch_size, cache=cache,
                         generation_backend=backend, chat_template_kwargs=ref.chat_template_kwargs)


@contextlib.contextmanager
def open_model(ref: ModelRef, cache: str | Path | None = None) -> Iterator[ChatModel]:
    """The model `ref` names, loaded the way its spec says; closed (its call cache flushed) on exit. Inside a
    rule (`rule_context`), its fingerprint joins the provenance of every output written afterwards."""
    from debate_audit.provenance import record_model

    model = _load(ref, cache)
    record_model(ref.name, ref.directory, ref.fingerprint())
    try:
        yield model
    finally:
        model.close()
