"""Models behind an endpoint (`source: openai`), through the providers' own SDKs: the one client for every
OpenAI-compatible endpoint (a hosted API, vLLM's server, llama.cpp's) is the `openai` package; the
Anthropic Messages API is the `anthropic` package (the `api` extra).

- `provider: openai` / `anthropic`: a hosted model. Each request is built as the ER-Audit release's
  `query_llm.py` does (commit 4cb6829): the model, one conversation and the spec's `request` mapping, passed
  to the SDK's create() as keyword arguments under the provider's own names, nothing renamed or added. The
  sampling settings a stage passes (`GenerationParams`: temperature, top_p, max_new_tokens, seed, n) are not
  sent: the release sends Claude no sampling parameter and GPT no token cap, and a value the workflow sets
  per pool would otherwise change that. The stage's draw (its seed and sample index) still names the reply
  in the cache, so draw j of a pool is its own request and its own cached reply; `max_new_tokens` sizes the
  request's timeout where the request sets no token cap of its own.
- no provider: an OpenAI-compatible server (vLLM's `vllm serve`, llama.cpp's `llama-server`, a gateway),
  sent the stage's settings as the OpenAI API names them (`max_tokens`, `temperature`, `top_p`, `seed`, `n`:
  one request per conversation, its n replies in one record).

The SDK does the HTTP: retries with backoff (honouring the provider's Retry-After), timeouts, connection
reuse. Every reply is written to the call cache (cache.py) the moment it arrives, with its finish reason
(OpenAI `finish_reason`, Anthropic `stop_reason`), the token counts the endpoint reports and the SDK that
fetched it; a reply stopped by its token cap (`length`, `max_tokens`) is `Reply.cut`, which the paraphrase
pools reject and redraw. When a request fails for good (the SDK's retries spent, or an error no retry
helps), no further request is started, those in flight are awaited and cached, and the job stops naming the
failure: a rerun pays only for what is missing.

Scoring (`choice_scores`): a chat endpoint cannot continue a prefilled "Answer:", so each `ChatPrompt` is
sent as its conversation with `ONE_LETTER` appended to the last user turn, asking for one token and its top
`TOP_LOGPROBS` log-probabilities. A label's log-probability is that of the first reply token spelling it
(the letter, whitespace aside; the likeliest such token where several do); a label outside the returned
top-k gets the bound the top-k implies and is flagged (`ChoiceScores.bounded`). An endpoint that returns no
log-probabilities (Anthropic's; OpenAI's reasoning models) is known from its spec (spec.no_logprobs) and
refused before any request; one that should have sent them and did not stops the job, naming the key.

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
import math
import os
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from tqdm import tqdm

from debate_audit.runtime.masking import masked

from .cache import CallCache, cache_key
from .params import ChatPrompt, ChoiceScores, Reply, record_replies
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
# own exponential backoff from 0.5 s to 8 s, or the endpoint's Retry-After up to 60 s): a pool of hundreds
# of paid requests meets throttling.
MAX_RETRIES = 7
# What an OpenAI-compatible server without a key (`api_key_env` unset: a local vLLM) is sent as its key: the
# SDK needs one, and must not fall back to OPENAI_API_KEY, which belongs to another endpoint.
NO_KEY = "no-key"

# The request timeout follows the token budget: a reply of B tokens may take QUEUE_S + B / SLOWEST_TOKENS_PER_S
# seconds (the budget at a decoding rate well below what loaded hosted models deliver, reasoning tokens
# included, plus time for the queue and the prompt), so a 16384-token Claude reply may take ~15 min while a
# request that has not answered by then is taken as stuck and retried. B is the request's own token cap
# (TOKEN_CAPS) or, for a request without one (the release's GPT calls), the stage's max_new_tokens: what the
# workflow budgets for a reply of that stage, never sent. A fixed timeout would either give up on long
# replies that were coming or wait for an hour on a short one that never will.
QUEUE_S = 60.0
SLOWEST_TOKENS_PER_S = 20.0

# Scoring a chat endpoint: the top log-probabilities asked for at the first reply token (OpenAI's maximum,
# and vLLM's default --max-logprobs), and the instruction appended to the conversation's last user turn.
TOP_LOGPROBS = 20
ONE_LETTER = "Answer with one letter only: {letters}."


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
        how = (
            "pip install -e . (a main dependency)" if provider == "openai" else "pip install -e '.[api]' (also in dev)"
        )
        raise RuntimeError(f"provider {provider!r} needs the {provider!r} package: {how}") from err


def create_parameters(provider: str) -> frozenset[str]:
    """The keyword arguments the SDK's create() takes: chat.completions.create (openai) or messages.create
    (anthropic)."""
    sdk(provider)
    if provider == "openai":
        from openai.resources.chat.completions import Completions as Endpoint
    else:
        from anthropic.resources.messages import Messages as Endpoint
    return frozenset(inspect.signature(Endpoint.create).parameters) - {"self"}


def endpoint_key(key: str, api_key_env: str | None, *, required: bool) -> str | None:
    """The key in the environment variable `api_key_env` (None where no variable is named and none is
    `required`); `key` names the config key in the error."""
    if not api_key_env:
        if required:
            raise RuntimeError(f"{key}.api_key_env: name the environment variable holding the endpoint's key")
        return None
    secret = os.environ.get(api_key_env)
    if not secret:
        raise RuntimeError(f"{key}: environment variable {api_key_env} (api_key_env) is not set")
    return secret


def openai_client(base_url: str, secret: str | None, *, max_retries: int = MAX_RETRIES) -> Any:
    """The one client of every OpenAI-compatible endpoint: `openai.OpenAI` with the SDK's retries."""
    return sdk("openai").OpenAI(base_url=base_url, api_key=secret or NO_KEY, max_retries=max_retries)


