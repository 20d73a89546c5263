"""Verifier fine-tuning objectives on debate transcripts.

- L_lm: next-token cross-entropy over the verifier's target text given the transcript readout prompt
  (prompt tokens masked with -100), the options in the debate's order. Two targets (`verifier.lm_target`,
  chosen in finetune.py): `argument`, the correct label and answer followed by the final argument of the
  debater who defended Y_true, continuing the prefilled "Answer:" slot, so the verifier learns to
  reproduce the winning side's reasoning (in adversarial transcripts that reasoning carries the steering);
  `adjudication`, a grounded adjudication by the base model ending in its own "Answer: X" line
  (adjudication.py), written as the whole assistant reply: its prompt stops before the "Answer:" slot, as
  the release's judge thinks first and answers last.
- L_fc: binary cross-entropy on the two answer-label logits (" A" vs " B") at the answer slot of the q_m
  readout after the transcript, target Y_true, both answer orders.
- L_qh (V_org only): the same two-label loss on the q_h readout after the transcript, target H_false.

L = w_lm L_lm + w_fc L_fc (+ w_qh L_qh). Sequences are left-padded (as in LanguageModel) so the answer
slot is the last position and only the logits that a loss reads are computed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from debate_audit.models.decoding import left_pad

from .readout import ANSWER_SLOT, render_prompt, renderer_for, tokenizer_chat

IGNORE = -100


@dataclass
class ChoiceExample:
    ids: list[int]  # readout prompt ending at the answer slot
    target: int  # 0: label " A" is correct, 1: label " B"


@dataclass
class TrainExample:
    pair_id: int
    lm_ids: list[int]  # prompt + target text
    lm_labels: list[int]  # IGNORE on prompt tokens, the token id on target tokens
    fc: list[ChoiceExample]  # q_m, both orders, target Y_true
    qh: list[ChoiceExample] = field(default_factory=list)  # q_h, both orders, target H_false (V_org only)


def lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean next-token CE where labels != IGNORE; logits (B, T, V) predict labels shifted by one."""
    shift_logits = logits[:, :-1, :].float()
    shift_labels = labels[:, 1:]
    return F.cross_entropy(shift_logits.reshape(-1, shift_logits.shape[-1]), shift_labels.reshape(-1), ignore_index=IGNORE)


def choice_loss(slot_logits: torch.Tensor, label_ids: Sequence[int], targets: torch.Tensor) -> torch.Tensor:
    """BCE on the two label logits at the answer slot; slot_logits (N, V), targets (N,) in {0, 1}."""
    pair = slot_logits[:, list(label_ids)].float()
    margin = pair[:, 0] - pair[:, 1]  # sigmoid(margin) = two-label softmax of label A
    return F.binary_cross_entropy_with_logits(margin, (targets == 0).float())


def _forward(model, ids: torch.Tensor, mask: torch.Tensor, keep: int) -> torch.Tensor:
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=keep).logits


def _choice_term(model, examples: list[ChoiceExample], label_ids, pad_id, device) -> torch.Tensor:
    ids, mask = left_pad([e.ids for e in examples], pad_id, device)
    logits = _forward(model, ids, mask, 1)[:, -1, :]
    targets = torch.tensor([e.target for e in examples], device=device)
    return choice_loss(logits, label_ids, targets)


def verifier_losses(
    model, batch: list[TrainExample], label_ids: Sequence[int], weights: dict[str, float], pad_id: int
) -> dict[str, torch.Tensor]:
    """Loss terms for one micro-batch: keys lm, fc, qh (only when the batch has q_h examples), total."""
    device = next(model.parameters()).device
    terms: dict[str, torch.Tensor] = {}
    ids, mask = left_pad([e.lm_ids for e in batch], pad_id, device)
    labels = torch.full_like(ids, IGNORE)
    for row, e in enumerate(batch):
        labels[row, ids.shape[1] - len(e.lm_labels) :] = torch.tensor(e.lm_labels, device=device)
    target_len = max(sum(1 for t in e.lm_labels if t != IGNORE) for e in batch)
    keep = min(target_len + 1, ids.shape[1])  # prompt logits are never read: compute only the tail
    terms["lm"] = lm_loss(_forward(model, ids, mask, keep), labels[:, -keep:])
    terms["fc"] = _choice_term(model, [c for e in batch for c in e.fc], label_ids, pad_id, device)
    qh = [c for e in batch for c in e.qh]
    if qh:
        terms["qh"] = _choice_term(model, qh, label_ids, pad_id, device)
    terms["total"] = sum(weights[name] * value for name, value in terms.items())
    return terms


