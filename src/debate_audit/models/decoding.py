"""Batched autoregressive decoding that stops paying for a row once it has finished.

`transformers`' `generate` keeps every row of a batch in the forward pass until the longest one ends,
and its sampling draws from one global random stream, so a prompt's samples depend on what else is in
its batch. This loop runs the same forward pass (left padding, position ids from the attention mask, a
key/value cache, logits only at the last position) but removes a row from the batch and its cache as
soon as it emits an end-of-sequence token, and samples every row from its own seeded generator.

Batch invariance (CPU): with `invariant=True` a prompt's states and logits are bit-identical whatever else
shares its batch and whichever stored prefix it starts from. That needs three things together: matrix
products whose rows do not depend on the row count (MKL's strict CNR mode, set in `models/__init__.py`,
and where a CPU needs it more, the row padding `cpu_numerics.py` measures at start-up), an attention whose softmax and value sums run over a length fixed by the query's position
(`blocked_causal_attention`; SDPA's CPU kernels block the key axis by the tensor's length), and every row's keys at its own token positions with
padding only before or after them, never in the middle. So the prompt pass gives attention each row's
keys right-padded after a common start (`forward_packed`; the rest of the network sees the rows packed
into one sequence without padding), rows starting from stored prefixes of different lengths go in
separate groups, and decoding continues from a left-padded copy of the prompt states. Measured on this
model: identical bits for one prompt alone, in any batch, and split at any prefix length. Where the start-up
check finds no row padding that works, `LanguageModel.batch_invariant` is False and the claim is not made.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from .prefix_store import KV, PrefixStore

# The version of this module's numerics: bump it with any change that can move a score or a generated token
# by even one bit (blocking, kernel choice, the order of a sum). It is part of the call cache's namespace
# and keys (lm.py), so results computed by older code are never mixed with new ones after an upgrade:
# every call misses once and is recomputed. History: 1 the packed pass with 64-slot blocks (unversioned
# records); 2 row padding for CPUs whose matrix-product kernels depend on the row count.
NUMERICS_VERSION = 2

# Key slots per attention block. Any fixed size is batch-invariant; 64 rather than 128 wastes less on
# short prompts and skips more of the causal triangle (short and no-prefix scoring 9-11% faster, long 7%).
ATTENTION_BLOCK = 64


def blocked_causal_attention(
    module: Any,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    *,
    pad_queries: bool = False,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Batch-invariant attention with the causal upper triangle skipped (the CPU default; a transformers
    attention function over the eager additive mask).

    Queries go in blocks of `ATTENTION_BLOCK` key slots aligned to slot 0; a query in block m attends over
    exactly slots [0, (m + 1) x block) (the key axis zero-padded and masked up to whole blocks), so its
    softmax and value sum always run over the same length in the same order, whatever the batch's width or
    a prefix split: with every row's keys at their own positions (the right-padded layout) the result is
    the same bits. Each block is one fused SDPA call: over a whole row SDPA's CPU kernel splits the key axis
    by the row's length (not invariant), over a block it splits the block's fixed length. Plain eager
    attention computes the full square. One-query calls (decoding steps) use the plain eager computation
    over the whole row. A packed pass (`forward_packed`) passes its `Packing` as `PACKING_KWARG`: its rows
    are spread into that right-padded layout here and gathered back.

    `pad_queries` (CPUs whose matrix products depend on the row count, cpu_numerics.py): every block's
    queries are padded to whole `QUERY_CHUNK`s, so the kernel's products always have the same row count.
    """
    packing = kwargs.get(PACKING_KWARG)
    if packing is not None:
        return packing.attend(query, key, value, attention_mask, scaling, pad_queries), None
    q_len, kv_len = query.shape[2], key.shape[2]
    if q_len == 1 or attention_mask is None:
        key, value = _repeat_kv(key, value, query.shape[1])
        out = _attend(query, key, value, None if attention_mask is None else attention_mask[:, :, :, :kv_len], scaling)
        return out.transpose(1, 2).contiguous(), None
    return _blocked(query, key, value, attention_mask[:, :, :, :kv_len], scaling, pad_queries).transpose(
        1, 2
    ).contiguous(), None


def _repeat_kv(key: torch.Tensor, value: torch.Tensor, heads: int) -> tuple[torch.Tensor, torch.Tensor]:
    groups = heads // key.shape[1]
    if groups > 1:
        return key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
    return key, value


def _attend(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None, scaling: float
) -> torch.Tensor:
    weights = torch.matmul(q, k.transpose(2, 3)) * scaling
    if mask is not None:
        weights = weights + mask
    return torch.matmul(torch.softmax(weights, dim=-1, dtype=torch.float32).to(q.dtype), v)


def _blocked(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor,
    scaling: float,
    pad_queries: bool = False,
) -> torch.Tensor:
    """[rows, heads, q_len, head_dim]: the block loop of `blocked_causal_attention` over a batch whose queries
    are the last q_len key slots (the per-block computation as in `Packing.attend`)."""
    q_len, kv_len = query.shape[2], key.shape[2]
    padded = -(-kv_len // ATTENTION_BLOCK) * ATTENTION_BLOCK
    if padded > kv_len:
        extra = padded - kv_len
        key = torch.nn.functional.pad(key, (0, 0, 0, extra))
        value = torch.nn.functional.pad(value, (0, 0, 0, extra))
        mask = torch.nn.functional.pad(mask, (0, extra), value=torch.finfo(mask.dtype).min)
    offset = kv_len - q_len
    out = query.new_empty(query.shape)
    for end in range(ATTENTION_BLOCK, padded + 1, ATTENTION_BLOCK):
        lo, hi = max(offset, end - ATTENTION_BLOCK), min(kv_len, end)
        if lo >= hi:
            continue
        rows = slice(lo - offset, hi - offset)
        out[:, :, rows] = _block_attention(
            query[:, :, rows], key[:, :, :end], value[:, :, :end], mask[:, :, rows, :end], scaling, pad_queries
        )
    return out


# SDPA's CPU kernel multiplies a call's queries in chunks of this many rows (fewer than 192 queries).
QUERY_CHUNK = 32


def _block_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    mask: torch.Tensor,
    scaling: float,
    pad_queries: bool = False,
) -> torch.Tensor:
    """One block's queries over exactly its key slots: the fused SDPA kernel, which splits the key axis by its
    length, here the block's fixed end, so a row gets the same bits whatever else is in the block (and it
    reads the grouped key heads without repeating them). `pad_queries`: zero queries appended up to whole
    `QUERY_CHUNK`s (their outputs dropped), so every product inside the kernel has `QUERY_CHUNK` rows."""
    span = query.shape[2]
    extra = -span % QUERY_CHUNK if pad_queries else 0
    if extra:
        query = torch.nn.functional.pad(query, (0, 0, 0, extra))
        mask = torch.nn.functional.pad(mask, (0, 0, 0, extra))
    out = torch.nn.functional.scaled_dot_product_attention(
        query, key, value, attn_mask=mask, scale=scaling, enable_gqa=query.shape[1] != key.shape[1]
    )
    return out[:, :, :span] if extra else out


PACKING_KWARG = "debate_audit_packing"


@dataclass
class Packing:
    """Where the rows of a packed pass sit. The projections and the MLP see all rows' new tokens as one
    sequence (no padding rows: on CPU a padded token costs as much as a real one); attention sees each row's
    keys at its own slots from 0, right-padded to the longest row and to whole blocks, which is the layout
    the blocked attention needs to give every row the same bits whatever shares its batch (module
    docstring). Padding slots point at real tokens: the causal mask gives them weight exactly 0 and their
    outputs are dropped, so their values never reach a real row."""

    query_index: torch.Tensor  # [rows x width] packed token behind each padded query slot
    key_slots: torch.Tensor  # [rows, padded key width] cache slot behind each padded key slot
    token_slot: torch.Tensor  # [tokens] padded query slot of each packed token
    lengths: list[int]  # new tokens per row, longest first
    start: int  # key slots before each row's first query
    _flat: dict[tuple[int, int], torch.Tensor] = field(default_factory=dict)

    def attend(
        self,
        query: torch.Tensor,
        key: torch.Tensor,
        value: torch.Tensor,
        mask: torch.Tensor,
        scaling: float,
        pad_queries: bool = False,
    ) -> torch.Tensor:
        """[1, tokens, heads, head_dim] from packed query [1, heads, tokens, head_dim], cache keys and values
        [1, kv_heads, slots, head_dim] and the causal mask [1, 1, width, padded key width]."""
        rows, width, start = len(self.lengths), self.lengths[0], self.start
        heads, kv_heads, slots, dim = query.shape[1], key.shape[1], key.shape[2], key.shape[3]
        groups, padded = heads // kv_heads, self.key_slots.shape[1]
        if (kv_heads, slots) not in self._flat:  # [rows, kv_heads, padded] rows of key.reshape(-1, dim)
            head_base = torch.arange(kv_heads, device=self.key_slots.device)[None, :, None] * slots
            self._flat[(kv_heads, slots)] = (head_base + self.key_slots[:, None, :]).reshape(-1)
        flat = self._flat[(kv_heads, slots)]
        k = key[0].reshape(-1, dim).index_select(0, flat).view(rows, kv_heads, padded, dim)
        v = value[0].reshape(-1, dim).index_select(0, flat).view(rows, kv_heads, padded, dim)
        q = query.transpose(1, 2)[0].index_select(0, self.query_index).view(rows, width, kv_heads, groups, dim)
        out = q.new_empty(q.shape)
        for end in range(ATTENTION_BLOCK, padded + 1, ATTENTION_BLOCK):
            lo, hi = max(start, end - ATTENTION_BLOCK) - start, min(start + width, end) - start
            if lo >= hi:
                continue
            n = sum(1 for length in self.lengths if length > lo)  # rows with a real query in this block
            span = hi - lo
            o = _block_attention(
                q[:n, lo:hi].reshape(n, span, heads, dim).transpose(1, 2),
                k[:n, :, :end],
                v[:n, :, :end],
                mask[:, :, lo:hi, :end],
                scaling,
                pad_queries,
            )
            out[:n, lo:hi] = o.transpose(1, 2).reshape(n, span, kv_heads, groups, dim)
        return out.view(rows * width, heads, dim).index_select(0, self.token_slot).unsqueeze(0)


