"""Verifier fine-tuning objectives on the rows of training_rows.py (two per selected transcript, one per
answer order, each with its L_lm sequence, its q_m readout and, for V_org, its q_h readout).

- L_lm: next-token cross-entropy over the verifier's target text given the row's transcript prompt
  (prompt tokens masked with IGNORE); a row without a target (an `unresolved` adjudication) trains no L_lm.
- L_fc: binary cross-entropy on the two answer-label logits (" A" vs " B") at the answer slot of the row's
  q_m readout after the transcript, target Y_true.
- L_qh (V_org only): the same two-label loss on the row's q_h readout, target H_false. A q_h-only row
  (training_rows.encode_qh_only: a train pair without an attack) trains L_qh alone.

L = w_lm L_lm + w_fc L_fc (+ w_qh L_qh). Sequences are left-padded (as in LanguageModel) so the answer
slot is the last position and only the logits that a loss reads are computed. A row's L_lm sequence and its
q_m readout share their prompt, so where every layer attends to the whole causal past (full_attention_only)
both losses come from one forward pass with a custom attention mask (_packed_terms): the same attention, the
prompt computed once. Elsewhere (Gemma 3's sliding-window layers) they come from two passes, the L_lm pass
computing logits only from its targets' positions on: with a 262k-token vocabulary a position's logits are
1 MB in float32.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
import torch.nn.functional as F

from debate_audit.models.decoding import left_pad

from .distributed import compute_device
from .training_rows import IGNORE, ChoiceExample, TrainExample


def lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean next-token CE where labels != IGNORE; logits (B, T, V) predict labels shifted by one."""
    shift_logits = logits[:, :-1, :].float()
    shift_labels = labels[:, 1:]
    return F.cross_entropy(
        shift_logits.reshape(-1, shift_logits.shape[-1]), shift_labels.reshape(-1), ignore_index=IGNORE
    )


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


def unpackable(model) -> str | None:
    """Why a row's L_lm and L_fc cannot share one forward pass on `model` (_packed_terms), or None where they
    can: every layer must attend to its whole causal past through the mask it is given (sdpa or eager
    attention). A sliding-window layer (Gemma 3: five in six) would take the packed row's custom mask in place
    of its window and attend past it; a chunked or linear-attention layer is not reached by the mask at all."""
    config = getattr(model, "config", None)
    if config is None:
        return "the model has no config"
    attention = getattr(config, "_attn_implementation", None)
    if attention not in ("sdpa", "eager"):
        return f"its attention is {attention!r}, which takes no custom mask (sdpa and eager do)"
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    types = getattr(text, "layer_types", None)
    if types is not None:
        other = sorted({kind for kind in types if kind != "full_attention"})
        return f"it has {', '.join(other)} layers" if other else None
    if getattr(text, "sliding_window", None) is None or getattr(text, "use_sliding_window", True) is False:
        return None
    return f"its layers attend within a sliding window of {text.sliding_window} tokens"


