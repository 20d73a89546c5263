"""Hosted models through their providers' own SDKs: `provider: openai` (the `openai` package, chat
completions) and `provider: anthropic` (the `anthropic` package, the Messages API), installed by the `api`
extra (`pip install -e '.[api]'`).

The SDKs do the HTTP: retries with backoff (honouring the provider's Retry-After), timeouts, connection
reuse. This module builds each request as the ER-Audit release's `query_llm.py` does (commit 4cb6829): the
model, one conversation and the spec's `request` mapping, passed to the SDK's create() as keyword
arguments under the provider's own names, nothing renamed or added. The sampling settings a stage passes
(`GenerationParams`: temperature, top_p, max_new_tokens, seed, n) are not sent: the release sends Claude
no sampling parameter and GPT no token cap, and a value the workflow sets per pool would otherwise change
that. The stage's draw (its seed and sample index) still names the reply in the cache, so draw j of a
pool is its own request and its own cached reply; `max_new_tokens` sizes the request's timeout where the
request sets no token cap of its own.

Every reply is written to the call cache (cache.py) the moment it arrives, with its finish reason (OpenAI
`finish_reason`, Anthropic `stop_reason`), the provider's token counts and the SDK that fetched it; a reply
stopped by its token cap (`length`, `max_tokens`) is `Reply.cut`, which the paraphrase pools reject and
redraw. When a request fails for good (the SDK's retries spent, or an error no retry helps), no further
request is started, those in flight are awaited and cached, and the job stops naming the failure: a rerun
pays only for what is missing.

The API key is read from the environment variable `api_key_env` names when the first request is due and
handed to the SDK client only; it is not in a cache key (built from the model, the messages, the request
settings and the draw), a cache record, a log line or an exception message (an SDK error is re-raised with
the key's value replaced by the variable's name, in case a provider echoes it).
"""

from __future__ import annotations

import importlib
import inspect
import json
import logging
import os
import threading
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from tqdm import tqdm

from .cache import CallCache, cache_key
from .params import Reply, record_replies
from .spec import PROVIDERS, RESERVED_REQUEST_KEYS

log = logging.getLogger(__name__)

Messages = list[dict[str, str]]

# Why a reply ended, in each provider's words, when it ended at its token cap rather than by itself:
# OpenAI's finish_reason "length" (max_completion_tokens, or the model's own output limit); Anthropic's
# stop_reason "max_tokens" and "model_context_window_exceeded" (the prompt and the reply filled the window).
CUT_REASONS = {"openai": frozenset({"length"}), "anthropic": frozenset({"max_tokens", "model_context_window_exceeded"})}
# The request settings that cap a reply's tokens, in each provider's names.
TOKEN_CAPS = {"openai": ("max_completion_tokens", "max_tokens"), "anthropic": ("max_tokens",)}

# Tries after the first that the SDK makes on a connection error, a timeout, 408, 409, 429 or 5xx (with its
# own exponential backoff, or the provider's Retry-After): as many as the OpenAI-compatible client makes
# (serving.Retry), since a pool of hundreds of paid requests meets throttling.
MAX_RETRIES = 7

# The request timeout follows the token budget: a reply of B tokens may take QUEUE_S + B / SLOWEST_TOKENS_PER_S
# seconds (the budget at a decoding rate well below what loaded hosted models deliver, reasoning tokens
# included, plus time for the queue and the prompt), so a 16384-token Claude reply may take ~15 min while a
# request that has not answered by then is taken as stuck and retried. B is the request's own token cap
# (TOKEN_CAPS) or, for a request without one (the release's GPT calls), the stage's max_new_tokens: what the
# workflow budgets for a reply of that stage, never sent. A fixed timeout would either give up on long
# replies that were coming or wait for an hour on a short one that never will.
QUEUE_S = 60.0
SLOWEST_TOKENS_PER_S = 20.0


