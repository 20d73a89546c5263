"""A model's chat format: how its chat template is rendered, and how a generated reply is read back.

Rendering goes through the tokenizer's own chat template with

- the model's template switches (`chat_template_kwargs` in its spec: Qwen3 / Qwen3.5's `enable_thinking`,
  GPT-OSS's `reasoning_effort`, ...), and
- a fixed clock: templates that print today's date (GPT-OSS's system message, Llama 3.2's, through
  `strftime_now("<format>")`) print `TEMPLATE_DATE` instead, so a prompt, its cache key and its numbers do
  not change with the calendar.

Reasoning models write reasoning before their answer. Where a generation becomes data (debates,
paraphrases, the adjudications that become L_lm targets), only the final answer is kept. The reasoning
format is read from the tokenizer's vocabulary:

- `harmony` (GPT-OSS): the reply is a sequence of messages `<|channel|>analysis<|message|>...<|end|>`
  `<|start|>assistant<|channel|>final<|message|>...<|return|>`; the final channel's text is the answer,
  and a reply whose budget ran out before the final channel has none (""). Its markers are special
  tokens, so the replies of every reasoning format are decoded with special tokens kept
  (`keeps_special_tokens`) and those tokens are removed from the answer.
- `think` (Qwen3, Qwen3.5): reasoning sits in a `<think>...</think>` block (the template may open it in
  the prompt); the answer is the text after the block, "" when the block never closes.
- `channel` (Gemma 4, as the release's `ft-verifier-qwen.py` GEMMA_PROTOCOL writes it): reasoning sits in
  `<|channel>thought ... <channel|>` blocks, which are removed.
- `none`: the reply as generated.

A prefilled start of the reply (`assistant_prefix`, e.g. the readout's "Answer:") is the start of the
final answer: under harmony it opens the final channel (`<|channel|>final<|message|>`), under `think` it
follows a closed think block, as the ER-Audit release prefills GPT-OSS and Qwen3.5 for its readout.

A model without a chat template (a pretrained base model, e.g. Gemma 3 270M) has no chat rendering: `render`
refuses it, naming what to use instead, rather than falling back on some other model's template. Its prompts
are plain documents (`plain`): the stages that take a base model render their own plain prompt (the CW-POR
judge, cwpor/prompts.py `plain_judge_prompt`; the ER-Audit readout `plain`), which starts with the special
token the tokenizer puts before a text of its own accord (`document_prefix`: Gemma's `<bos>`), as the model
read every training document; without it Gemma 3 270M continues "The capital of France is" with "France. The
The The ...", with it "the capital of the country of France".
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

Messages = list[dict[str, str]]

# The date templates print as today's; changing it changes those models' prompts (and reruns their rules).
TEMPLATE_DATE = datetime.date(2025, 6, 28)
# Bumped when reading replies back changes, so cached answers of reasoning models are recomputed (the key
# of a model without a reasoning format does not carry it).
FINAL_ANSWER_VERSION = 1

HARMONY_FINAL = "<|channel|>final<|message|>"
_HARMONY_STOPS = ("<|end|>", "<|return|>", "<|call|>")
THINK_OPEN, THINK_CLOSE = "<think>", "</think>"
CHANNEL_OPEN, CHANNEL_CLOSE = "<|channel>", "<channel|>"
# A closed empty think block: what Qwen3.5's template writes with enable_thinking false.
CLOSED_THINK = "<think>\n\n</think>\n\n"
_STRFTIME_NOW = re.compile(r"""strftime_now\(\s*(["'])(.*?)\1\s*\)""")


def fixed_date_template(template: Any) -> str | None:
    """`template` with every `strftime_now("<format>")` call replaced by `TEMPLATE_DATE` in that format (a
    string literal); None when the template does not read the clock. (transformers passes callables in
    template arguments as inert placeholders, so the clock cannot be swapped from outside.)"""
    if not isinstance(template, str) or "strftime_now" not in template:
        return None
    return _STRFTIME_NOW.sub(lambda m: repr(TEMPLATE_DATE.strftime(m.group(2))), template)


def reasoning_format(tokenizer: Any) -> str:
    """`harmony`, `think`, `channel` or `none`, from the control tokens in the tokenizer's vocabulary."""
    vocab = tokenizer.get_vocab()
    if "<|channel|>" in vocab and "<|message|>" in vocab:
        return "harmony"
    if THINK_OPEN in vocab and THINK_CLOSE in vocab:
        return "think"
    if CHANNEL_OPEN in vocab and CHANNEL_CLOSE in vocab:
        return "channel"
    return "none"


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def document_prefix(tokenizer: Any) -> str:
    """The special-token text the tokenizer puts before a text of its own accord: "<bos>" for Gemma's (and
    Llama's), "" for tokenizers that add none (SmolLM2's, Qwen's). A chat template writes it itself; a plain
    prompt starts with it (module docstring)."""
    bos = getattr(tokenizer, "bos_token", None)
    if not bos:
        return ""
    ids = tokenizer("x")["input_ids"]
    return bos if ids and ids[0] == tokenizer.bos_token_id else ""


class NoChatTemplateError(ValueError):
    """A chat rendering asked of a model without a chat template."""


@dataclass(frozen=True)
class ChatFormat:
    """The chat template switches and reasoning format of one model (see the module docstring)."""

    reasoning: str = "none"
    template_kwargs: Mapping[str, Any] = field(default_factory=dict)
    special_tokens: tuple[str, ...] = ()  # stripped from a final answer decoded with special tokens kept
    template: str | None = None  # the tokenizer's template with a fixed clock; None: its own
    has_template: bool = True  # False: a base model, whose prompts are plain documents (`plain`)
    plain_prefix: str = ""  # what a plain prompt starts with (document_prefix; only without a template)

    @classmethod
    def of(cls, tokenizer: Any, template_kwargs: Mapping[str, Any] | None = None) -> ChatFormat:
        templated = has_chat_template(tokenizer)
        return cls(
            reasoning_format(tokenizer),
            dict(template_kwargs or {}),
            tuple(sorted(getattr(tokenizer, "all_special_tokens", ()), key=len, reverse=True)),
            fixed_date_template(getattr(tokenizer, "chat_template", None)),
            templated,
            "" if templated else document_prefix(tokenizer),
        )

    def plain(self, text: str) -> str:
        """The exact text a model without a chat template sees for the plain prompt `text`."""
        return self.plain_prefix + text

    @property
    def keeps_special_tokens(self) -> bool:
        """Whether replies must be decoded with special tokens kept (their structure is made of them)."""
        return self.reasoning != "none"

    def key(self) -> dict[str, Any]:
        """What reading a reply back adds to a generation's cache key ({} for a model without reasoning)."""
        return {} if self.reasoning == "none" else {"final_answer": f"{self.reasoning}-v{FINAL_ANSWER_VERSION}"}

    def render(self, tokenizer: Any, messages: Messages, assistant_prefix: str | None = None) -> str:
        """The exact text the model sees: chat template, generation prompt, optional start of the reply.

        A conversation ending in an assistant message is a prefill: the model continues that message."""
        if not self.has_template:
            name = getattr(tokenizer, "name_or_path", None) or "this model"
            raise NoChatTemplateError(
                f"{name} has no chat template (a pretrained base model): it reads plain prompts only. It can "
                "judge CW-POR debates (a plain judge prompt) and be a verifier (verifier.readout: plain or "
                "auto); a stage that writes chat replies (debates, paraphrases, adjudications) needs a model "
                "with a chat template"
            )
        if messages and messages[-1]["role"] == "assistant":
            assistant_prefix = messages[-1]["content"] + (assistant_prefix or "")
            messages = messages[:-1]
        text = tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True, chat_template=self.template, **self.template_kwargs
        )
        if assistant_prefix:
            if self.reasoning == "harmony" and not text.endswith(HARMONY_FINAL):
                text += HARMONY_FINAL
            elif self.reasoning == "think" and _open_think(text):
                text = text[: text.rfind(THINK_OPEN)] + CLOSED_THINK
        return text + (assistant_prefix or "")

    def final_answer(self, prompt: str, reply: str) -> str:
        """The answer part of `reply`, a continuation of `prompt` (decoded with special tokens kept where
        `keeps_special_tokens`)."""
        if self.reasoning == "harmony":
            return self._clean(_harmony_final(prompt, reply))
        if self.reasoning == "think":
            text = (THINK_OPEN if _open_think(prompt) else "") + reply
            if THINK_CLOSE in text:
                return self._clean(text.rsplit(THINK_CLOSE, 1)[1])
            return "" if THINK_OPEN in text else self._clean(text)
        if self.reasoning == "channel":
            kept = re.sub(re.escape(CHANNEL_OPEN) + ".*?(" + re.escape(CHANNEL_CLOSE) + "|$)", "", reply, flags=re.S)
            return self._clean(kept)
        return reply.strip()

    def _clean(self, text: str) -> str:
        for token in self.special_tokens:
            text = text.replace(token, "")
        return text.strip()


def _open_think(text: str) -> bool:
    """Whether `text` ends inside a think block (the template opened one for the reply)."""
    return text.rfind(THINK_OPEN) > text.rfind(THINK_CLOSE)


def _harmony_final(prompt: str, reply: str) -> str:
    """The text of the last final-channel message of a harmony reply ("" when there is none).

    The prompt ends at `<|start|>assistant` (the model writes the channel header) or inside a prefilled
    final-channel message (the reply continues it: only the continuation is returned)."""
    head = prompt[prompt.rfind("<|start|>") :] if "<|start|>" in prompt else ""
    if "<|message|>" in head:  # a prefilled message: keep its header, not the prefilled text
        head = head[: head.index("<|message|>") + len("<|message|>")]
    answer = ""
    for message in (head + reply).split("<|start|>"):
        header, sep, content = message.partition("<|message|>")
        if not sep:
            continue
        channel = header.partition("<|channel|>")[2].split("<|constrain|>")[0].split()[:1]
        if channel == ["final"]:
            for stop in _HARMONY_STOPS:
                content = content.split(stop, 1)[0]
            answer = content
    return answer
