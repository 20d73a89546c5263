"""Forced-choice readout P[V(q) = a]: the one scoring function every ER-Audit stage shares.

The question block (no story):

    Question: <question>
    A. <option a>
    B. <option b>

is shown in one of two formats (`verifier.readout`):

- chat (the release's verifier prompt): the model's chat template with one user turn (a one-line
  instruction, the transcript when there is one, the question block) and the assistant turn prefilled
  with "Answer:". Instruct models answer a bare completion prompt poorly, so this is the default for any
  tokenizer that has a chat template.
- plain (base models without a template): the question block followed by "Answer:" as raw text, the
  transcript (if any) in front under "Debate transcript:".

Either way the prompt ends at the answer slot "Answer:" and the model's next token is scored over the two
labels " A" and " B" with `LanguageModel.choice_logprobs` (one forward pass per prompt, batched, cached by
content hash). `answer_probability` returns P[V(q) = answer] = the two-label softmax at the answer slot,
averaged over both answer orders (answer shown as A, then as B), so position bias cancels.

`render_prompt` is the one renderer: Table 1, the audit, best-of-K selection (with transcript) and the
L_fc / L_qh fine-tuning losses all call it, so training and scoring see one format. `readout_id(mode)` is
the rule param of every rule that reads: it hashes the mode and this module's texts and renderer source,
so switching the readout or editing the prompt reruns exactly those rules and their descendants.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from debate_audit.models import two_way_softmax
from debate_audit.models.chat import ChatFormat

from .versioning import rule_id

if TYPE_CHECKING:
    from debate_audit.models.loading import ChatModel

LABELS = (" A", " B")
ANSWER_SLOT = "Answer:"
READOUT_MODES = ("chat", "plain", "auto")
INSTRUCTION = "Answer the multiple-choice question with the letter of the correct option, A or B."
TRANSCRIPT_INSTRUCTION = (
    "Read the debate transcript, then answer the multiple-choice question with the letter of the correct "
    "option, A or B."
)

# (messages, assistant_prefix) -> rendered text; LanguageModel.render_chat or tokenizer_chat(tokenizer)
ChatRenderer = Callable[[list[dict[str, str]], str], str]


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def resolve_readout(mode: str, tokenizer: Any) -> str:
    """`chat` or `plain` for this tokenizer; `auto` is chat exactly when the tokenizer has a chat template."""
    if mode not in READOUT_MODES:
        raise ValueError(f"verifier.readout must be one of {list(READOUT_MODES)}, got {mode!r}")
    if mode == "auto":
        return "chat" if has_chat_template(tokenizer) else "plain"
    if mode == "chat" and not has_chat_template(tokenizer):
        name = getattr(tokenizer, "name_or_path", "this tokenizer")
        raise ValueError(f"verifier.readout is 'chat' but {name} has no chat template; use 'plain' or 'auto'")
    return mode


def tokenizer_chat(tokenizer: Any, chat_template_kwargs: dict[str, Any] | None = None) -> ChatRenderer:
    """The chat renderer of a bare tokenizer (training code), identical to LanguageModel.render_chat of a model
    with these chat-template switches (models/chat.py)."""
    chat = ChatFormat.of(tokenizer, chat_template_kwargs)
    return lambda messages, assistant_prefix: chat.render(tokenizer, messages, assistant_prefix)


def question_block(question: str, option_a: str, option_b: str) -> str:
    return f"Question: {question.strip()}\nA. {option_a.strip()}\nB. {option_b.strip()}"


def render_readout(question: str, option_a: str, option_b: str) -> str:
    """The plain forced-choice prompt; ends at the answer slot ("Answer:"), scored label " A" or " B"."""
    return f"{question_block(question, option_a, option_b)}\n{ANSWER_SLOT}"


def render_transcript_readout(transcript: str, question: str, option_a: str, option_b: str) -> str:
    """The plain readout after a debate transcript."""
    return f"Debate transcript:\n{transcript.strip()}\n\n{render_readout(question, option_a, option_b)}"


def render_prompt(
    question: str, option_a: str, option_b: str, *, transcript: str | None = None, chat: ChatRenderer | None = None
) -> str:
    """The readout prompt in the plain format (`chat` None) or through a chat renderer; ends at "Answer:"."""
    if chat is None:
        if transcript is None:
            return render_readout(question, option_a, option_b)
        return render_transcript_readout(transcript, question, option_a, option_b)
    block = question_block(question, option_a, option_b)
    if transcript is None:
        content = f"{INSTRUCTION}\n\n{block}"
    else:
        content = f"{TRANSCRIPT_INSTRUCTION}\n\nDebate transcript:\n{transcript.strip()}\n\n{block}"
    return chat([{"role": "user", "content": content}], ANSWER_SLOT)


def renderer_for(mode: str, tokenizer: Any, chat: ChatRenderer | None = None) -> ChatRenderer | None:
    """The `chat` argument of render_prompt for a readout mode: None for plain, else `chat` (default: the
    tokenizer's own template)."""
    if resolve_readout(mode, tokenizer) == "plain":
        return None
    return chat or tokenizer_chat(tokenizer)


def both_orders(
    question: str, answer: str, other: str, transcript: str | None = None, chat: ChatRenderer | None = None
) -> tuple[str, str]:
    """(prompt with `answer` as A, prompt with `answer` as B)."""
    return (
        render_prompt(question, answer, other, transcript=transcript, chat=chat),
        render_prompt(question, other, answer, transcript=transcript, chat=chat),
    )


def order_probability(logprobs_first: Sequence[float], logprobs_second: Sequence[float]) -> float:
    """Mean of P(answer) over the two orders: label A in the first prompt, label B in the second."""
    return 0.5 * (two_way_softmax(logprobs_first)[0] + two_way_softmax(logprobs_second)[1])


def answer_probability(
    lm: ChatModel,
    questions: Sequence[str],
    answers: Sequence[str],
    others: Sequence[str],
    *,
    transcripts: Sequence[str] | None = None,
    readout: str = "auto",
    desc: str = "readout",
) -> list[float]:
    """P[V(q) = answer] for each row: two-label softmax at the answer slot, averaged over both orders.

    Without `transcripts` this is the standard readout (Table 1, the audit); with them each prompt holds
    its debate transcript. `readout`: chat / plain / auto (verifier.readout).
    """
    if not (len(questions) == len(answers) == len(others)):
        raise ValueError(f"questions/answers/others differ in length: {len(questions)}/{len(answers)}/{len(others)}")
    if transcripts is not None and len(transcripts) != len(questions):
        raise ValueError(f"{len(transcripts)} transcripts for {len(questions)} questions")
    chat = renderer_for(readout, getattr(lm, "tokenizer", None), lambda m, prefix: lm.render_chat(m, assistant_prefix=prefix))
    prompts: list[str] = []
    for i, (q, a, o) in enumerate(zip(questions, answers, others)):
        prompts.extend(both_orders(q, a, o, None if transcripts is None else transcripts[i], chat))
    scores = lm.choice_logprobs(prompts, list(LABELS), desc=desc)
    return [order_probability(scores[2 * i], scores[2 * i + 1]) for i in range(len(questions))]


def readout_id(mode: str) -> str:
    """Rule param of every rule that reads (selection, fine-tuning, evaluation, audit scores)."""
    if mode not in READOUT_MODES:
        raise ValueError(f"verifier.readout must be one of {list(READOUT_MODES)}, got {mode!r}")
    return rule_id("readout", mode, LABELS, ANSWER_SLOT, INSTRUCTION, TRANSCRIPT_INSTRUCTION, has_chat_template,
                   resolve_readout, tokenizer_chat, question_block, render_readout, render_transcript_readout,
                   render_prompt, renderer_for, both_orders, order_probability)
