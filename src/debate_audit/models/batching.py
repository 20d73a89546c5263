"""Batch plans for scoring: group prompts that share a token prefix, sort by length inside each group.

Judge prompts share a system message and template head; verifier prompts about one story share the whole
story (the audit scores 100 paraphrases x 2 answer orders over the same context). A group's shared prefix
is run through the model once and its key/value cache reused by every batch of the group, so the
network only sees each group's unique suffixes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Batch:
    items: list[int]  # indices into the encoded prompts
    prefix: int  # number of leading tokens all items share and that come from the group's prefix cache


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _split(order: list[int], adjacent: list[int], threshold: int) -> list[list[int]]:
    """Single-linkage runs of a lexicographically sorted list: neighbours sharing >= threshold tokens."""
    runs: list[list[int]] = [[order[0]]]
    for pos in range(1, len(order)):
        if adjacent[pos - 1] >= threshold:
            runs[-1].append(order[pos])
        else:
            runs.append([order[pos]])
    return runs


def _group_prefix(members: list[int], seqs: dict[int, Sequence[int]]) -> int:
    first = seqs[members[0]]
    shared = min(common_prefix(first, seqs[m]) for m in members[1:]) if len(members) > 1 else 0
    # At least one token of every prompt must go through the batch pass to give its answer-slot logits.
    return min(shared, min(len(seqs[m]) for m in members) - 1)


def plan_batches(
    seqs: dict[int, Sequence[int]],
    *,
    batch_size: int,
    max_tokens: int | None = None,
    min_prefix: int = 16,
    min_extra: int = 32,
    min_fill: float = 0.0,
    fill_tokens: int = 512,
) -> list[Batch]:
    """Batches covering every index once.

    Level 1: runs of prompts sharing >= `min_prefix` tokens (e.g. one system message). Level 2 inside a
    run: sub-runs sharing >= `min_extra` more tokens (e.g. one story). Each sub-run with two or more members
    is its own group; the rest of a run form one group with the run's prefix. Inside a group, prompts are
    sorted by length (longest first) and cut into batches of at most `batch_size` prompts and
    `max_tokens` padded suffix tokens; with `min_fill` a batch also ends before a prompt shorter than
    `min_fill` x its longest once it holds `fill_tokens` padded tokens (padding at most 1 - min_fill of the
    batch: the CPU pass packs its rows without padding, but its attention still runs over the rows
    right-padded to the longest, and a smaller batch costs little as long as its matrix products keep a few
    hundred rows; short prompts keep filling). Groups whose prefix is shorter than `min_prefix` are pooled into one
    group with prefix 0.
    """
    if not seqs:
        return []
    order = sorted(seqs, key=lambda i: tuple(seqs[i]))
    adjacent = [common_prefix(seqs[order[k]], seqs[order[k + 1]]) for k in range(len(order) - 1)]
    rank = {i: k for k, i in enumerate(order)}
    groups: list[tuple[list[int], int]] = []
    for run in _split(order, adjacent, min_prefix):
        run_prefix = _group_prefix(run, seqs)
        if len(run) == 1:
            groups.append((run, 0))
            continue
        inner_adjacent = [adjacent[rank[run[k]]] for k in range(len(run) - 1)]
        rest: list[int] = []
        for sub in _split(run, inner_adjacent, run_prefix + min_extra):
            if len(sub) > 1:
                groups.append((sub, _group_prefix(sub, seqs)))
            else:
                rest.extend(sub)
        if len(rest) > 1:
            groups.append((rest, _group_prefix(rest, seqs)))
        elif rest:
            groups.append((rest, 0))
    # Prompts that share no prefix worth reusing form one pool, sorted and batched together: as groups of
    # one each they ran at batch size 1 (every unrelated prompt its own forward pass).
    loose = [i for members, prefix in groups if prefix < min_prefix for i in members]
    groups = [(members, prefix) for members, prefix in groups if prefix >= min_prefix]
    if loose:
        groups.append((loose, 0))
    return [
        Batch(items, prefix)
        for members, prefix in groups
        for items in cut_batches(
            members,
            {i: len(seqs[i]) - prefix for i in members},
            batch_size=batch_size,
            max_tokens=max_tokens,
            min_fill=min_fill,
            fill_tokens=fill_tokens,
        )
    ]


def cut_batches(
    members: Sequence[int],
    lengths: Mapping[int, int],
    *,
    batch_size: int,
    max_tokens: int | None = None,
    min_fill: float = 0.0,
    fill_tokens: int = 512,
) -> list[list[int]]:
    """`members` sorted by `lengths` (longest first) and cut into batches of at most `batch_size` items and
    `max_tokens` padded tokens (batch x longest; a single longer item still gets its own batch); `min_fill`
    and `fill_tokens` as in `plan_batches`."""
    batches: list[list[int]] = []
    current: list[int] = []
    for i in sorted(members, key=lambda i: lengths[i], reverse=True):
        longest = lengths[current[0]] if current else lengths[i]
        full = (
            len(current) >= batch_size
            or (max_tokens and (len(current) + 1) * longest > max_tokens)
            or (lengths[i] < min_fill * longest and len(current) * longest >= fill_tokens)
        )
        if current and full:
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches
