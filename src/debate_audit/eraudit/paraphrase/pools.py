"""Paraphrase pools of each hidden question q_h: one search pool, one independent test pool per generator.

- Search pool (Stage 1, counterexample search): M_search rewrites per q_h from one batch prompt asking for
  diverse, meaning-preserving rewrites (App. D.3's template and JSON output with `prompt: paper`).
- Test pools (Stage 2, sequential test): per generator, M_test independent seeded samples of a
  single-paraphrase prompt. They are drawn fresh (another prompt, their own seeds), never taken from the
  search pool, so the sequential test sees i.i.d. draws of that generator.

The prompts are versioned (`paraphrase.prompt`, prompts.py): the papers' wording or the project's earlier
short prompts. What the checks do is `paraphrase.filter`:

- `report` (the release's rule, config/paper.yaml): every non-empty candidate is kept in draw order until the
  pool holds exactly its size; the checks below run on every kept paraphrase and their verdict is recorded
  (`check` column, `flagged_<reason>` counts in the report), never applied, except that the search pool
  rejects copies of q_h and duplicates (App. D.3's template requires its 100 to have none). The release filters nothing: its
  Stage 1 input holds exactly 100 strings per q_h and its Stage 2 uses each pool's first 100 strings, repeats
  included; an empty reply stops its generator script, so here an empty candidate is replaced by a fresh draw.
- `drop`: a candidate failing a check is rejected (with its reason), so a pool can come up short.

In both modes a candidate that a reply's token cap (`max_new_tokens`) cut off is rejected as `truncated` and
replaced by a fresh draw: it may end mid-question, so it is not a paraphrase of q_h. A candidate is cut off
when its reply stopped at the cap and ends in the candidate's text (`candidate`): of a cut list, the last item;
of a JSON reply read element by element, none (its partial element is no item).

Every candidate is validated (validation.py). Test pools use only the per-draw checks (empty,
identical to q_h, a missing number or symbol, the similarity floor), never the duplicate check: the bound
L_{j,t} = eta^(1/t) of the sequential test holds for i.i.d. draws from one fixed distribution. A check that
looks at one draw alone is a fixed acceptance region, so the kept stream is i.i.d. from the generator's
distribution conditioned on that region. The duplicate check compares a draw with the draws kept before
it, so whether draw t is kept depends on draws 1..t-1 and the kept stream is no longer i.i.d. Test pools
therefore keep repeated paraphrases and count them (`duplicates_kept` in the report), as the release does
("repeated strings are counted for every occurrence"). The search pool is a search, not a sample: it is
de-duplicated in every filter mode so its budget is spent on distinct rewrites. A pool short of its size after the first draw is
topped up with fresh draws (new seeds) for at most `max_topup_rounds` rounds; what is still missing is
reported as the shortfall. Kept paraphrases are numbered in the order they were drawn (`index`): the
sequential test reads them in that order.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import polars as pl

from debate_audit.data.io import write_parquet
from debate_audit.data.normalise import paraphrase_key
from debate_audit.models import GenerationParams
from debate_audit.models.loading import ModelRef, open_model
from debate_audit.models.params import Reply

from .prompts import prompts
from .validation import REASONS, SURPLUS, TRUNCATED, cheap_reason, check

log = logging.getLogger(__name__)

SEARCH_POOL = "search"
# What makes the search pool's paraphrases distinct: rejected there in every filter mode (fill_pools).
DISTINCT = ("identical", "duplicate")
FILTERS = ("report", "drop")  # `paraphrase.filter` (module docstring)
TRUNCATION = ("reject", "flag")  # `paraphrase.truncated`: what a candidate cut off at its cap gets
# Checks whose verdict a `report` pool records for each kept paraphrase ("empty": punctuation alone, kept
# because the release only refuses a blank reply; "truncated" only with `truncated: flag`).
FLAGGED = (*REASONS, TRUNCATED)


# ------------------------------------------------------------------------------------ output schemas
PARAPHRASE_SCHEMA = {
    "dataset": pl.Utf8,  # quality_h / gpqa_h
    "pair_id": pl.Int64,  # pair in data/<dataset>.parquet whose q_h was rewritten
    "pool": pl.Utf8,  # "search" or the name of a test generator
    "generator": pl.Utf8,  # model name (from `models:`) that wrote it
    "index": pl.Int64,  # 0-based position in the pool; the sequential test reads the pool in this order
    "round": pl.Int64,  # 0 = first draw, 1.. = top-up rounds
    "text": pl.Utf8,  # the paraphrase of q_h
    "similarity": pl.Float64,  # cosine similarity to q_h (all-MiniLM-L6-v2)
    "check": pl.Utf8,  # filter report: the first check it fails, which filter drop would reject it for; else null
}

PARAPHRASE_REJECTED_SCHEMA = {
    "dataset": pl.Utf8,
    "pair_id": pl.Int64,
    "pool": pl.Utf8,
    "generator": pl.Utf8,
    "round": pl.Int64,  # draw round the candidate came from
    "text": pl.Utf8,  # the candidate as parsed from the generation
    "reason": pl.Utf8,  # empty / identical / duplicate / missing_number / missing_symbol / low_similarity /
    # truncated (its reply stopped at the token cap) / surplus
    "similarity": pl.Float64,  # cosine similarity to q_h (null for empty candidates)
}

POOL_REPORT_SCHEMA = {
    "dataset": pl.Utf8,
    "pair_id": pl.Int64,
    "pool": pl.Utf8,
    "generator": pl.Utf8,
    "size": pl.Int64,  # configured pool size (M_search or M_test)
    "rounds": pl.Int64,  # draw rounds used (1 = no top-up)
    "generated": pl.Int64,  # candidates parsed from all rounds
    "kept": pl.Int64,  # paraphrases in the pool (<= size)
    "duplicates_kept": pl.Int64,  # kept paraphrases equal to an earlier kept one (test pools keep them)
    **{f"rejected_{reason}": pl.Int64 for reason in (*REASONS, TRUNCATED, SURPLUS)},  # rejections by reason
    # filter report: kept paraphrases a check would have rejected, by its reason (0 with filter drop)
    **{f"flagged_{reason}": pl.Int64 for reason in FLAGGED},
    "shortfall": pl.Int64,  # size - kept: missing after the last top-up round
}


# ------------------------------------------------------------------------------------ pool filling
class Candidate(NamedTuple):
    text: str
    cut: bool = False  # its reply stopped at the token cap (a bare str in a draw is a reply that ended itself)


Draw = Callable[[int, dict[int, int]], dict[int, list["Candidate | str"]]]
Similarity = Callable[[list[str], list[str]], list[float]]


class Kept(NamedTuple):
    round: int
    text: str
    similarity: float
    check: str | None  # filter report: the check it fails (kept anyway); None when it passes all


@dataclass
class Pool:
    original: str
    kept: list[Kept] = field(default_factory=list)
    rejected: list[tuple[int, str, str, float | None]] = field(default_factory=list)  # (round, text, reason, sim)
    generated: int = 0
    rounds: int = 0


def fill_pools(
    originals: dict[int, str],
    size: int,
    draw: Draw,
    similarity: Similarity,
    *,
    min_similarity: float,
    max_topup_rounds: int,
    dedupe: bool = True,
    apply_checks: bool = True,
    reject_truncated: bool = True,
) -> dict[int, Pool]:
    """Fill one pool of `size` validated paraphrases per key (pair_id).

    `dedupe` (search pool): reject a candidate equal to the original or to one already kept, whatever
    `apply_checks` says (App. D.3's template forbids both). Test pools pass False so every check looks at one
    draw alone (module docstring). `apply_checks` False (filter report): keep every other non-empty
    candidate and record the first check it fails in `Kept.check`.

    `draw(round, need)` returns fresh candidates for the keys in `need` (key -> number still missing);
    round 0 is the first draw, rounds 1..max_topup_rounds top up the pools still short. A candidate cut at
    its reply's token cap is rejected as truncated whatever `apply_checks` says; `reject_truncated` False
    (`truncated: flag`, for stand-in models that never stop) keeps it, its `check` "truncated" when it
    passes the rest.
    """
    pools = {key: Pool(original) for key, original in originals.items()}
    need = {key: size for key in originals} if size > 0 else {}
    for round_ in range(max_topup_rounds + 1):
        if not need:
            break
        drawn = draw(round_, dict(need))
        # Embeddings only for candidates passing the cheap checks, all of them in one batch.
        pending: list[tuple[int, str]] = []
        for key in need:
            pool = pools[key]
            pool.rounds = round_ + 1
            candidates = [Candidate(c) if isinstance(c, str) else c for c in drawn.get(key, [])]
            pool.generated += len(candidates)
            pending.extend((key, c) for c in candidates)
        sims = similarity([pools[k].original for k, _ in pending], [c.text for _, c in pending]) if pending else []
        for (key, (text, cut)), sim in zip(pending, sims):
            pool = pools[key]
            seen = [paraphrase_key(k.text) for k in pool.kept] if dedupe else []
            sim_value: float | None = None if not paraphrase_key(text) else float(sim)
            verdict = check(pool.original, text, seen, sim if sim_value is not None else float("nan"), min_similarity)
            if apply_checks or (dedupe and verdict in DISTINCT):
                reason = verdict
            else:
                reason = "empty" if not text.strip() else None
            if cut and reject_truncated:
                reason = TRUNCATED
            elif cut and verdict is None:
                verdict = TRUNCATED
            if reason is None and len(pool.kept) >= size:
                reason = SURPLUS
            if reason is None:
                pool.kept.append(Kept(round_, text, float(sim), verdict))
            else:
                pool.rejected.append((round_, text, reason, sim_value))
        need = {key: size - len(pools[key].kept) for key in need if len(pools[key].kept) < size}
    return pools


def pool_frames(
    pools: dict[int, Pool], *, dataset: str, pool: str, generator: str, size: int
) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """(paraphrases, rejected, report) frames in the schemas above."""
    kept, rejected, report = [], [], []
    for pair_id in sorted(pools):
        p = pools[pair_id]
        base = {"dataset": dataset, "pair_id": pair_id, "pool": pool, "generator": generator}
        counts = {f"rejected_{reason}": 0 for reason in (*REASONS, TRUNCATED, SURPLUS)} | {
            f"flagged_{r}": 0 for r in FLAGGED
        }
        for index, k in enumerate(p.kept):
            kept.append(
                {**base, "index": index, "round": k.round, "text": k.text, "similarity": k.similarity, "check": k.check}
            )
            if k.check is not None:
                counts[f"flagged_{k.check}"] += 1
        keys = [paraphrase_key(k.text) for k in p.kept]
        duplicates = len(keys) - len(set(keys))
        for round_, text, reason, sim in p.rejected:
            rejected.append({**base, "round": round_, "text": text, "reason": reason, "similarity": sim})
            counts[f"rejected_{reason}"] += 1
        report.append(
            {
                **base,
                "size": size,
                "rounds": p.rounds,
                "generated": p.generated,
                "kept": len(p.kept),
                "duplicates_kept": duplicates,
                **counts,
                "shortfall": size - len(p.kept),
            }
        )
    return (
        pl.DataFrame(kept, schema=PARAPHRASE_SCHEMA),
        pl.DataFrame(rejected, schema=PARAPHRASE_REJECTED_SCHEMA),
        pl.DataFrame(report, schema=POOL_REPORT_SCHEMA),
    )


# ------------------------------------------------------------------------------------ stage functions
def select_pairs(
    pairs: str | Path, split: str | Path | None, splits: Sequence[str] | None, max_pairs: int | None
) -> pl.DataFrame:
    """Pairs whose q_h gets audited: those in `splits` (by the part-1 split file), the first `max_pairs`."""
    frame = pl.read_parquet(pairs).sort("pair_id")
    if split is not None and splits:
        assignment = pl.read_parquet(split).select("pair_id", "split")
        frame = frame.join(assignment, on="pair_id", how="left").filter(pl.col("split").is_in(list(splits)))
    if max_pairs is not None:
        frame = frame.head(max_pairs)
    if frame.is_empty():
        raise ValueError(f"{pairs}: no pairs selected (splits={splits}, max_pairs={max_pairs})")
    return frame


def _write(
    frames: tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame], out: str | Path, rejected: str | Path, report: str | Path
) -> None:
    kept, rej, rep = frames
    write_parquet(kept, PARAPHRASE_SCHEMA, out)
    write_parquet(rej, PARAPHRASE_REJECTED_SCHEMA, rejected)
    write_parquet(rep, POOL_REPORT_SCHEMA, report)
    reasons = {c.removeprefix("rejected_"): int(rep[c].sum()) for c in rep.columns if c.startswith("rejected_")}
    log.info(
        "pool %s: %d q_h, generated %d, kept %d (%d pools short by %d in all), rejected by reason %s",
        rep["pool"][0] if rep.height else "?",
        rep.height,
        int(rep["generated"].sum()),
        int(rep["kept"].sum()),
        int((rep["shortfall"] > 0).sum()),
        int(rep["shortfall"].sum()),
        reasons,
    )


@dataclass(frozen=True)
class PoolSettings:
    """How one pool is drawn and filtered (config `paraphrase:`, checked by config/schema.yaml)."""

    size: int  # paraphrases kept per q_h
    temperature: float
    top_p: float
    seed: int  # round r draws with seed + 1000 r
    max_new_tokens: int
    min_similarity: float  # embedding similarity to q_h a paraphrase needs (`paraphrase.min_similarity`)
    max_topup_rounds: int  # extra rounds for pools still short
    search_samples: int = 1  # search pool only (config `samples`): sampled replies per q_h and round
    prompt: str = "paper"  # `paraphrase.prompt`: the prompt version (prompts.py)
    filter: str = "report"  # `paraphrase.filter`: report (release: keep exactly `size`) or drop
    truncated: str = "reject"  # `paraphrase.truncated`: reject (redraw) a candidate cut off at its cap, or flag it

    def __post_init__(self) -> None:
        prompts(self.prompt)  # names the key when unknown
        if self.filter not in FILTERS:
            raise ValueError(f"paraphrase.filter: {self.filter!r} is not one of {list(FILTERS)}")
        if self.truncated not in TRUNCATION:
            raise ValueError(f"paraphrase.truncated: {self.truncated!r} is not one of {list(TRUNCATION)}")

    @classmethod
    def from_config(
        cls,
        settings: dict[str, Any],
        min_similarity: float,
        *,
        prompt: str = "paper",
        filter: str = "report",
        truncated: str = "reject",
    ) -> PoolSettings:
        """From one pool's entry of `pool_settings` (its other keys, e.g. the model, are not drawing settings)
        and the section-wide `paraphrase.min_similarity`, `.prompt`, `.filter` and `.truncated`."""
        return cls(
            size=settings["size"],
            temperature=settings["temperature"],
            top_p=settings["top_p"],
            seed=settings["seed"],
            max_new_tokens=settings["max_new_tokens"],
            min_similarity=min_similarity,
            max_topup_rounds=settings["max_topup_rounds"],
            search_samples=settings.get("samples", 1),
            prompt=prompt,
            filter=filter,
            truncated=truncated,
        )


def build_pool(
    *,
    pairs: str | Path,
    split: str | Path | None,
    dataset: str,
    pool: str,
    generator: ModelRef,
    out: str | Path,
    rejected: str | Path,
    report: str | Path,
    settings: PoolSettings,
    splits: Sequence[str] | None = None,
    max_pairs: int | None = None,
    cache: str | None = None,
    embedder: Any = None,
) -> None:
    """Search pool (`pool == "search"`: batch prompt, numbered list) or a test pool (single prompt, seeded).

    `settings.search_samples`: sampled replies of the batch prompt per q_h and round (search pool only);
    small models list only a few distinct rewrites per reply. An API generator (`source: openai`) is sent one
    request per sample (`sample`), so every reply is cached under its own key.
    """
    size, search_samples = settings.size, settings.search_samples
    template = prompts(settings.prompt)
    from .embeddings import SentenceEmbedder

    frame = select_pairs(pairs, split, splits, max_pairs)
    originals = dict(zip(frame["pair_id"].to_list(), frame["q_h"].to_list()))
    embedder = embedder or SentenceEmbedder()
    search = pool == SEARCH_POOL
    one_per_request = generator.source == "openai"

    # `lm` is the generator, open while fill_pools draws (below).
    def draw(round_: int, need: dict[int, int]) -> dict[int, list[str]]:
        # Each round has its own seed, so top-up draws are fresh samples, never repeats from the cache.
        round_seed = settings.seed + 1000 * round_
        keys = list(need)
        if search:
            # Ask for a few more than missing: the small models often stop early or repeat themselves.
            messages = [template.batch(originals[k], need[k] + (2 if round_ else 0)) for k in keys]
            outs = sample(
                lm,
                messages,
                [search_samples] * len(keys),
                settings,
                round_seed,
                one_per_request,
                desc=f"{dataset} search round {round_}",
            )
            parsed = [[(reply, template.parse_batch(reply.text)) for reply in replies] for replies in outs]
            drawn = {
                k: [candidate(item, reply) for reply, items in replies for item in items]
                for k, replies in zip(keys, parsed)
            }
            empty = sum(1 for replies in parsed for _, items in replies if not items)
            if empty:
                log.warning(
                    "%s search round %d: %d of %d replies held no paraphrase the %r prompt's parser could "
                    "read (they give no candidate)",
                    dataset,
                    round_,
                    empty,
                    sum(map(len, outs)),
                    settings.prompt,
                )
            return drawn
        # Test pools: one sample per missing paraphrase, all i.i.d. from the single-paraphrase prompt.
        outs = sample(
            lm,
            [template.single(originals[k]) for k in keys],
            [need[k] for k in keys],
            settings,
            round_seed,
            one_per_request,
            desc=f"{dataset} {pool} round {round_}",
        )
        return {k: [candidate(template.parse_single(r.text), r) for r in replies] for k, replies in zip(keys, outs)}

    with open_model(generator, cache=cache) as lm:
        pools = fill_pools(
            originals,
            size,
            draw,
            embedder.similarity,
            min_similarity=settings.min_similarity,
            max_topup_rounds=settings.max_topup_rounds,
            dedupe=search,
            apply_checks=settings.filter == "drop",
            reject_truncated=settings.truncated == "reject",
        )
    _write(pool_frames(pools, dataset=dataset, pool=pool, generator=generator.name, size=size), out, rejected, report)


def candidate(item: str, reply: Reply) -> Candidate:
    """An item parsed from `reply`, truncated when the reply stopped at its token cap inside it: the reply
    ends in the item's text. An item followed by more of the reply (a later list item, the closing of a JSON
    element, a line after a rewrite) was complete before the cap."""
    tail = item.strip()[-40:]
    return Candidate(item, bool(reply.cut) and bool(tail) and reply.text.rstrip().endswith(tail))


def sample(
    lm: Any,
    conversations: list[Any],
    counts: list[int],
    settings: PoolSettings,
    seed: int,
    one_per_request: bool,
    *,
    desc: str,
) -> list[list[Reply]]:
    """`counts[i]` sampled replies to `conversations[i]`, all drawn with `seed`.

    A local model draws them as one generate call per count (the samples of one call are i.i.d.). With
    `one_per_request` (an API generator) sample j of every conversation is its own request with seed
    `seed + j`: Anthropic's OpenAI-compatible endpoint takes n = 1 only, the release asked for one
    paraphrase per call, and each reply gets its own cache key."""

    def params(n: int, seed_: int) -> GenerationParams:
        return GenerationParams(
            max_new_tokens=settings.max_new_tokens,
            do_sample=True,
            temperature=settings.temperature,
            top_p=settings.top_p,
            num_samples=n,
            seed=seed_,
        )

    out: list[list[Reply]] = [[] for _ in conversations]
    if one_per_request:
        for j in range(max(counts, default=0)):
            rows = [i for i, n in enumerate(counts) if n > j]
            replies = lm.generate_replies(
                [conversations[i] for i in rows], params(1, seed + j), desc=f"{desc} sample {j}"
            )
            for i, texts in zip(rows, replies):
                out[i].extend(texts)
        return out
    by_count: dict[int, list[int]] = {}
    for i, n in enumerate(counts):
        by_count.setdefault(n, []).append(i)
    for n, rows in by_count.items():
        for i, texts in zip(rows, lm.generate_replies([conversations[i] for i in rows], params(n, seed), desc=desc)):
            out[i] = texts
    return out


__all__ = [
    "Candidate",
    "PoolSettings",
    "candidate",
    "cheap_reason",
    "build_pool",
    "fill_pools",
    "pool_frames",
    "pool_settings",
    "sample",
    "select_pairs",
]


def pool_settings(paraphrase_config: dict[str, Any], generator: str | None) -> tuple[str, str, dict[str, Any]]:
    """(pool name, model name, sampling settings) of the search pool (`generator` None) or a test generator,
    from the config's `paraphrase:` section; a generator's own keys override the `test:` defaults."""
    if generator is None:
        search = paraphrase_config["search"]
        return SEARCH_POOL, search["generator"], search
    if generator == SEARCH_POOL:
        raise ValueError("a test generator cannot be named 'search'")
    test = paraphrase_config["test"]
    entry = test["generators"][generator]
    settings = {k: v for k, v in test.items() if k != "generators"}
    return generator, entry["model"], {**settings, **entry}