def full_attention_only(model) -> bool:
    """Whether every layer of `model` attends to its whole causal past through the mask it is given, so that a
    row's L_lm and L_fc can share one forward pass (_packed_terms; `unpackable` says why not)."""
    return unpackable(model) is None


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _packed_terms(model, batch: list[TrainExample], label_ids, pad_id, device) -> dict[str, torch.Tensor]:
    """L_lm and L_fc of a micro-batch from one forward pass. A row's L_lm sequence (prompt + target) and its
    q_m readout (the same prompt, then the answer slot) share the prompt: the packed row is the L_lm sequence
    followed by the readout's tokens after the shared prefix, which attend to that prefix and to each other
    only, at the positions they have in the readout alone. The attention is the two passes' attention, so
    the losses and gradients are theirs up to float rounding, for the prompt's cost once instead of twice
    (~40% of a step on the embedded model). A row without an L_lm target is its readout alone; a readout
    that is a prefix of the L_lm sequence (`argument` targets) repeats its last token as the packed tail."""
    rows = []  # (packed ids, shared prefix length, L_lm length, target tokens)
    for e in batch:
        (fc,) = e.fc
        shared = min(_common_prefix(e.lm_ids, fc.ids), len(fc.ids) - 1)
        n_target = sum(1 for t in e.lm_labels if t != IGNORE)
        rows.append((list(e.lm_ids) + list(fc.ids[shared:]), shared, len(e.lm_ids), n_target))
    width = max(len(seq) for seq, *_ in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    labels = torch.full((len(rows), width), IGNORE, dtype=torch.long)
    positions = torch.zeros((len(rows), width), dtype=torch.long)
    allowed = torch.zeros((len(rows), width, width), dtype=torch.bool)
    causal = torch.ones((width, width), dtype=torch.bool).tril()
    first_read = width - 1  # the first position whose logits a loss reads
    for row, ((seq, shared, n_lm, n_target), e) in enumerate(zip(rows, batch)):
        pad = width - len(seq)
        ids[row, pad:] = torch.tensor(seq, dtype=torch.long)
        labels[row, pad : pad + n_lm] = torch.tensor(e.lm_labels, dtype=torch.long)
        positions[row, pad : pad + n_lm] = torch.arange(n_lm)
        positions[row, pad + n_lm :] = torch.arange(shared, shared + len(seq) - n_lm)
        allowed[row, pad:, pad:] = causal[: len(seq), : len(seq)]
        allowed[row, pad + n_lm :, pad + shared : pad + n_lm] = False  # the readout never sees the L_lm target
        allowed[row, range(pad), range(pad)] = True  # padding attends to itself: no all-masked softmax
        if n_target:
            first_read = min(first_read, pad + n_lm - n_target - 1)
    if model.config._attn_implementation == "eager":  # eager adds the mask to the scores; sdpa takes booleans
        dtype = next(model.parameters()).dtype
        mask = torch.zeros(allowed.shape, dtype=dtype).masked_fill(~allowed, torch.finfo(dtype).min)
    else:
        mask = allowed
    keep = width - first_read
    logits = model(
        input_ids=ids.to(device),
        attention_mask=mask[:, None].to(device),
        position_ids=positions.to(device),
        logits_to_keep=keep,
    ).logits
    terms: dict[str, torch.Tensor] = {}
    if any(n_target for *_, n_target in rows):
        terms["lm"] = lm_loss(logits, labels[:, -keep:].to(device))
    targets = torch.tensor([e.fc[0].target for e in batch], device=logits.device)
    terms["fc"] = choice_loss(logits[:, -1, :], label_ids, targets)  # every readout ends its packed row
    return terms


def verifier_losses(
    model,
    batch: list[TrainExample],
    label_ids: Sequence[int],
    weights: dict[str, float],
    pad_id: int,
    *,
    lockstep: bool = False,
    pack: bool | None = None,
) -> dict[str, torch.Tensor]:
    """Loss terms for one micro-batch: keys lm (only when a row of the batch has an L_lm target), fc (only when
    a row has a q_m readout: not a q_h-only row), qh (only when the batch has q_h examples), total. `pack`:
    L_lm and L_fc from one forward pass (_packed_terms; None: wherever the model attends fully,
    full_attention_only), else from two. `lockstep` (a sharded model, distributed.py): every process must make
    the same passes through the model whatever its rows, so a pass a batch has nothing for runs on its first
    prompt at weight 0 (packed: one pass; unpacked: the L_lm pass and the L_fc pass). `pack=True` on a model
    that `unpackable` names is refused: its losses would not be the two passes' losses."""
    device = compute_device(model)
    if pack is None:
        pack = full_attention_only(model)
    elif pack and (why := unpackable(model)) is not None:
        raise ValueError(f"L_lm and L_fc cannot share one packed forward pass on this model: {why}")
    scored = [e for e in batch if e.fc]  # rows with a q_m readout
    idle = []  # weight-0 passes, in the place of the passes they stand for

    def stand_in() -> None:
        if lockstep:
            ids, mask = left_pad([(batch[0].fc or batch[0].qh)[0].ids], pad_id, device)
            idle.append(_forward(model, ids, mask, 1).sum() * 0.0)

    terms: dict[str, torch.Tensor] = {}
    if pack and all(len(e.fc) == 1 for e in scored):
        if scored:
            terms = _packed_terms(model, scored, label_ids, pad_id, device)
        else:
            stand_in()
    else:
        with_lm = [e for e in scored if e.lm_ids]
        if with_lm:
            ids, mask = left_pad([e.lm_ids for e in with_lm], pad_id, device)
            labels = torch.full_like(ids, IGNORE)
            for row, e in enumerate(with_lm):
                labels[row, ids.shape[1] - len(e.lm_labels) :] = torch.tensor(e.lm_labels, device=device)
            target_len = max(sum(1 for t in e.lm_labels if t != IGNORE) for e in with_lm)
            keep = min(target_len + 1, ids.shape[1])  # prompt logits are never read: compute only the tail
            terms["lm"] = lm_loss(_forward(model, ids, mask, keep), labels[:, -keep:])
        else:
            stand_in()
        if scored:
            terms["fc"] = _choice_term(model, [c for e in scored for c in e.fc], label_ids, pad_id, device)
        else:
            stand_in()
    qh = [c for e in batch for c in e.qh]
    if qh:
        terms["qh"] = _choice_term(model, qh, label_ids, pad_id, device)
    terms["total"] = sum(weights[name] * value for name, value in terms.items()) + sum(idle)
    return terms
