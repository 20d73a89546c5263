"""Step 1 of the audit (rule audit_scores), the only one that calls a model: P[V(q) = a] for q_m
(a = Y_true), q_h and every paraphrase of q_h (a = H_true), once per (checkpoint, question text). The base
scores serve every target."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import polars as pl

from debate_audit.data.io import write_parquet
from debate_audit.models.loading import ModelRef, open_model

from ..common import verifiers
from ..common.grid import labelled, with_labels
from ..paraphrase.pools import SEARCH_POOL
from . import runtime

log = logging.getLogger(__name__)

SCORE_SCHEMA = {
    "dataset": pl.Utf8,
    "checkpoint": pl.Utf8,  # base / honest / adv / org / copy
    "training_rows": pl.Int64,  # rows the checkpoint was fine-tuned on (fingerprint.json): 0 for base and copy,
    # null for a model you bring
    "pair_id": pl.Int64,
    "kind": pl.Utf8,  # "q_m", "q_h" (the original hidden question) or "paraphrase"
    "pool": pl.Utf8,  # paraphrases: "search" or the test generator; null for q_m / q_h
    "index": pl.Int64,  # paraphrases: position in the pool; null for q_m / q_h
    "question": pl.Utf8,  # the question text shown to the verifier
    "answer": pl.Utf8,  # the scored answer: Y_true for q_m, H_true otherwise
    "other": pl.Utf8,  # the other option: Y_false / H_false
    "p_answer": pl.Float64,  # P[V(question) = answer], two-label softmax, both orders averaged
    # p_answer rests on a bound, not a value: a label outside the top log-probabilities a chat endpoint
    # returned, in either order (common/readout.py); False for every local model and raw-prompt server
    "bounded": pl.Boolean,
}


def score_rows(
    pairs: pl.DataFrame, paraphrases: pl.DataFrame, audited_ids: Sequence[int] | None = None
) -> pl.DataFrame:
    """The questions to score for the audited pairs (no probabilities yet). `audited_ids`: the pairs the
    paraphrase stage selected (from its pool reports), including those whose pools came out empty, so such
    a q_h is audited with empty pools (bound 0) rather than dropped; None: the pairs that have paraphrases."""
    ids = set(paraphrases["pair_id"].to_list()) | set(audited_ids or [])
    audited = pairs.filter(pl.col("pair_id").is_in(sorted(ids)))
    missing = ids - set(audited["pair_id"].to_list())
    if missing:
        raise ValueError(f"audited pair_ids {sorted(missing)[:10]} have no row in the pairs file")
    rows: list[dict[str, Any]] = []
    by_pair = {r["pair_id"]: r for r in audited.iter_rows(named=True)}
    for pair_id, r in sorted(by_pair.items()):
        rows.append(
            {
                "pair_id": pair_id,
                "kind": "q_m",
                "pool": None,
                "index": None,
                "question": r["q_m"],
                "answer": r["y_true"],
                "other": r["y_false"],
            }
        )
        rows.append(
            {
                "pair_id": pair_id,
                "kind": "q_h",
                "pool": None,
                "index": None,
                "question": r["q_h"],
                "answer": r["h_true"],
                "other": r["h_false"],
            }
        )
    for p in paraphrases.sort("pair_id", "pool", "index").iter_rows(named=True):
        pair = by_pair.get(p["pair_id"])
        if pair is None:
            raise ValueError(f"paraphrase of pair_id {p['pair_id']} ({p['pool']}) has no row in the pairs file")
        rows.append(
            {
                "pair_id": p["pair_id"],
                "kind": "paraphrase",
                "pool": p["pool"],
                "index": p["index"],
                "question": p["text"],
                "answer": pair["h_true"],
                "other": pair["h_false"],
            }
        )
    schema = {k: v for k, v in SCORE_SCHEMA.items() if k not in ("dataset", "checkpoint", "p_answer", "bounded")}
    return pl.DataFrame(rows, schema=schema)


def score_checkpoint(
    *,
    pairs: str | Path,
    paraphrases: Sequence[str | Path],
    model: ModelRef,
    out: str | Path,
    dataset: str,
    checkpoint: str,
    reports: Sequence[str | Path] = (),
    cache: str | None = None,
    readout: str = "auto",
    labels: dict | None = None,
    device_time_out: str | Path | None = None,
    trained_here: bool = True,
) -> pl.DataFrame:
    """Score `checkpoint` (base / honest / adv / org, or a model you bring: brought.py) on every audited
    question; `labels`: its grid cell (architecture, length, qh_weight; eraudit/common/grid.py), the leading
    columns of the output. `trained_here` False (a model you bring): how many rows it was fine-tuned on is
    unknown, so `training_rows` is null.

    The questions of the counterexample search (q_m, q_h, the search pool) and of the sequential test (the
    test pools) are scored in two calls whose device time goes to `device_time_out` (runtime.py, Table 3)."""
    from ..common.readout import ReadoutScores, answer_scores

    pools = pl.concat([pl.read_parquet(p) for p in paraphrases], how="vertical")
    audited = sorted({i for r in reports for i in pl.read_parquet(r)["pair_id"].to_list()})
    rows = score_rows(pl.read_parquet(pairs), pools, audited)
    empty = sorted(set(audited) - set(pools["pair_id"].to_list()))
    if empty:
        log.warning(
            "%s: q_h of pairs %s have no paraphrase in any pool: audited with empty pools (bound 0)", dataset, empty
        )
    # One readout per distinct (question, answer, other): a paraphrase equal across pools is scored once, in
    # the first stage that reads it.
    stage = pl.when(pl.col("pool").is_null() | (pl.col("pool") == SEARCH_POOL)).then(pl.lit(runtime.STAGES[0]))
    unique = (
        rows.with_columns(stage.otherwise(pl.lit(runtime.STAGES[1])).alias("stage"))
        .group_by("question", "answer", "other", maintain_order=True)
        .agg(pl.col("stage").min())
    )
    probs, timings = [], []
    with open_model(model, cache=cache) as lm:
        device = getattr(lm, "device", "cpu")
        # A model with a generation backend (vLLM on the paper overlay) loads its weights on first use: load
        # them now, so that Table 3's search seconds do not include reading them.
        getattr(lm, "model", None)
        for name in runtime.STAGES:
            part = unique.filter(pl.col("stage") == name)
            before = runtime.computed_calls(lm)
            read, seconds = runtime.timed(
                lambda: (
                    answer_scores(
                        lm,
                        part["question"].to_list(),
                        part["answer"].to_list(),
                        part["other"].to_list(),
                        readout=readout,
                        desc=f"{dataset} {checkpoint} {name} readout",
                    )
                    if part.height
                    else ReadoutScores([], [])
                ),
                device,
            )
            after = runtime.computed_calls(lm)
            probs.append(
                part.with_columns(
                    pl.Series("p_answer", read.p, dtype=pl.Float64),
                    pl.Series("bounded", read.bounded, dtype=pl.Boolean),
                )
            )
            timings.append(
                {
                    "dataset": dataset,
                    "checkpoint": checkpoint,
                    "stage": name,
                    "questions": part.height,
                    "prompts": 2 * part.height,
                    "computed": None if before is None else after - before,
                    "device": runtime.device_name(device),
                    "device_s": seconds,
                }
            )
            log.info(
                "%s %s %s: %d questions scored in %.2f s on %s", dataset, checkpoint, name, part.height, seconds, device
            )
    scored = rows.join(pl.concat(probs).drop("stage"), on=["question", "answer", "other"], how="left", nulls_equal=True)
    scored = scored.with_columns(
        pl.lit(dataset).alias("dataset"),
        pl.lit(checkpoint).alias("checkpoint"),
        pl.lit(verifiers.training_rows(model.directory) if trained_here else None, dtype=pl.Int64).alias(
            "training_rows"
        ),
    )
    scored = with_labels(scored, labels)
    write_parquet(scored, labelled(SCORE_SCHEMA), out)
    if device_time_out is not None:
        write_parquet(
            with_labels(pl.DataFrame(timings, schema=runtime.DEVICE_TIME_SCHEMA), labels),
            labelled(runtime.DEVICE_TIME_SCHEMA),
            device_time_out,
        )
    log.info("%s %s: %d questions (%d distinct) scored", dataset, checkpoint, rows.height, unique.height)
    bounded = int(scored["bounded"].sum())
    if bounded:
        log.warning(
            "%s %s: %d of %d probabilities rest on a bound (a label outside the endpoint's top log-probabilities): "
            "column `bounded`, carried to the audit's deltas, records and summary",
            dataset,
            checkpoint,
            bounded,
            scored.height,
        )
    return scored