def one_letter(messages: Messages, labels: Sequence[str]) -> Messages:
    """The conversation a chat endpoint scores: `ONE_LETTER` appended to its last user turn (a new user turn
    where the last is not one)."""
    letters = [label.strip() for label in labels]
    listed = letters[0] if len(letters) == 1 else f"{', '.join(letters[:-1])} or {letters[-1]}"
    said = ONE_LETTER.format(letters=listed)
    out = [dict(m) for m in messages]
    if out and out[-1]["role"] == "user":
        out[-1]["content"] = f"{out[-1]['content'].rstrip()}\n\n{said}"
    else:
        out.append({"role": "user", "content": said})
    return out


def label_scores(top: Sequence[tuple[str, float]], labels: Sequence[str]) -> ChoiceScores:
    """Each label's log-probability as the first reply token, from that token's top log-probabilities `top`
    ((token, log-probability) pairs, the endpoint's top-k): the likeliest token that spells the label (the
    letter, whitespace aside: "A" and " A" both spell " A"). A label no token of `top` spells gets the bound
    the top-k implies: below the k-th log-probability, and below the probability mass the top-k leaves."""
    if not top:
        raise ValueError("no top log-probabilities to read the labels from")
    found: dict[str, float] = {}
    for token, logprob in top:
        for label in labels:
            if token.strip() == label.strip() and logprob > found.get(label, -math.inf):
                found[label] = logprob
    kth = min(logprob for _, logprob in top)
    rest = 1.0 - sum(math.exp(logprob) for _, logprob in top)
    bound = min(kth, math.log(rest)) if rest > 0 else kth  # rest <= 0: the endpoint's rounding
    return ChoiceScores([found.get(label, bound) for label in labels], [label not in found for label in labels])


