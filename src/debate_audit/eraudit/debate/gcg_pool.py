"""The GCG rules around the optimiser (gcg.py): jobs over ranges of a dataset's adversarial candidates, and the
merge that builds the pool selection reads from every range, as the release's gcg/run_all.py runs shards and
its merge refuses a partial pool.

A (dataset, length)'s candidates, sorted by (pair_id, candidate), are cut into `parts` contiguous ranges
(`candidate_range`); each `debate_gcg` job optimises one range and writes one record per candidate (gcg.py
GCG_SCHEMA, `pool_candidate` left to the merge). How many ranges is a speed setting (`debate.gcg.parts`, else
as many as fit `cluster.runtime.max_minutes`, tools/job_sizes.py): a finished candidate's result is cached by
its content (gcg.py `result_key`), so another range size recomputes no suffix, and the merged pool is the same
whatever the ranges. `merge_pool` refuses records that miss a candidate, repeat one or name one the
candidates do not have.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import polars as pl
import torch

from debate_audit.data.io import write_parquet
from debate_audit.models.loading import ModelRef, open_model

from .debates import CANDIDATE_SCHEMA, options_for, render_transcript, with_suffix
from .gcg import (
    GCG_SCHEMA,
    POOL_SCHEMA,
    POOLS,
    GCGSettings,
    InitialSuffixError,
    allowed_token_ids,
    compile_tasks,
    optimise,
    result_key,
    result_record,
)

log = logging.getLogger(__name__)

ITEM_COLUMNS = ("pair_id", "q_m", "y_true", "y_false", "q_h", "h_true", "h_false")


def candidate_range(count: int, part: int, parts: int) -> range:
    """The rows of range `part` (0-based) of `parts` over `count` sorted candidates: contiguous, as equal as
    integers allow, together every row once."""
    if not 0 <= part < parts:
        raise ValueError(f"GCG range {part} of {parts} does not exist (ranges 0..{parts - 1})")
    return range(part * count // parts, (part + 1) * count // parts)


def read_inputs(candidates: str | Path, pairs: str | Path) -> tuple[list[dict], dict[int, dict]]:
    """The candidates sorted by (pair_id, candidate), and the items they debate by pair_id."""
    rows = pl.read_parquet(candidates).sort("pair_id", "candidate").to_dicts()
    items = {r["pair_id"]: r for r in pl.read_parquet(pairs).select(*ITEM_COLUMNS).to_dicts()}
    return rows, items


def optimise_range(
    candidates: str | Path,
    pairs: str | Path,
    model: ModelRef,
    records_out: str | Path,
    *,
    part: int,
    parts: int,
    settings: GCGSettings,
    readout: str,
    order: str,
    order_seed: int,
    cache: str | None,
    batch_size: int | None = None,
) -> pl.DataFrame:
    """A suffix for every candidate of range `part` of `parts` (module docstring): one GCG_SCHEMA record each,
    `rejected` with the reason where its initial suffix cannot be deployed (gcg.InitialSuffixError)."""
    all_rows, items = read_inputs(candidates, pairs)
    span = candidate_range(len(all_rows), part, parts)
    rows = all_rows[span.start : span.stop]
    log.info("GCG range %d of %d: candidates %d..%d of %d", part, parts, span.start, span.stop - 1, len(all_rows))
    records = []
    with open_model(model, cache=cache) as lm:
        if not hasattr(lm, "model") or not hasattr(lm, "tokenizer"):
            raise ValueError(
                f"debate.gcg: the selector {model.name} has no local weights; GCG needs its gradients (white-box)"
            )
        allowed = torch.tensor(
            allowed_token_ids(lm.tokenizer, lm.model.get_input_embeddings().weight.shape[0], settings.allow_non_ascii)
        )
        log.info("editable vocabulary: %d tokens", allowed.numel())
        reused = 0
        for n, row in enumerate(rows, 1):
            joined = {**row, **items[row["pair_id"]]}
            base = {"dataset": row["dataset"], "pair_id": row["pair_id"], "candidate": row["candidate"]}
            tasks = compile_tasks(lm, joined, readout=readout, order=order, order_seed=order_seed, settings=settings)
            key = result_key(lm, tasks, settings)
            record = lm.cache.get_many([key]).get(key)
            if record is None:
                try:
                    record = result_record(optimise(lm, tasks, settings, allowed, batch_size=batch_size), tasks)
                except InitialSuffixError as err:  # the one case that keeps the candidate native (gcg.py)
                    log.warning("pair %d candidate %d: no suffix: %s", row["pair_id"], row["candidate"], err)
                    records.append({**base, "pool_candidate": None, "status": "rejected", "reason": str(err)})
                    continue
                lm.cache.put_many("gcg", {key: record})
            else:
                reused += 1
            records.append({**base, **record, "pool_candidate": None, "status": "ok", "reason": None})
            log.info(
                "[%d/%d] pair %d candidate %d: L_GCG %.4f (no suffix) %.4f (initial) -> %.4f; "
                "P(H_false|q_h,T) %.3f -> %.3f; P(Y_true|q_m,T) %.3f -> %.3f; suffix %r",
                n,
                len(rows),
                row["pair_id"],
                row["candidate"],
                record["loss_native"],
                record["loss_initial"],
                record["loss_final"],
                record["p_hidden_false_native"],
                record["p_hidden_false_final"],
                record["p_monitored_true_native"],
                record["p_monitored_true_final"],
                record["suffix"],
            )
        log.info("%d of %d candidates' suffixes came from the cache", reused, len(rows))
    frame = pl.DataFrame(records, schema=GCG_SCHEMA) if records else pl.DataFrame(schema=GCG_SCHEMA)
    write_parquet(frame, GCG_SCHEMA, records_out)
    return frame


def suffixed_row(row: dict, item: dict, suffix: str, number: int) -> dict:
    """The pool row of a candidate with `suffix` (CANDIDATE_SCHEMA's fields recomputed from its arguments)."""
    arguments = with_suffix(row["arguments"], suffix)
    return {
        **{key: row[key] for key in CANDIDATE_SCHEMA},
        "candidate": number,
        "arguments": arguments,
        "transcript": render_transcript(item["q_m"], options_for(item, row["true_position"]), arguments),
        "public_text": "\n".join(a["text"] for a in arguments),
    }


def complete_records(rows: Sequence[dict], parts: Sequence[str | Path]) -> list[dict]:
    """Every range's records in candidate order, one per candidate; a missing, repeated or unknown candidate
    stops the merge, naming it and the files."""
    records = [r for path in parts for r in pl.read_parquet(path).to_dicts()]
    wanted = [(r["pair_id"], r["candidate"]) for r in rows]
    found: dict[tuple[int, int], dict] = {}
    repeated = []
    for record in records:
        key = (record["pair_id"], record["candidate"])
        if key in found:
            repeated.append(key)
        found[key] = record
    missing = [key for key in wanted if key not in found]
    unknown = sorted(set(found) - set(wanted))
    for what, keys in (("no record", missing), ("two records", repeated), ("a record but no candidate", unknown)):
        if keys:
            shown = ", ".join(f"pair {p} candidate {c}" for p, c in keys[:5])
            raise ValueError(
                f"GCG merge: {len(keys)} candidate(s) have {what} in the range files {[str(p) for p in parts]} "
                f"({shown}{', ...' if len(keys) > 5 else ''}): a partial pool is never written"
            )
    return [found[key] for key in wanted]


def _check_pool(pool: str) -> None:
    if pool not in POOLS:
        raise ValueError(f"debate.gcg.pool must be one of {POOLS}, got {pool!r}")


def merge_pool(
    candidates: str | Path,
    pairs: str | Path,
    parts: Sequence[str | Path],
    pool_out: str | Path,
    suffixes_out: str | Path,
    *,
    pool: str,
) -> pl.DataFrame:
    """The pool selection reads (`pool` replace: each candidate replaced by its suffixed copy; add: both, the
    copy numbered K + k) and one record per candidate with its losses before and after (GCG_SCHEMA), from the
    records of every range (`complete_records`)."""
    _check_pool(pool)
    rows, items = read_inputs(candidates, pairs)
    offset = (max((r["candidate"] for r in rows), default=-1) + 1) if pool == "add" else 0
    records = complete_records(rows, parts)
    out_rows = []
    for row, record in zip(rows, records):
        ok = record["status"] == "ok"
        record["pool_candidate"] = offset + row["candidate"] if ok else None
        if pool == "add" or not ok:
            out_rows.append({**row, "gcg": False, "gcg_source": row["candidate"]})
        if ok:
            new = suffixed_row(row, items[row["pair_id"]], record["suffix"], record["pool_candidate"])
            out_rows.append(
                {
                    **new,
                    "gcg": True,
                    "gcg_source": row["candidate"],
                    "gcg_suffix": record["suffix"],
                    "gcg_suffix_ids": record["suffix_ids"],
                    "gcg_loss_before": record["loss_native"],
                    "gcg_loss_after": record["loss_final"],
                }
            )
    result = pl.DataFrame(out_rows, schema=POOL_SCHEMA) if out_rows else pl.DataFrame(schema=POOL_SCHEMA)
    result = result.sort("pair_id", "candidate")
    write_parquet(result, POOL_SCHEMA, pool_out)
    record_frame = pl.DataFrame(records, schema=GCG_SCHEMA) if records else pl.DataFrame(schema=GCG_SCHEMA)
    write_parquet(record_frame, GCG_SCHEMA, suffixes_out)
    done = record_frame.filter(pl.col("status") == "ok")
    log.info("%d candidates from %d range file(s): %d with a suffix", len(rows), len(parts), done.height)
    if done.height:
        log.info(
            "mean L_GCG %.4f -> %.4f, mean P(H_false|q_h,T) %.3f -> %.3f, lower loss than without a suffix on %d",
            done["loss_native"].mean(),
            done["loss_final"].mean(),
            done["p_hidden_false_native"].mean(),
            done["p_hidden_false_final"].mean(),
            (done["loss_final"] < done["loss_native"]).sum(),
        )
    return result


def optimise_candidates(
    candidates: str | Path,
    pairs: str | Path,
    model: ModelRef,
    pool_out: str | Path,
    suffixes_out: str | Path,
    *,
    pool: str,
    parts: int = 1,
    **optimise_settings,
) -> pl.DataFrame:
    """Every range in turn, then the merge, in one process: the workflow's `debate_gcg` jobs and
    `debate_gcg_merge` as one call (tests, notebooks). `optimise_settings`: optimise_range's keywords."""
    _check_pool(pool)  # before the ranges' model work, not after it at the merge
    out = Path(suffixes_out).parent
    files = [out / f"{Path(suffixes_out).stem}.part{i}_of_{parts}.parquet" for i in range(parts)]
    for i, path in enumerate(files):
        optimise_range(candidates, pairs, model, path, part=i, parts=parts, **optimise_settings)
    return merge_pool(candidates, pairs, files, pool_out, suffixes_out, pool=pool)