def register_attention(pad_queries: bool = False) -> str:
    """Registers `blocked_causal_attention` with transformers (once) and returns its name; `pad_queries`:
    the variant that pads each block's queries (see `_block_attention`)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, eager_mask

    name = "debate_audit_blocked_padded" if pad_queries else "debate_audit_blocked"
    if name not in AttentionInterface._global_mapping:
        AttentionInterface.register(name, functools.partial(blocked_causal_attention, pad_queries=pad_queries))
        ALL_MASK_ATTENTION_FUNCTIONS.register(name, eager_mask)
    return name


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


@dataclass
class Prefill:
    logits: torch.Tensor  # [rows, vocab] at each prompt's last token
    cache: Any  # DynamicCache over [past slots | suffix slots]
    mask: torch.Tensor  # [rows, past width + suffix width] attention mask of those slots
    next_pos: torch.Tensor  # [rows] position id of each row's next token


def _past_cache(model: Any, pasts: Sequence[tuple[int, KV] | None], device: str) -> tuple[Any, torch.Tensor, list[int]]:
    """A batched cache of per-row prefix states, left-padded to the longest (padding masked out)."""
    from transformers import DynamicCache

    lengths = [0 if past is None else past[0] for past in pasts]
    width = max(lengths)
    mask = torch.zeros((len(pasts), width), dtype=torch.long, device=device)
    if not width:
        return DynamicCache(config=model.config), mask, lengths
    some = next(past[1] for past in pasts if past is not None)
    layers = []
    for layer, (k0, v0) in enumerate(some):
        keys = k0.new_zeros((len(pasts), k0.shape[1], width, k0.shape[3]))
        values = v0.new_zeros((len(pasts), v0.shape[1], width, v0.shape[3]))
        for row, past in enumerate(pasts):
            if past is not None:
                keys[row, :, width - past[0] :] = past[1][layer][0][0]
                values[row, :, width - past[0] :] = past[1][layer][1][0]
        layers.append((keys, values))
    for row, n in enumerate(lengths):
        if n:
            mask[row, width - n :] = 1
    return DynamicCache(ddp_cache_data=layers, config=model.config), mask, lengths


def start_groups(starts: Sequence[int], slack: int = 32) -> list[list[int]]:
    """Rows grouped by the length of the stored prefix they start from, longest first: a group runs from
    its shortest member's start, so members lose at most `slack` reusable tokens."""
    groups: list[list[int]] = []
    for row in sorted(range(len(starts)), key=lambda r: -starts[r]):
        if groups and starts[groups[-1][0]] - starts[row] <= slack:
            groups[-1].append(row)
        else:
            groups.append([row])
    return groups


# Architectures whose logits are lm_head(final hidden state), nothing after it (no soft-capping or scaling).
PLAIN_HEAD = {"llama", "mistral", "qwen2", "qwen3"}