class EndpointChatModel:
    """A model behind an endpoint, called through its provider's SDK (`provider` None: an OpenAI-compatible
    server); cached like every other `ChatModel`.

    `request`: the provider's settings as the spec gives them (`models.<name>.request`), sent with every
    request as they are. Requests run `concurrency` at a time on one SDK client (one connection pool).
    `no_logprobs`: why the endpoint returns no log-probabilities (spec.no_logprobs), or None.
    """

    def __init__(
        self,
        *,
        name: str,
        provider: str | None,
        model: str,
        base_url: str | None,
        api_key_env: str | None,
        request: dict[str, Any] | None,
        fingerprint: str,
        cache: str | Path | None,
        directory: str | Path | None = None,
        concurrency: int = 16,
        no_logprobs: str | None = None,
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
        self.no_logprobs = no_logprobs
        self.renders_own_template = True  # the endpoint renders the conversation: it scores ChatPrompts
        self.sdk_name = provider or "openai"
        self.module = sdk(self.sdk_name)
        self.engine = f"{self.sdk_name}-python {self.module.__version__}"
        key = f"models.{name}.request"
        if provider is None and self.request:
            raise ValueError(f"{key}: the provider's request settings need 'provider' (openai or anthropic)")
        reserved = sorted(set(self.request) & RESERVED_REQUEST_KEYS)
        if reserved:
            raise ValueError(f"{key}.{reserved[0]}: set by the client, not the config")
        unknown = sorted(set(self.request) - create_parameters(self.sdk_name))
        if unknown:
            what = "chat.completions.create" if self.sdk_name == "openai" else "messages.create"
            raise ValueError(
                f"{key}.{unknown[0]}: not a parameter of {self.engine} {what}; give the provider's own "
                f"names (unknown: {unknown})"
            )
        caps = [self.request[k] for k in TOKEN_CAPS[self.sdk_name] if self.request.get(k) is not None]
        self.token_cap: int | None = caps[0] if caps and provider else None
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
                    raise ValueError(f"models.{self.name}.base_url: a model behind an endpoint needs its URL")
                # a hosted API always needs a key; a local OpenAI-compatible server may take none
                secret = endpoint_key(f"models.{self.name}", self.api_key_env, required=self.provider is not None)
                self._secret = secret
                if self.sdk_name == "openai":
                    self._client = openai_client(self.base_url, secret)
                else:
                    self._client = self.module.Anthropic(
                        base_url=self.base_url, api_key=secret, max_retries=MAX_RETRIES
                    )
            return self._client

    def _scrub(self, text: str) -> str:
        return text.replace(self._secret, f"<value of ${self.api_key_env}>") if self._secret else text

    def _failed(self, err: Exception) -> RuntimeError:
        # raised `from None`: the SDK's exception (and its message) stays out of the log's traceback
        where = f"models.{self.name} ({self.engine}, {self.model} at {self.base_url})"
        return RuntimeError(self._scrub(f"{where}: {type(err).__name__}: {err}"))

    def _ask(self, messages: Messages, timeout: float, sampling: dict[str, Any]) -> dict[str, Any]:
        """One request and its reply as a cache record (a provider model: one reply; an OpenAI-compatible
        server: the `n` of `sampling`)."""
        client = self.client()
        try:
            if self.provider == "anthropic":
                message = client.messages.create(model=self.model, messages=messages, timeout=timeout, **self.request)
                # the answer is the text blocks (query_llm.py: ''.join of them); thinking blocks are left out
                text = "".join(block.text for block in message.content if block.type == "text")
                choices = [(text, message.stop_reason)]
                usage, served, reply_id = message.usage, message.model, message.id
            else:
                completion = client.chat.completions.create(
                    model=self.model, messages=messages, timeout=timeout, **self.request, **sampling
                )
                ordered = sorted(completion.choices or [], key=lambda c: c.index)
                choices = [(c.message.content or "", c.finish_reason) for c in ordered] or [("", None)]
                usage, served, reply_id = completion.usage, completion.model, completion.id
        except Exception as err:
            raise self._failed(err) from None
        counts = usage.model_dump(exclude_none=True) if usage is not None else None
        reasons = [reason for _, reason in choices]
        return {
            "texts": [text.strip() for text, _ in choices],
            "cut": [reason in CUT_REASONS[self.sdk_name] for reason in reasons],
            "finish_reasons": reasons,
            # one usage record per reply; a request for n replies reports their tokens together
            "usage": [counts] if len(choices) == 1 else [None] * len(choices),
            **({"request_usage": counts} if len(choices) > 1 else {}),
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
        """`params.num_samples` replies per conversation (one when greedy), each `Reply` with its cut flag,
        finish reason and token usage. A provider model: each reply its own request and cached record; an
        OpenAI-compatible server: one request and record per conversation, sent the stage's settings."""
        if self.provider is None:
            return self._server_replies(conversations, params, desc)
        samples = params.num_samples if params.do_sample else 1
        draw = params.seed if params.do_sample else None
        keys = [[self._key(list(m), draw, k) for k in range(samples)] for m in conversations]
        cached = self.cache.get_many(k for row in keys for k in row)
        todo = {k: list(m) for m, row in zip(conversations, keys) for k in row if k not in cached}
        if todo:
            self.client()  # a missing key stops the call here, before any request
            self._say_unsent(params)
            timeout = request_timeout_s(self.token_cap or params.max_new_tokens)
            asks = {k: (lambda m=m: self._ask(m, timeout, {})) for k, m in todo.items()}
            self._fetch(asks, "generate", cached, desc)
        records = [[cached[k] for k in row] for row in keys]
        self._record_engines([r for row in records for r in row])
        return [[reply for record in row for reply in record_replies(record)] for row in records]

    def _server_replies(self, conversations: Sequence[Messages], params: Any, desc: str) -> list[list[Reply]]:
        sampling: dict[str, Any] = {"max_tokens": params.max_new_tokens}
        if params.do_sample:
            sampling |= {"temperature": params.temperature, "top_p": params.top_p, "n": params.num_samples}
            sampling["seed"] = params.seed
        else:
            sampling |= {"temperature": 0.0, "n": 1}
        # the key of the project's earlier OpenAI-compatible client: its cached replies stay valid
        keys = [
            cache_key(self.fingerprint, "api", "generate", json.dumps(m, sort_keys=True), params.key())
            for m in conversations
        ]
        cached = self.cache.get_many(keys)
        todo = {k: list(m) for k, m in zip(keys, conversations) if k not in cached}
        if todo:
            self.client()
            timeout = request_timeout_s(params.max_new_tokens)
            self._fetch(
                {k: (lambda m=m: self._ask(m, timeout, sampling)) for k, m in todo.items()}, "generate", cached, desc
            )
        records = [cached[k] for k in keys]
        self._record_engines(records)
        return [record_replies(record) for record in records]

    def _fetch(self, asks: dict[str, Callable[[], dict[str, Any]]], op: str, cached: dict[str, Any], desc: str) -> None:
        """Send every request of `asks` (cache key -> the request), `concurrency` in flight; cache each reply
        as it arrives. After a failure nothing more is sent; what is in flight finishes and is kept."""
        failures: list[BaseException] = []
        fresh = cut = 0
        usage: Counter[str] = Counter()
        pending = iter(asks.items())
        with (
            ThreadPoolExecutor(max_workers=self.concurrency) as pool,
            tqdm(total=len(asks), desc=desc, unit="request", mininterval=2) as bar,
        ):
            running: dict[Future, str] = {}

            def submit() -> None:
                for key, ask in pending:
                    running[pool.submit(ask)] = key
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
                    self.cache.put_many(op, {key: record})  # on disk before the next reply is read
                    cached[key] = record
                    fresh += 1
                    cut += sum(record.get("cut", ()))
                    for counts in [*record["usage"], record.get("request_usage")]:
                        usage.update(token_counts(counts))
                    bar.update(1)
                if not failures:
                    submit()
        self.usage.update(usage)
        log.info(
            "%s: %d fresh %s replies from %s (%s), %d stopped at their token cap; tokens: %s",
            self.name,
            fresh,
            op,
            self.model,
            self.engine,
            cut,
            dict(sorted(usage.items())) or "not reported",
        )
        if failures:
            unsent = len(asks) - fresh - len(failures)
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
            json.dumps(masked(self.request), sort_keys=True),  # a key-like setting of the request is a secret
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

    # ------------------------------------------------------------------ scoring
    def scoring_prompt(self, messages: Messages, assistant_prefix: str | None = None) -> ChatPrompt:
        """What `choice_scores` takes for this model: the conversation itself (its endpoint renders it)."""
        return ChatPrompt.of(messages, assistant_prefix)

    def scoring_request(self) -> dict[str, Any]:
        """What a scoring request sends besides the model and the messages: one token and its top
        TOP_LOGPROBS log-probabilities (a provider model: with its own request settings, token caps aside)."""
        if self.provider is None:
            return {"max_tokens": 1, "temperature": 0.0, "logprobs": True, "top_logprobs": TOP_LOGPROBS}
        kept = {k: v for k, v in self.request.items() if k not in TOKEN_CAPS["openai"]}
        return {**kept, "max_completion_tokens": 1, "logprobs": True, "top_logprobs": TOP_LOGPROBS}

    def _ask_top(self, messages: Messages, sent: dict[str, Any]) -> dict[str, Any]:
        """One scoring request and the first reply token's top log-probabilities as a cache record."""
        client = self.client()
        try:
            completion = client.chat.completions.create(
                model=self.model, messages=messages, timeout=request_timeout_s(1), **sent
            )
        except Exception as err:
            raise self._failed(err) from None
        choice = completion.choices[0] if completion.choices else None
        content = (choice.logprobs.content or []) if choice is not None and choice.logprobs is not None else []
        if not content or not content[0].top_logprobs:
            raise RuntimeError(
                f"models.{self.name} ({self.model} at {self.base_url}) returned no log-probabilities for a scoring "
                f"request; if its endpoint has none, set models.{self.name}.logprobs: false (a CW-POR judge then "
                "has no LLC; it cannot score answers)"
            )
        usage = completion.usage.model_dump(exclude_none=True) if completion.usage is not None else None
        return {
            "token": content[0].token,
            "top_logprobs": [[t.token, t.logprob] for t in content[0].top_logprobs],
            "usage": [usage],
            "engine": self.engine,
            "served_model": completion.model,
            "reply_id": completion.id,
        }

    def choice_scores(
        self, prompts: Sequence[ChatPrompt], labels: Sequence[str], *, desc: str = "scoring"
    ) -> list[ChoiceScores]:
        """Each label's log-probability as the first token of the reply to each conversation (`label_scores`),
        with the flag of a label outside the endpoint's top-k. One request per distinct conversation, cached
        as it arrives."""
        if self.no_logprobs:
            raise RuntimeError(f"models.{self.name} cannot score answer labels: {self.no_logprobs}")
        if any(not isinstance(p, ChatPrompt) for p in prompts):
            raise TypeError(
                f"models.{self.name} ({self.model}) renders its own chat template: it scores conversations "
                "(scoring_prompt), not rendered text"
            )
        sent = self.scoring_request()
        asked = [one_letter(p.conversation(), labels) for p in prompts]
        keys = [
            cache_key(
                self.fingerprint,
                "api",
                "choice_scores",
                json.dumps(m, sort_keys=True),
                {"provider": self.provider, "model": self.model, "request": sent},
            )
            for m in asked
        ]
        cached = self.cache.get_many(keys)
        todo = {k: m for k, m in zip(keys, asked) if k not in cached}
        if todo:
            self.client()
            self._fetch(
                {k: (lambda m=m: self._ask_top(m, sent)) for k, m in todo.items()}, "choice_scores", cached, desc
            )
        scores = [label_scores([tuple(t) for t in cached[k]["top_logprobs"]], labels) for k in keys]
        bounded = sum(s.any_bounded for s in scores)
        if bounded:
            log.warning(
                "%s: %d of %d scored prompts have a label outside the top %d log-probabilities the endpoint "
                "returned: its value is the bound the top-k implies (flagged in the outputs)",
                self.name,
                bounded,
                len(scores),
                TOP_LOGPROBS,
            )
        return scores

    def choice_logprobs(
        self, prompts: Sequence[Any], labels: Sequence[str], *, desc: str = "scoring"
    ) -> list[list[float]]:
        """`choice_scores`' values, for callers that take no flag: refused where a label is only a bound."""
        scores = self.choice_scores(prompts, labels, desc=desc)
        bounded = sum(s.any_bounded for s in scores)
        if bounded:
            raise ValueError(
                f"models.{self.name}: {bounded} of {len(scores)} prompts have a label outside the endpoint's top "
                f"{TOP_LOGPROBS} log-probabilities, whose value is only a bound; read them with choice_scores, "
                "which flags them"
            )
        return [s.logprobs for s in scores]

    def render_chat(self, messages: Messages, assistant_prefix: str | None = None) -> str:
        raise NotImplementedError(
            f"model {self.model!r} ({self.engine}) is rendered by its endpoint; there is no local chat "
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