def request_timeout_s(budget_tokens: int) -> float:
    """Seconds the SDK waits for one reply of `budget_tokens` tokens before it retries the request."""
    return QUEUE_S + max(0, budget_tokens) / SLOWEST_TOKENS_PER_S


def token_counts(usage: dict[str, Any] | None, prefix: str = "") -> dict[str, int]:
    """The integer counts of a provider's usage record, nested ones named by their path (OpenAI's
    `completion_tokens_details.reasoning_tokens`)."""
    counts: dict[str, int] = {}
    for name, value in (usage or {}).items():
        if isinstance(value, dict):
            counts.update(token_counts(value, f"{prefix}{name}."))
        elif isinstance(value, int) and not isinstance(value, bool):
            counts[prefix + name] = value
    return counts


def sdk(provider: str) -> Any:
    """The provider's SDK module (`openai` or `anthropic`), or an error saying how to install it."""
    if provider not in PROVIDERS:
        raise ValueError(f"provider {provider!r} is not one of {list(PROVIDERS)}")
    try:
        return importlib.import_module(provider)
    except ImportError as err:
        raise RuntimeError(
            f"provider {provider!r} needs the {provider!r} package: pip install -e '.[api]' "
            "(the api extra, also in dev)"
        ) from err


def create_parameters(provider: str) -> frozenset[str]:
    """The keyword arguments the SDK's create() takes: chat.completions.create (openai) or messages.create
    (anthropic)."""
    sdk(provider)
    if provider == "openai":
        from openai.resources.chat.completions import Completions as Endpoint
    else:
        from anthropic.resources.messages import Messages as Endpoint
    return frozenset(inspect.signature(Endpoint.create).parameters) - {"self"}