@torch.inference_mode()
def forward_packed(
    model: Any,
    suffixes: Sequence[Sequence[int]],
    *,
    start: int = 0,
    past: KV | None = None,
    row_pasts: Sequence[KV] | None = None,
    cache_kwarg: str = "past_key_values",
) -> tuple[torch.Tensor, Any, list[torch.Tensor]]:
    """Logits at each row's last token, the cache, and each row's cache slots (its `start` states, then its
    suffix: index them out of `cache.layers[l].keys` along dim 2), for rows that continue from the states of
    their first `start` tokens: one `past` shared by all rows (1-row tensors) or one per row in `row_pasts`
    (each at least `start` tokens, cut to it). The suffixes run as one packed sequence (`Packing`): the
    batch-invariant layout for attention without padding rows anywhere else."""
    from transformers import DynamicCache

    device = str(next(model.parameters()).device)
    rows = len(suffixes)
    order = sorted(range(rows), key=lambda r: -len(suffixes[r]))  # longest first: see `_blocked`
    lengths = [len(suffixes[r]) for r in order]
    width = lengths[0]
    offsets = [0]
    for length in lengths:
        offsets.append(offsets[-1] + length)
    ids = torch.tensor([[t for r in order for t in suffixes[r]]], dtype=torch.long)
    positions = torch.cat([torch.arange(start, start + n) for n in lengths])[None]
    if start and past is not None:
        layers = [(k[:, :, :start], v[:, :, :start]) for k, v in past]
        past_slots = [torch.arange(start)] * rows
    elif start and row_pasts is not None:
        layers = [
            (
                torch.cat([row_pasts[r][layer][0][:, :, :start] for r in order], dim=2),
                torch.cat([row_pasts[r][layer][1][:, :, :start] for r in order], dim=2),
            )
            for layer in range(len(row_pasts[0]))
        ]
        past_slots = [torch.arange(j * start, (j + 1) * start) for j in range(rows)]
    else:
        layers, past_slots = None, [torch.arange(0)] * rows
    base = layers[0][0].shape[2] if layers else 0
    cache = DynamicCache(ddp_cache_data=layers, config=model.config) if layers else DynamicCache(config=model.config)
    slots = [torch.cat([past_slots[j], torch.arange(base + offsets[j], base + offsets[j + 1])]) for j in range(rows)]
    padded = -(-(start + width) // ATTENTION_BLOCK) * ATTENTION_BLOCK
    pad = lambda index, size: torch.cat([index, index.new_zeros(size - len(index))])  # noqa: E731
    packing = Packing(
        query_index=torch.cat([pad(torch.arange(offsets[j], offsets[j + 1]), width) for j in range(rows)]).to(device),
        key_slots=torch.stack([pad(slots[j], padded) for j in range(rows)]).to(device),
        token_slot=torch.cat([torch.arange(j * width, j * width + n) for j, n in enumerate(lengths)]).to(device),
        lengths=lengths,
        start=start,
    )
    # Real queries see only keys at or before their own slot, all real: one causal mask serves every row.
    causal = torch.arange(padded)[None, :] <= start + torch.arange(width)[:, None]
    dtype = next(model.parameters()).dtype
    mask = torch.where(causal, torch.zeros((), dtype=dtype), torch.finfo(dtype).min)[None, None].to(device)
    inputs = dict(
        input_ids=ids.to(device),
        attention_mask=mask,
        position_ids=positions.to(device),
        use_cache=True,
        **{cache_kwarg: cache, PACKING_KWARG: packing},
    )
    last = torch.tensor([offsets[j + 1] - 1 for j in range(rows)], device=device)
    if getattr(model.config, "model_type", None) in PLAIN_HEAD and hasattr(model, "model"):
        # The vocabulary projection only at each row's last token.
        logits = model.lm_head(model.model(**inputs).last_hidden_state[0, last])
    else:
        logits = model(**inputs, logits_to_keep=last).logits[0]
    back = torch.empty(rows, dtype=torch.long)
    back[torch.tensor(order)] = torch.arange(rows)
    return logits[back.to(device)], cache, [slots[j].to(device) for j in back.tolist()]


@torch.inference_mode()
def prefill_rows(
    model: Any,
    prompts: Sequence[Sequence[int]],
    *,
    pasts: Sequence[tuple[int, KV] | None] | None = None,
    store: PrefixStore | None = None,
    cache_kwarg: str = "past_key_values",
) -> tuple[torch.Tensor, list[KV]]:
    """Batch-invariant prompt pass: logits at each prompt's last token and each prompt's states (1-row
    tensors over its tokens). `pasts` / `store` as in `prefill`; repeated prompts are run once."""
    unique = list(dict.fromkeys(tuple(p) for p in prompts))
    if pasts is None:
        found = {u: store.longest(u) if store is not None else None for u in unique}
    else:
        found = {}
        for prompt, past in zip(prompts, pasts):
            found.setdefault(tuple(prompt), past)
    starts = [0 if found[u] is None else found[u][0] for u in unique]
    logits: dict[tuple[int, ...], torch.Tensor] = {}
    states: dict[tuple[int, ...], KV] = {}
    for group in start_groups(starts):
        start = min(starts[g] for g in group)
        members = [unique[g] for g in group]
        row_pasts = [found[u][1] for u in members] if start else None
        out, cache, slots = forward_packed(
            model, [u[start:] for u in members], start=start, row_pasts=row_pasts, cache_kwarg=cache_kwarg
        )
        for row, u in enumerate(members):
            logits[u] = out[row]
            # index_select copies, so a stored prompt does not keep its whole batch's cache alive
            states[u] = [
                (layer.keys.index_select(2, slots[row]), layer.values.index_select(2, slots[row]))
                for layer in cache.layers
            ]
            if store is not None:
                store.put(u, states[u])
    return torch.stack([logits[tuple(p)] for p in prompts]), [states[tuple(p)] for p in prompts]


@torch.inference_mode()
def prefill(
    model: Any,
    prompts: Sequence[Sequence[int]],
    *,
    pad_id: int,
    pasts: Sequence[tuple[int, KV] | None] | None = None,
    store: PrefixStore | None = None,
    cache_kwarg: str = "past_key_values",
    invariant: bool = False,
) -> Prefill:
    """One forward pass over what is not cached of each prompt: `pasts[r]` = (n, states of
    prompts[r][:n]) or None. With a `store`, its longest stored prefixes are used (when `pasts` is not
    given) and every prompt's states are stored afterwards. `invariant`: the batch-invariant pass
    (`prefill_rows`), then a left-padded cache of the prompt states for decoding."""
    device = str(next(model.parameters()).device)
    if invariant:
        logits, states = prefill_rows(model, prompts, pasts=pasts, store=store, cache_kwarg=cache_kwarg)
        cache, mask, lengths = _past_cache(model, [(len(p), s) for p, s in zip(prompts, states)], device)
        return Prefill(logits, cache, mask, torch.tensor(lengths, device=device))
    if pasts is None:
        pasts = [store.longest(p) for p in prompts] if store is not None else [None] * len(prompts)
    cache, past_mask, done = _past_cache(model, pasts, device)
    suffixes = [p[n:] for p, n in zip(prompts, done)]
    ids, mask = left_pad(suffixes, pad_id, device)
    positions = torch.tensor(done, device=device)[:, None] + (mask.cumsum(-1) - 1).clamp(min=0)
    full_mask = torch.cat([past_mask, mask], dim=1)
    logits = model(
        input_ids=ids,
        attention_mask=full_mask,
        position_ids=positions,
        use_cache=True,
        logits_to_keep=1,
        **{cache_kwarg: cache},
    ).logits[:, -1, :]
    if store is not None:
        past_width, width = past_mask.shape[1], ids.shape[1]
        kept: set[tuple[int, ...]] = set()
        for row, (prompt, n) in enumerate(zip(prompts, done)):
            # sampled rows repeat their prompt once per sample: store it once
            if tuple(prompt) in kept:
                continue
            kept.add(tuple(prompt))
            slots = torch.cat(
                [
                    torch.arange(past_width - n, past_width),
                    torch.arange(past_width + width - len(prompt) + n, past_width + width),
                ]
            ).to(device)
            store.put(
                prompt,
                [
                    (layer.keys[row : row + 1, :, slots], layer.values[row : row + 1, :, slots])
                    for layer in cache.layers
                ],
            )
    return Prefill(logits, cache, full_mask, positions[:, -1] + 1)


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
    store: PrefixStore | None = None,
    invariant: bool = False,
) -> list[list[int]]:
    """New token ids of every prompt (end-of-sequence token excluded), greedy or sampled. With a `store`,
    prompt prefixes computed by earlier calls are reused and these prompts' states are kept for later ones.
    `invariant`: the batch-invariant prompt pass (see `prefill`)."""
    device = str(next(model.parameters()).device)
    start = prefill(model, prompts, pad_id=pad_id, store=store, cache_kwarg=cache_kwarg, invariant=invariant)
    cache, mask, next_pos, logits = start.cache, start.mask, start.next_pos, start.logits
    generators = []
    if sampling is not None:
        generators = [torch.Generator().manual_seed(int(s)) for s in sampling.seeds]
    eos = torch.tensor(sorted(set(eos_ids)), device=device)
    out_tokens: list[list[int]] = [[] for _ in prompts]
    alive = torch.arange(len(prompts), device=device)  # batch row -> prompt index
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
        logits = model(
            input_ids=chosen[:, None],
            attention_mask=mask,
            position_ids=next_pos[:, None],
            use_cache=True,
            logits_to_keep=1,
            **{cache_kwarg: cache},
        ).logits[:, -1, :]
        next_pos = next_pos + 1
    return out_tokens
