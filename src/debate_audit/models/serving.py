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

import email.utils
import http.client
import json
import logging
import os
import random
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from .cache import CallCache, cache_key

log = logging.getLogger(__name__)


class GenerationBackend(Protocol):
    # skip_special_tokens False: a reasoning model's reply keeps the markers its final answer is read from.
    def complete(self, prompts: Sequence[str], params: Any, *, skip_special_tokens: bool = True) -> list[list[str]]: ...


def _sampling_fields(params: Any) -> dict[str, Any]:
    if params.do_sample:
        return {"temperature": params.temperature, "top_p": params.top_p, "n": params.num_samples,
                "seed": params.seed}
    return {"temperature": 0.0, "n": 1}


# Statuses a server or a gateway sends for a passing condition (throttling, overload, a restarting
# engine): worth the same request again. Anything else (400 bad request, 401 bad key, 404 unknown model)
# fails at once, naming the status.
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Retry:
    """How a request is repeated after a retryable failure: exponential backoff with full jitter, capped,
    or the server's own `Retry-After` when it sends one (also capped)."""

    attempts: int = 8  # tries in all, the first included
    backoff_s: float = 1.0  # the first wait's upper bound; doubles each time
    max_wait_s: float = 60.0


def _retry_after(err: urllib.error.HTTPError) -> float | None:
    value = err.headers.get("Retry-After") if err.headers else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value)
        return None if when is None else max(0.0, when.timestamp() - time.time())


def post_json(url: str, payload: dict[str, Any], *, api_key_env: str | None, timeout: float,
              retry: Retry = Retry()) -> dict[str, Any]:
    """POST `payload` to `url` with the key from `api_key_env` (if named) as a bearer token; 429, 5xx,
    refused or dropped connections and timeouts are retried (`retry`). Log lines name the URL and the
    status, never the key."""
    headers = {"Content-Type": "application/json"}
    if api_key_env:
        key = os.environ.get(api_key_env)
        if not key:
            raise RuntimeError(f"environment variable {api_key_env} (api_key_env) is not set")
        headers["Authorization"] = f"Bearer {key}"
    data = json.dumps(payload).encode()
    for attempt in range(1, retry.attempts + 1):
        request = urllib.request.Request(url, data=data, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (configured URL)
                return json.loads(response.read())
        except urllib.error.HTTPError as err:
            if err.code not in RETRY_STATUSES or attempt == retry.attempts:
                detail = err.read()[:300].decode("utf-8", "replace") if err.fp else ""
                raise RuntimeError(f"POST {url}: HTTP {err.code} {err.reason} after {attempt} attempt(s): {detail}") from err
            reason, hint = f"HTTP {err.code}", _retry_after(err)
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError) as err:
            if attempt == retry.attempts:
                raise RuntimeError(f"POST {url}: {err} after {attempt} attempt(s)") from err
            reason, hint = type(err).__name__, None
        wait = min(retry.max_wait_s, hint if hint is not None else random.uniform(0, retry.backoff_s * 2 ** (attempt - 1)))
        log.warning("POST %s: %s (attempt %d of %d); retrying in %.1f s", url, reason, attempt, retry.attempts, wait)
        time.sleep(wait)
    raise AssertionError("unreachable")


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

    def _one(self, prompt: str, params: Any, skip_special_tokens: bool) -> list[str]:
        body = {"model": self.model, "prompt": prompt, "max_tokens": params.max_new_tokens, **_sampling_fields(params),
                **({} if skip_special_tokens else {"skip_special_tokens": False})}  # a vLLM extension
        choices = post_json(self.url, body, api_key_env=self.api_key_env, timeout=self.timeout)["choices"]
        return [c["text"].strip() for c in sorted(choices, key=lambda c: c.get("index", 0))]

    def complete(self, prompts: Sequence[str], params: Any, *, skip_special_tokens: bool = True) -> list[list[str]]:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(lambda p: self._one(p, params, skip_special_tokens), prompts))


class VLLMBackend:
    """vLLM in the same process; the engine starts on the first uncached call, so a fully cached rerun
    never loads it."""

    def __init__(self, model_dir: str, *, dtype: str = "bfloat16", **engine_args: Any):
        self.model_dir = str(model_dir)
        self.dtype = dtype
        self.engine_args = engine_args
        self._llm = None

    def complete(self, prompts: Sequence[str], params: Any, *, skip_special_tokens: bool = True) -> list[list[str]]:
        from vllm import LLM, SamplingParams  # optional dependency

        if self._llm is None:
            self._llm = LLM(model=self.model_dir, dtype=self.dtype, **self.engine_args)
        if params.do_sample:
            sampling = SamplingParams(n=params.num_samples, temperature=params.temperature, top_p=params.top_p,
                                      seed=params.seed, max_tokens=params.max_new_tokens,
                                      skip_special_tokens=skip_special_tokens)
        else:
            sampling = SamplingParams(n=1, temperature=0.0, max_tokens=params.max_new_tokens,
                                      skip_special_tokens=skip_special_tokens)
        outputs = self._llm.generate(list(prompts), sampling, use_tqdm=True)
        return [[o.text.strip() for o in out.outputs] for out in outputs]
