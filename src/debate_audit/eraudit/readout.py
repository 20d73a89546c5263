"""Forced-choice readout P[V(q) = a]: the one scoring function every ER-Audit stage shares.

Prompt (plain text, no chat template, no transcript, no story) rendered by `render_readout`:

    Question: <question>
    A. <option a>
    B. <option b>
    Answer:

The model's next token is scored over the two labels " A" and " B" with `LanguageModel.choice_logprobs`
(one forward pass per prompt, batched, cached by content hash). `answer_probability(lm, questions, answers,
others)` returns P[V(q) = answer] = the two-label softmax at the answer slot, averaged over both answer
orders (answer shown as A, then as B), so position bias cancels.

`render_transcript_readout` puts a debate transcript in front of the same question block; best-of-K
selection (reading the transcript) and the L_fc / L_qh fine-tuning losses use it, so training and scoring
see one format.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from debate_audit.models import two_way_softmax

if TYPE_CHECKING:
    from debate_audit.models import LanguageModel

LABELS = (" A", " B")
READOUT_VERSION = "readout-v1"  # bump when a template below changes (rule params carry it)


def render_readout(question: str, option_a: str, option_b: str) -> str:
    """The forced-choice prompt; ends at the answer slot ("Answer:"), scored label " A" or " B"."""
    return f"Question: {question.strip()}\nA. {option_a.strip()}\nB. {option_b.strip()}\nAnswer:"


def render_transcript_readout(transcript: str, question: str, option_a: str, option_b: str) -> str:
    """The same readout after a debate transcript (selection and fine-tuning losses)."""
    return f"Debate transcript:\n{transcript.strip()}\n\n{render_readout(question, option_a, option_b)}"


def both_orders(question: str, answer: str, other: str, transcript: str | None = None) -> tuple[str, str]:
    """(prompt with `answer` as A, prompt with `answer` as B)."""
    if transcript is None:
        return render_readout(question, answer, other), render_readout(question, other, answer)
    return (
        render_transcript_readout(transcript, question, answer, other),
        render_transcript_readout(transcript, question, other, answer),
    )


def order_probability(logprobs_first: Sequence[float], logprobs_second: Sequence[float]) -> float:
    """Mean of P(answer) over the two orders: label A in the first prompt, label B in the second."""
    return 0.5 * (two_way_softmax(logprobs_first)[0] + two_way_softmax(logprobs_second)[1])


def answer_probability(
    lm: LanguageModel,
    questions: Sequence[str],
    answers: Sequence[str],
    others: Sequence[str],
    *,
    transcripts: Sequence[str] | None = None,
    desc: str = "readout",
) -> list[float]:
    """P[V(q) = answer] for each row: two-label softmax at the answer slot, averaged over both orders.

    Without `transcripts` this is the standard readout (Table 1, the audit); with them each prompt is
    preceded by its debate transcript.
    """
    if not (len(questions) == len(answers) == len(others)):
        raise ValueError(f"questions/answers/others differ in length: {len(questions)}/{len(answers)}/{len(others)}")
    if transcripts is not None and len(transcripts) != len(questions):
        raise ValueError(f"{len(transcripts)} transcripts for {len(questions)} questions")
    prompts: list[str] = []
    for i, (q, a, o) in enumerate(zip(questions, answers, others)):
        prompts.extend(both_orders(q, a, o, None if transcripts is None else transcripts[i]))
    scores = lm.choice_logprobs(prompts, list(LABELS), desc=desc)
    return [order_probability(scores[2 * i], scores[2 * i + 1]) for i in range(len(questions))]
