"""Models served over HTTP or by vLLM: the one place that talks to an OpenAI-compatible server.

- `OpenAIChatModel`: a remote model with no local weights (`source: openai`, a hosted API or `vllm serve`),
  called through /chat/completions with the project's call cache. It can generate, not score.
- `OpenAICompatibleBackend` / `VLLMBackend`: generation backends for a *local* model
  (`generation_backend: server` / `vllm` in its spec). `LanguageModel.generate` hands them uncached calls
  as fully rendered prompt texts (/v1/completions, not chat), so the text the model sees is byte-identical
  to the in-process path and the cache key does not depend on the backend.

An API key is read from the environment variable the spec names, at call time; it never enters a cache
key, a log line or an output.
"""

from __future__ import annotations

import json
import logging
import os
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol

from .cache import CallCache, cache_key

log = logging.getLogger(__name__)


class GenerationBackend(Protocol):
    def complete(self, prompts: Sequence[str], params: Any) -> list[list[str]]: ...


def _sampling_fields(params: Any) -> dict[str, Any]:
    if params.do_sample:
        return {"temperature": params.temperature, "top_p": params.top_p, "n": params.num_samples,
                "seed": params.seed}
    return {"temperature": 0.0, "n": 1}


def post_json(url: str, payload: dict[str, Any], *, api_key_env: str | None, timeout: float) -> dict[str, Any]:
    """POST `payload` to `url` with the key from `api_key_env` (if named) as a bearer token."""
    headers = {"Content-Type": "application/json"}
    if api_key_env:
        key = os.environ.get(api_key_env)
        if not key:
            raise RuntimeError(f"environment variable {api_key_env} (api_key_env) is not set")
        headers["Authorization"] = f"Bearer {key}"
    request = urllib.request.Request(url, data=json.dumps(payload).encode(), headers=headers, method="POST")
    with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (configured URL)
        return json.loads(response.read())


class OpenAIChatModel:
    """Chat completions from an OpenAI-compatible server, cached like `LanguageModel.generate`.

    Requests run concurrently so a server with continuous batching sees many at once; each finished reply
    is cached before the next batch of requests, so an interrupted stage resumes where it stopped.
    """

    def __init__(self, *, base_url: str | None, model: str, api_key_env: str | None, fingerprint: str,
                 cache: str | None, timeout: float = 300.0, concurrency: int = 16):
        if not base_url:
            raise ValueError(f"model {model!r}: source 'openai' needs base_url")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key_env = api_key_env
        self.fingerprint = fingerprint
        self.cache = CallCache(cache, namespace=self.fingerprint)
        self.timeout = timeout
        self.concurrency = concurrency

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        return post_json(self.url, payload, api_key_env=self.api_key_env, timeout=self.timeout)

    def _one(self, messages: list[dict[str, str]], params: Any) -> list[str]:
        payload = {"model": self.model, "messages": messages, "max_tokens": params.max_new_tokens,
                   **_sampling_fields(params)}
        reply = self._post(payload)
        choices = sorted(reply.get("choices", []), key=lambda c: c.get("index", 0))
        return [((c.get("message") or {}).get("content") or "").strip() for c in choices]

    def generate(self, conversations: Sequence[list[dict[str, str]]], params: Any, *,
                 desc: str = "generating") -> list[list[str]]:
        keys = [cache_key(self.fingerprint, "api", "generate", json.dumps(m, sort_keys=True), params.key())
                for m in conversations]
        cached = self.cache.get_many(keys)
        todo = list({k: i for i, k in enumerate(keys) if k not in cached}.values())
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            for start in range(0, len(todo), self.concurrency):
                chunk = todo[start : start + self.concurrency]
                fresh = dict(zip((keys[i] for i in chunk), pool.map(lambda i: self._one(conversations[i], params), chunk)))
                self.cache.put_many("generate", fresh)
                cached.update(fresh)
        return [cached[k] for k in keys]

    def choice_logprobs(self, prompts: Sequence[str], labels: Sequence[str], **_: Any) -> list[list[float]]:
        raise NotImplementedError(
            f"model {self.model!r} (source 'openai') has no local weights, so it cannot score answer labels; "
            "use a local model (hf, gguf-package or local) for judges and verifiers"
        )

    def render_chat(self, messages: list[dict[str, str]], assistant_prefix: str | None = None) -> str:
        raise NotImplementedError(
            f"model {self.model!r} (source 'openai') is rendered by its server; there is no local chat template "
            "to show the text it sees"
        )

    def close(self) -> None:
        log.info(self.cache.summary())
        self.cache.close()


class OpenAICompatibleBackend:
    """POST /v1/completions to a server such as `vllm serve MODEL`, with rendered prompts."""

    def __init__(self, base_url: str, model: str, *, api_key_env: str | None = None, concurrency: int = 64,
                 timeout: float = 600.0):
        self.url = base_url.rstrip("/") + "/completions"
        self.model = model
        self.api_key_env = api_key_env
        self.concurrency = concurrency
        self.timeout = timeout

    def _one(self, prompt: str, params: Any) -> list[str]:
        body = {"model": self.model, "prompt": prompt, "max_tokens": params.max_new_tokens, **_sampling_fields(params)}
        choices = post_json(self.url, body, api_key_env=self.api_key_env, timeout=self.timeout)["choices"]
        return [c["text"].strip() for c in sorted(choices, key=lambda c: c.get("index", 0))]

    def complete(self, prompts: Sequence[str], params: Any) -> list[list[str]]:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(lambda p: self._one(p, params), prompts))


class VLLMBackend:
    """vLLM in the same process; the engine starts on the first uncached call, so a fully cached rerun
    never loads it."""

    def __init__(self, model_dir: str, *, dtype: str = "bfloat16", **engine_args: Any):
        self.model_dir = str(model_dir)
        self.dtype = dtype
        self.engine_args = engine_args
        self._llm = None

    def complete(self, prompts: Sequence[str], params: Any) -> list[list[str]]:
        from vllm import LLM, SamplingParams  # optional dependency

        if self._llm is None:
            self._llm = LLM(model=self.model_dir, dtype=self.dtype, **self.engine_args)
        if params.do_sample:
            sampling = SamplingParams(n=params.num_samples, temperature=params.temperature, top_p=params.top_p,
                                      seed=params.seed, max_tokens=params.max_new_tokens)
        else:
            sampling = SamplingParams(n=1, temperature=0.0, max_tokens=params.max_new_tokens)
        outputs = self._llm.generate(list(prompts), sampling, use_tqdm=True)
        return [[o.text.strip() for o in out.outputs] for out in outputs]