class HostedChatModel:
    """A hosted model called through its provider's SDK; cached like every other `ChatModel`.

    `request`: the provider's settings as the spec gives them (`models.<name>.request`), sent with every
    request as they are. Requests run `concurrency` at a time on one SDK client (one connection pool).
    """

    def __init__(
        self,
        *,
        name: str,
        provider: str,
        model: str,
        base_url: str | None,
        api_key_env: str | None,
        request: dict[str, Any] | None,
        fingerprint: str,
        cache: str | None,
        directory: str | Path | None = None,
        concurrency: int = 16,
    ):
        self.name = name
        self.provider = provider
        self.model = model
        self.base_url = base_url
        self.api_key_env = api_key_env
        self.request = dict(request or {})
        self.fingerprint = fingerprint
        self.directory = directory
        self.concurrency = max(1, concurrency)
        self.module = sdk(provider)
        self.engine = f"{provider}-python {self.module.__version__}"
        key = f"models.{name}.request"
        reserved = sorted(set(self.request) & RESERVED_REQUEST_KEYS)
        if reserved:
            raise ValueError(f"{key}.{reserved[0]}: set by the client, not the config")
        unknown = sorted(set(self.request) - create_parameters(provider))
        if unknown:
            what = "chat.completions.create" if provider == "openai" else "messages.create"
            raise ValueError(
                f"{key}.{unknown[0]}: not a parameter of {self.engine} {what}; give the provider's own "
                f"names (unknown: {unknown})"
            )
        caps = [self.request[k] for k in TOKEN_CAPS[provider] if self.request.get(k) is not None]
        self.token_cap: int | None = caps[0] if caps else None
        self.cache = CallCache(cache, namespace=fingerprint)
        self.usage: Counter[str] = Counter()  # tokens of the fresh replies, summed per field of the usage record
        self._client: Any = None
        self._secret: str | None = None
        self._lock = threading.Lock()
        self._told_unsent = False

    # ------------------------------------------------------------------ requests
    def _key(self, messages: Messages, draw: int | None, sample: int) -> str:
        # What the reply depends on: the served model, the messages, everything else sent, and which draw of
        # the stage it is (the pools ask the same prompt once per draw). The key's value is never part of it.
        sent = {"provider": self.provider, "model": self.model, "request": self.request}
        return cache_key(
            self.fingerprint,
            "api",
            "generate",
            json.dumps(messages, sort_keys=True),
            {**sent, "draw": draw, "sample": sample},
        )

    def client(self) -> Any:
        """The SDK client, made on the first uncached request (a fully cached rerun needs no key)."""
        with self._lock:
            if self._client is None:
                if not self.base_url:
                    raise ValueError(f"models.{self.name}.base_url: a hosted model needs its API's URL")
                secret = os.environ.get(self.api_key_env or "")
                if not secret:
                    raise RuntimeError(
                        f"models.{self.name}: environment variable {self.api_key_env} (api_key_env) is not set"
                    )
                self._secret = secret
                factory = self.module.OpenAI if self.provider == "openai" else self.module.Anthropic
                self._client = factory(base_url=self.base_url, api_key=secret, max_retries=MAX_RETRIES)
            return self._client

    def _scrub(self, text: str) -> str:
        return text.replace(self._secret, f"<value of ${self.api_key_env}>") if self._secret else text

    def _ask(self, messages: Messages, timeout: float) -> dict[str, Any]:
        """One request and its reply as a cache record (one reply: the SDKs are not asked for n)."""
        client = self.client()
        try:
            if self.provider == "openai":
                completion = client.chat.completions.create(
                    model=self.model, messages=messages, timeout=timeout, **self.request
                )
                choice = completion.choices[0] if completion.choices else None
                text = (choice.message.content or "") if choice is not None else ""
                reason = choice.finish_reason if choice is not None else None
                usage, served, reply_id = completion.usage, completion.model, completion.id
            else:
                message = client.messages.create(model=self.model, messages=messages, timeout=timeout, **self.request)
                # the answer is the text blocks (query_llm.py: ''.join of them); thinking blocks are left out
                text = "".join(block.text for block in message.content if block.type == "text")
                reason, usage, served, reply_id = message.stop_reason, message.usage, message.model, message.id
        except Exception as err:
            # `from None`: the SDK's exception (and its message) stays out of the log's traceback
            raise RuntimeError(
                self._scrub(
                    f"models.{self.name} ({self.engine}, {self.model} at {self.base_url}): {type(err).__name__}: {err}"
                )
            ) from None
        counts = usage.model_dump(exclude_none=True) if usage is not None else None
        return {
            "texts": [text.strip()],
            "cut": [reason in CUT_REASONS[self.provider]],
            "finish_reasons": [reason],
            "usage": [counts],
            "engine": self.engine,
            "served_model": served,
            "reply_id": reply_id,
        }

    # ------------------------------------------------------------------ the ChatModel interface
    def generate(self, conversations: Sequence[Messages], params: Any, *, desc: str = "generating") -> list[list[str]]:
        return [[r.text for r in replies] for replies in self.generate_replies(conversations, params, desc=desc)]

    def generate_replies(
        self, conversations: Sequence[Messages], params: Any, *, desc: str = "generating"
    ) -> list[list[Reply]]:
        """`params.num_samples` replies per conversation (one when greedy), each its own request and its own
        cached record; each `Reply` with its cut flag, finish reason and token usage."""
        samples = params.num_samples if params.do_sample else 1
        draw = params.seed if params.do_sample else None
        keys = [[self._key(list(m), draw, k) for k in range(samples)] for m in conversations]
        cached = self.cache.get_many(k for row in keys for k in row)
        todo = {k: list(m) for m, row in zip(conversations, keys) for k in row if k not in cached}
        if todo:
            self.client()  # a missing key stops the call here, before any request
            self._say_unsent(params)
            self._fetch(todo, request_timeout_s(self.token_cap or params.max_new_tokens), cached, desc)
        records = [[cached[k] for k in row] for row in keys]
        self._record_engines([r for row in records for r in row])
        return [[reply for record in row for reply in record_replies(record)] for row in records]

    def _fetch(self, todo: dict[str, Messages], timeout: float, cached: dict[str, Any], desc: str) -> None:
        """Send every request of `todo`, `concurrency` in flight; cache each reply as it arrives."""
        failures: list[BaseException] = []
        fresh = cut = 0
        usage: Counter[str] = Counter()
        pending = iter(todo.items())
        with (
            ThreadPoolExecutor(max_workers=self.concurrency) as pool,
            tqdm(total=len(todo), desc=desc, unit="request", mininterval=2) as bar,
        ):
            running: dict[Future, str] = {}

            def submit() -> None:
                for key, messages in pending:
                    running[pool.submit(self._ask, messages, timeout)] = key
                    if len(running) >= self.concurrency:
                        return

            submit()
            while running:
                done, _ = wait(running, return_when=FIRST_COMPLETED)
                for future in done:
                    key = running.pop(future)
                    if future.exception() is not None:
                        failures.append(future.exception())
                        continue
                    record = future.result()
                    self.cache.put_many("generate", {key: record})  # on disk before the next reply is read
                    cached[key] = record
                    fresh += 1
                    cut += sum(record["cut"])
                    for counts in record["usage"]:
                        usage.update(token_counts(counts))
                    bar.update(1)
                if not failures:  # after a failure nothing more is sent; what is in flight finishes and is kept
                    submit()
        self.usage.update(usage)
        log.info(
            "%s: %d fresh replies from %s (%s), %d stopped at their token cap; tokens: %s",
            self.name,
            fresh,
            self.model,
            self.engine,
            cut,
            dict(sorted(usage.items())) or "not reported",
        )
        if failures:
            unsent = len(todo) - fresh - len(failures)
            raise RuntimeError(
                f"{failures[0]} ({len(failures)} request(s) failed; the {fresh} replies that arrived "
                f"are cached, {unsent} request(s) were not sent: a rerun sends only what is missing)"
            )

    def _say_unsent(self, params: Any) -> None:
        """Log, once, which of the stage's sampling settings this model's requests do not carry."""
        if self._told_unsent:
            return
        self._told_unsent = True
        log.info(
            "%s (provider %s): every request is the model, the messages and models.%s.request %s, as "
            "query_llm.py sends them; the stage's temperature %s, top_p %s, max_new_tokens %s, seed and n are "
            "not sent (the timeout is %.0f s: models/api.py)",
            self.name,
            self.provider,
            self.name,
            json.dumps(self.request, sort_keys=True),
            params.temperature,
            params.top_p,
            params.max_new_tokens,
            request_timeout_s(self.token_cap or params.max_new_tokens),
        )

    def _record_engines(self, records: list[Any]) -> None:
        if self.directory is None:
            return
        from debate_audit.runtime.provenance import record_generations

        engines = Counter(
            r.get("engine", "api (unrecorded)") if isinstance(r, dict) else "api (unrecorded)" for r in records
        )
        record_generations(self.directory, dict(engines))

    def choice_logprobs(self, prompts: Sequence[str], labels: Sequence[str], **_: Any) -> list[list[float]]:
        raise NotImplementedError(
            f"model {self.model!r} (provider {self.provider}) has no local weights, so it cannot score answer "
            "labels; use a local model (hf, gguf-package or local) for judges and verifiers"
        )

    def render_chat(self, messages: Messages, assistant_prefix: str | None = None) -> str:
        raise NotImplementedError(
            f"model {self.model!r} (provider {self.provider}) is rendered by its provider; there is no local chat "
            "template to show the text it sees"
        )

    def close(self) -> None:
        if self.usage:
            log.info("%s: tokens of this job's fresh replies: %s", self.name, dict(sorted(self.usage.items())))
        log.info(self.cache.summary())
        self.cache.close()
        if self._client is not None:
            self._client.close()
            self._client = None
