"""Call parameters and small helpers of the model layer that need no torch (the Snakefile imports them)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple


@dataclass(frozen=True)
class GenerationParams:
    max_new_tokens: int = 256
    do_sample: bool = False
    temperature: float = 1.0
    top_p: float = 1.0
    num_samples: int = 1  # sampling only: independent samples of one prompt
    seed: int = 0

    def key(self) -> dict[str, Any]:
        if not self.do_sample:
            return {"max_new_tokens": self.max_new_tokens, "do_sample": False}
        return dict(self.__dict__)


class Reply(NamedTuple):
    """One generated reply and whether it stopped at its token cap (`max_new_tokens`, or a hosted model's
    own cap) rather than ending by itself: a cut reply may end mid-sentence. `cut` is None for a cached reply
    recorded before replies recorded it (it is then not known). A hosted API's reply (models/api.py) also
    keeps the provider's own word for why it ended (OpenAI `finish_reason`, Anthropic `stop_reason`) and the
    tokens the provider counted for it; other engines leave both None."""

    text: str
    cut: bool | None
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None


def record_replies(record: Any) -> list[Reply]:
    """The replies of one cached generation record: `{"texts": [...], "cut": [...], ...}` (a hosted API's
    also `"finish_reasons"` and `"usage"`, one per reply), or one written before records said which replies
    hit their cap (no `cut`, or a bare list of texts): `cut` None."""
    texts = record["texts"] if isinstance(record, dict) else record
    fields = record if isinstance(record, dict) else {}
    none = [None] * len(texts)
    cut, finish, usage = (fields.get(key) or none for key in ("cut", "finish_reasons", "usage"))
    return [Reply(t, None if c is None else bool(c), f, u) for t, c, f, u in zip(texts, cut, finish, usage)]


def hit_cap(token_ids: Sequence[int], max_new_tokens: int, stop_ids: Sequence[int]) -> bool:
    """A generation of `token_ids` stopped at its cap: it is `max_new_tokens` long and its last token is no
    stop token (the in-process loop leaves the stop token out, a vLLM server keeps it)."""
    return len(token_ids) >= max_new_tokens and not (token_ids and token_ids[-1] in set(stop_ids))


def two_way_softmax(logprobs: Sequence[float]) -> list[float]:
    top = max(logprobs)
    weights = [math.exp(lp - top) for lp in logprobs]
    total = sum(weights)
    return [w / total for w in weights]


@dataclass(frozen=True)
class ChatPrompt:
    """A prompt to score for a model whose endpoint renders its own chat template (`source: openai`): the
    conversation and the start of the reply that a local model's rendered prompt would end with (`Answer:`).
    A chat endpoint cannot be handed that start of a reply; it is sent the conversation with an instruction
    to answer with one letter (models/api.py, `ONE_LETTER`)."""

    messages: tuple[tuple[str, str], ...]  # (role, content) pairs
    assistant_prefix: str | None = None

    @classmethod
    def of(cls, messages: Sequence[dict[str, str]], assistant_prefix: str | None = None) -> ChatPrompt:
        return cls(tuple((m["role"], m["content"]) for m in messages), assistant_prefix)

    def conversation(self) -> list[dict[str, str]]:
        return [{"role": role, "content": content} for role, content in self.messages]


class ChoiceScores(NamedTuple):
    """log P(label) at the answer slot for each label, and which of them are bounds, not values.

    `bounded[i]`: label i was not among the top log-probabilities the endpoint returned (a hosted chat model
    gives the top 20 of its first reply token), so `logprobs[i]` is the upper bound that top-k implies (the
    k-th log-probability, or the log of the probability mass the top-k leaves, whichever is lower). A model
    that computes every label (in-process, or a server given the rendered prompt) bounds none."""

    logprobs: list[float]
    bounded: list[bool]

    @property
    def any_bounded(self) -> bool:
        return any(self.bounded)
