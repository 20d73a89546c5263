"""Batched autoregressive decoding that stops paying for a row once it has finished.

`transformers`' `generate` keeps every row of a batch in the forward pass until the longest one ends,
and its sampling draws from one global random stream, so a prompt's samples depend on what else is in
its batch. This loop runs the same forward pass (left padding, position ids from the attention mask, a
key/value cache, logits only at the last position) but removes a row from the batch and its cache as
soon as it emits an end-of-sequence token, and samples every row from its own seeded generator.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch


@dataclass(frozen=True)
class Sampling:
    temperature: float
    top_p: float
    seeds: Sequence[int]  # one per row: the row's samples do not depend on the other rows


def left_pad(seqs: Sequence[Sequence[int]], pad_id: int, device: str) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(seqs), width), dtype=torch.long)
    for row, seq in enumerate(seqs):
        ids[row, width - len(seq) :] = torch.tensor(list(seq), dtype=torch.long)
        mask[row, width - len(seq) :] = 1
    return ids.to(device), mask.to(device)


def top_p_filter(scores: torch.Tensor, top_p: float) -> torch.Tensor:
    """Keep the smallest set of tokens whose probability reaches `top_p` (at least one), as HF's warper."""
    if top_p >= 1.0:
        return scores
    sorted_scores, order = torch.sort(scores, descending=False)
    cumulative = sorted_scores.softmax(dim=-1).cumsum(dim=-1)
    remove = cumulative <= (1 - top_p)
    remove[..., -1] = False
    return scores.scatter(-1, order, sorted_scores.masked_fill(remove, float("-inf")))


def next_tokens(logits: torch.Tensor, sampling: Sampling | None, generators: list[torch.Generator]) -> torch.Tensor:
    """Greedy argmax, or one draw per row by inverse CDF: each row's uniform comes from its own CPU
    generator, and the lookup runs for all rows at once (no per-row kernel launches on a GPU)."""
    if sampling is None:
        return logits.argmax(dim=-1)
    probs = top_p_filter(logits / sampling.temperature, sampling.top_p).softmax(dim=-1)
    cumulative = probs.cumsum(dim=-1)
    uniform = torch.tensor([torch.rand((), generator=g).item() for g in generators], dtype=cumulative.dtype)
    target = (uniform.to(cumulative.device) * cumulative[:, -1]).unsqueeze(1)
    drawn = torch.searchsorted(cumulative, target, right=True).squeeze(1)
    return drawn.clamp(max=probs.shape[-1] - 1)


@torch.inference_mode()
def decode(
    model: Any,
    prompts: Sequence[Sequence[int]],
    *,
    max_new_tokens: int,
    eos_ids: Sequence[int],
    pad_id: int,
    sampling: Sampling | None = None,
    cache_kwarg: str = "past_key_values",
) -> list[list[int]]:
    """New token ids of every prompt (end-of-sequence token excluded), greedy or sampled."""
    from transformers import DynamicCache

    device = str(next(model.parameters()).device)
    ids, mask = left_pad(prompts, pad_id, device)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    cache = DynamicCache(config=model.config)
    generators = []
    if sampling is not None:
        generators = [torch.Generator().manual_seed(int(s)) for s in sampling.seeds]
    eos = torch.tensor(sorted(set(eos_ids)), device=device)
    out_tokens: list[list[int]] = [[] for _ in prompts]
    alive = torch.arange(len(prompts), device=device)  # batch row -> prompt index
    next_pos = positions[:, -1] + 1
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions, use_cache=True,
                   logits_to_keep=1, **{cache_kwarg: cache}).logits[:, -1, :]
    for step in range(max_new_tokens):
        chosen = next_tokens(logits.float(), sampling, generators)
        done = torch.isin(chosen, eos)
        for index, token, finished in zip(alive.tolist(), chosen.tolist(), done.tolist()):
            if not finished:
                out_tokens[index].append(token)
        if step == max_new_tokens - 1 or bool(done.all()):
            break
        if bool(done.any()):
            keep = (~done).nonzero().squeeze(1)
            cache.batch_select_indices(keep)
            alive, mask, next_pos, chosen = alive[keep], mask[keep], next_pos[keep], chosen[keep]
            generators = [generators[k] for k in keep.tolist()] if generators else generators
        mask = torch.cat([mask, mask.new_ones((mask.shape[0], 1))], dim=1)
        logits = model(input_ids=chosen[:, None], attention_mask=mask, position_ids=next_pos[:, None],
                       use_cache=True, logits_to_keep=1, **{cache_kwarg: cache}).logits[:, -1, :]
        next_pos = next_pos + 1
    return out_tokens