# ------------------------------------------------------------------ encoding
def fit_transcript(tokenizer, transcript: str, budget: int) -> str:
    """Cut a transcript to `budget` tokens: keep its start (header, first round) and its end."""
    ids = tokenizer(transcript, add_special_tokens=False)["input_ids"]
    if len(ids) <= budget:
        return transcript
    head = budget // 4
    tail = budget - head - 8
    return tokenizer.decode(ids[:head]) + " [...] " + tokenizer.decode(ids[len(ids) - tail :])


def encode_example(
    tokenizer,
    *,
    pair_id: int,
    transcript: str,
    item: dict,
    true_position: str,
    target: str,
    with_qh: bool,
    max_length: int,
    max_target_tokens: int,
    readout: str = "auto",
    reply: bool = False,
    chat_template_kwargs: dict | None = None,
) -> TrainExample:
    """Tokenise one selected transcript into the L_lm, L_fc and (with_qh) L_qh examples. `target`: the L_lm
    text. `reply`: the target is the whole assistant reply ending in its own "Answer: X" line (an
    adjudication): the L_lm prompt stops before the "Answer:" slot, and a cut to `max_target_tokens` keeps
    that last line, so the conclusion is always trained on. `chat_template_kwargs`: the model's chat-template
    switches (its spec's), so training renders what scoring renders."""

    def enc(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False)["input_ids"]

    label = "A" if true_position == "A" else "B"
    options = (item["y_true"], item["y_false"]) if label == "A" else (item["y_false"], item["y_true"])
    target_ids = enc(target)
    if len(target_ids) > max_target_tokens:
        body, _, last = target.rstrip().rpartition("\n")
        if reply and body:
            tail = enc("\n" + last)
            target_ids = enc(body)[: max(0, max_target_tokens - len(tail))] + tail
        else:
            target_ids = target_ids[:max_target_tokens]
    if tokenizer.eos_token_id is not None:
        target_ids = target_ids + [tokenizer.eos_token_id]
    # One renderer with the scoring side (readout.py): the chat template or the plain format.
    chat = renderer_for(readout, tokenizer, tokenizer_chat(tokenizer, chat_template_kwargs))
    blocks = [(item["q_m"], item["y_true"], item["y_false"]), (item["q_h"], item["h_true"], item["h_false"])]
    longest_block = max(len(enc(render_prompt(q, a, b, transcript="", chat=chat))) for q, a, b in blocks)
    budget = max_length - longest_block - len(target_ids) - 16
    if budget < 16:
        raise ValueError(f"pair {pair_id}: max_length {max_length} leaves no room for the transcript")
    text = fit_transcript(tokenizer, transcript, budget)

    def prompt(question: str, a: str, b: str, slot: bool = True) -> list[int]:
        rendered = render_prompt(question, a, b, transcript=text, chat=chat)
        return enc(rendered if slot else rendered.removesuffix(ANSWER_SLOT))

    lm_prompt = prompt(item["q_m"], *options, slot=not reply)
    fc = [ChoiceExample(prompt(item["q_m"], item["y_true"], item["y_false"]), 0),
          ChoiceExample(prompt(item["q_m"], item["y_false"], item["y_true"]), 1)]
    qh = []
    if with_qh:
        qh = [ChoiceExample(prompt(item["q_h"], item["h_false"], item["h_true"]), 0),
              ChoiceExample(prompt(item["q_h"], item["h_true"], item["h_false"]), 1)]
    return TrainExample(pair_id, lm_prompt + target_ids, [IGNORE] * len(lm_prompt) + target_ids, fc, qh)
