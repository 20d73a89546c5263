"""Optional generation backends for large jobs: an OpenAI-compatible server (e.g. `vllm serve`) or vLLM
in-process. Off by default; `LanguageModel(..., generation_backend=...)` hands uncached generate calls to
one of these, so caching, rendering (the local chat template) and the return shape stay the same.

Both take fully rendered prompt texts (the server's /v1/completions endpoint, not chat), so the text the
model sees is byte-identical to the local path and the cache key does not depend on the backend.
"""

from __future__ import annotations

import json
import os
import urllib.request
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Protocol


class GenerationBackend(Protocol):
    def complete(self, prompts: Sequence[str], params: Any) -> list[list[str]]: ...


class OpenAICompatibleBackend:
    """POST /v1/completions to a server such as `vllm serve MODEL`; requests run concurrently so the
    server's continuous batching sees many at once."""

    def __init__(self, base_url: str, model: str, *, api_key_env: str | None = None, concurrency: int = 64,
                 timeout: float = 600.0):
        self.url = base_url.rstrip("/") + "/completions"
        self.model = model
        self.api_key = os.environ.get(api_key_env) if api_key_env else None
        self.concurrency = concurrency
        self.timeout = timeout

    def _one(self, prompt: str, params: Any) -> list[str]:
        body: dict[str, Any] = {"model": self.model, "prompt": prompt, "max_tokens": params.max_new_tokens}
        if params.do_sample:
            body.update(temperature=params.temperature, top_p=params.top_p, n=params.num_samples, seed=params.seed)
        else:
            body.update(temperature=0.0, n=1)
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(self.url, data=json.dumps(body).encode(), headers=headers)
        with urllib.request.urlopen(request, timeout=self.timeout) as response:
            choices = json.load(response)["choices"]
        return [c["text"].strip() for c in sorted(choices, key=lambda c: c.get("index", 0))]

    def complete(self, prompts: Sequence[str], params: Any) -> list[list[str]]:
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            return list(pool.map(lambda p: self._one(p, params), prompts))


class VLLMBackend:
    """vLLM in the same process (imported only when constructed)."""

    def __init__(self, model_dir: str, *, dtype: str = "bfloat16", **engine_args: Any):
        from vllm import LLM  # optional dependency

        self.llm = LLM(model=str(model_dir), dtype=dtype, **engine_args)

    def complete(self, prompts: Sequence[str], params: Any) -> list[list[str]]:
        from vllm import SamplingParams

        if params.do_sample:
            sampling = SamplingParams(n=params.num_samples, temperature=params.temperature, top_p=params.top_p,
                                      seed=params.seed, max_tokens=params.max_new_tokens)
        else:
            sampling = SamplingParams(n=1, temperature=0.0, max_tokens=params.max_new_tokens)
        outputs = self.llm.generate(list(prompts), sampling, use_tqdm=True)
        return [[o.text.strip() for o in out.outputs] for out in outputs]
