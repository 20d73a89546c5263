"""Table 3, two views of the audit's cost.

- GPU-seconds per hidden question (the paper's Table 3), split into counterexample search (Stage 1) and
  sequential testing (Stage 2), per architecture: from the device time `audit_scores` measured around its
  scoring calls of each stage (`device_time.parquet` next to its scores, `timed`), and the audit records.
- Wall time, memory and CPU time per model-bound job and per stage, from this run's Snakemake benchmark
  files (benchmarks/rules/<stage>/...).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import polars as pl

from debate_audit.data.io import write_parquet
from debate_audit.data.markdown import frame_table

log = logging.getLogger(__name__)

T = TypeVar("T")

# ------------------------------------------------------------------------------------ device time
STAGES = ("search", "test")  # counterexample search (q_m, q_h and the search pool), sequential testing

DEVICE_TIME_SCHEMA = {
    "dataset": pl.Utf8,
    "checkpoint": pl.Utf8,  # base / honest / adv / org
    "stage": pl.Utf8,  # "search": q_m, q_h and the search pool; "test": the test pools (first occurrence wins)
    "questions": pl.Int64,  # distinct question texts scored in this stage
    "prompts": pl.Int64,  # readout prompts (both answer orders of each question)
    "computed": pl.Int64,  # prompts computed on the device, not read from the call cache (null: unknown)
    "device": pl.Utf8,  # where the scoring ran (the CUDA device's name, or cpu)
    "device_s": pl.Float64,  # seconds of the stage's scoring calls, CUDA synchronised before and after
}


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        import torch

        return torch.cuda.get_device_name(device)
    return device


def timed(call: Callable[[], T], device: str) -> tuple[T, float]:
    """`call()` and the seconds it kept `device` busy: wall time between two synchronisations of a CUDA
    device (kernels are asynchronous, so without them the clock stops before the work does); on a CPU the
    call's wall time."""
    sync: Callable[[], None] = lambda: None  # noqa: E731
    if device.startswith("cuda"):
        import torch

        sync = lambda: torch.cuda.synchronize(device)  # noqa: E731
    sync()
    start = time.perf_counter()
    result = call()
    sync()
    return result, time.perf_counter() - start


def computed_calls(lm: Any) -> int | None:
    """Model calls the model's call cache missed so far (computed ones), None when it keeps no count."""
    return getattr(getattr(lm, "cache", None), "misses", None)


# ------------------------------------------------------------------------------------ GPU-seconds table
GPU_SECONDS_SCHEMA = {
    "architecture": pl.Utf8,
    "dataset": pl.Utf8,  # or "all": every dataset's seconds over every dataset's q_h
    "setting": pl.Utf8,  # <length>_qh<weight> of the audit; null for models you bring (architecture: the audit)
    "target": pl.Utf8,  # the audited verifier (its audit scores V_base and it)
    "n_qh": pl.Int64,  # audited hidden questions
    "search_s_per_qh": pl.Float64,  # Stage 1: V_base + target scoring q_m, q_h and the search pool, per q_h
    "test_s_per_qh": pl.Float64,  # Stage 2: V_base + target scoring the test pools (all of them), per q_h
    "total_s_per_qh": pl.Float64,
    "n_tested": pl.Int64,  # test paraphrases the sequential test read (records.n_tested, summed)
    "test_paraphrases": pl.Int64,  # test paraphrases in the pools of these q_h
    # the test seconds of the paraphrases the test read (measured seconds per test paraphrase x n_tested):
    # what a scorer that scores only what the test reads, like the release's, spends
    "test_s_per_qh_tested": pl.Float64,
    "computed_share": pl.Float64,  # computed / prompts: below 1, part of the scores came from the call cache
    "device": pl.Utf8,
}


def gpu_seconds_table(device_times: Sequence[str | Path], records: Sequence[str | Path]) -> pl.DataFrame:
    """GPU-seconds per hidden question per architecture x dataset x setting x target (and per architecture
    x setting x target over all datasets): the audit of a target needs V_base's and the target's scores, so
    its seconds are the sum of the two checkpoints' measured device time in each stage."""
    times = pl.concat([pl.read_parquet(p) for p in device_times], how="diagonal_relaxed")
    recs = pl.concat([pl.read_parquet(p) for p in records], how="diagonal_relaxed")
    rows = []
    for (arch, dataset, length, weight, target), group in recs.group_by(
        "architecture", "dataset", "length", "qh_weight", "target", maintain_order=True
    ):
        ckpts = times.filter(
            (pl.col("architecture") == arch)
            & (pl.col("dataset") == dataset)
            & (
                (pl.col("checkpoint") == "base")
                | (
                    (pl.col("checkpoint") == target)
                    # a model you bring has no length (brought.py): its label is null
                    & pl.col("length").eq_missing(length)
                    & (pl.col("qh_weight").eq_missing(weight) if target == "org" else True)
                )
            )
        )
        by_stage = {s: ckpts.filter(pl.col("stage") == s) for s in STAGES}
        rows.append(
            {
                "architecture": arch,
                "dataset": dataset,
                "setting": None if length is None else f"{length}_qh{weight:g}",
                "target": target,
                "n_qh": group.height,
                "search_s": float(by_stage["search"]["device_s"].sum()),
                "test_s": float(by_stage["test"]["device_s"].sum()),
                "n_tested": int(group["n_tested"].sum()),
                "test_paraphrases": _test_paraphrases(ckpts),
                "prompts": int(ckpts["prompts"].sum()),
                "computed": ckpts["computed"].sum(),
                "device": ", ".join(sorted(set(ckpts["device"].to_list()))),
            }
        )
    detail = pl.DataFrame(rows)
    if detail.is_empty():
        return pl.DataFrame(schema=GPU_SECONDS_SCHEMA)
    overall = detail.group_by("architecture", "setting", "target", maintain_order=True).agg(
        pl.lit("all").alias("dataset"),
        pl.col("n_qh", "search_s", "test_s", "n_tested", "test_paraphrases", "prompts", "computed").sum(),
        pl.col("device").unique().sort().str.join(", "),
    )
    frame = pl.concat([detail, overall.select(detail.columns)], how="vertical_relaxed")
    per_test = pl.when(pl.col("test_paraphrases") > 0).then(pl.col("test_s") / pl.col("test_paraphrases"))
    return (
        frame.with_columns(
            (pl.col("search_s") / pl.col("n_qh")).alias("search_s_per_qh"),
            (pl.col("test_s") / pl.col("n_qh")).alias("test_s_per_qh"),
            ((pl.col("search_s") + pl.col("test_s")) / pl.col("n_qh")).alias("total_s_per_qh"),
            (per_test.otherwise(0.0) * pl.col("n_tested") / pl.col("n_qh")).alias("test_s_per_qh_tested"),
            (pl.col("computed") / pl.col("prompts")).alias("computed_share"),
        )
        .select(list(GPU_SECONDS_SCHEMA))
        .cast(GPU_SECONDS_SCHEMA)
    )


def _test_paraphrases(ckpts: pl.DataFrame) -> int:
    """Test-pool questions one checkpoint scored (V_base and the target score the same ones)."""
    test = ckpts.filter((pl.col("stage") == "test") & (pl.col("checkpoint") == "base"))
    return int(test["questions"].sum())


RUNTIME_SCHEMA = {
    "stage": pl.Utf8,  # rule file the job belongs to (benchmarks/rules/<stage>/...)
    "job": pl.Utf8,  # benchmark file stem: rule step and wildcards
    "wall_s": pl.Float64,  # wall-clock seconds (Snakemake benchmark column `s`)
    "max_rss_mb": pl.Float64,  # peak resident memory, MB
    "cpu_time_s": pl.Float64,  # CPU seconds
}


def read_benchmarks(root: str | Path, files: Sequence[str | Path] | None = None) -> pl.DataFrame:
    """The benchmark records `files` (paths under `root`; default: every file under it)."""
    rows = []
    paths = sorted(Path(f) for f in files) if files is not None else sorted(Path(root).rglob("*.tsv"))
    for path in paths:
        try:
            frame = pl.read_csv(path, separator="\t", infer_schema_length=0)
        except Exception as err:  # a half-written file must not break the table
            log.warning("skipping %s: %s", path, err)
            continue
        if frame.is_empty() or "s" not in frame.columns:
            log.warning("skipping %s: no `s` column", path)
            continue

        def number(col: str) -> float | None:
            if col not in frame.columns:
                return None
            value = frame[col][-1]
            try:
                return float(value)
            except (TypeError, ValueError):
                return None

        rel = path.relative_to(root)
        rows.append(
            {
                "stage": rel.parts[0] if len(rel.parts) > 1 else "",
                "job": str(rel.with_suffix("")),
                "wall_s": number("s"),
                "max_rss_mb": number("max_rss"),
                "cpu_time_s": number("cpu_time"),
            }
        )
    return pl.DataFrame(rows, schema=RUNTIME_SCHEMA)


def runtime_table(
    *,
    benchmarks: str | Path,
    markdown: str | Path,
    csv: str | Path,
    parquet: str | Path,
    files: Sequence[str | Path],
    device_times: Sequence[str | Path] = (),
    records: Sequence[str | Path] = (),
    gpu_csv: str | Path | None = None,
    gpu_parquet: str | Path | None = None,
) -> pl.DataFrame:
    """Table 3: GPU-seconds per hidden question (`device_times`: every audit_scores job's device time,
    `records`: every audit's records; written to `gpu_csv` / `gpu_parquet`), then wall time per job and per
    stage from Snakemake benchmark files (last run of each). `files`: the current run's benchmark files (the
    rule's inputs), so stale records of other configurations stay out; `benchmarks`: the folder they lie
    under, which only names each job's stage."""
    jobs = read_benchmarks(benchmarks, files).sort("stage", "job")
    per_stage = jobs.group_by("stage", maintain_order=True).agg(
        pl.len().alias("jobs"), pl.col("wall_s").sum().alias("wall_s"), pl.col("max_rss_mb").max().alias("max_rss_mb")
    )
    Path(csv).parent.mkdir(parents=True, exist_ok=True)
    jobs.write_csv(csv)
    text = ["# Table 3: the audit's cost", ""]
    if device_times:
        gpu = gpu_seconds_table(device_times, records)
        text += _gpu_seconds_text(gpu)
        if gpu_csv is not None:
            gpu.write_csv(gpu_csv)
        if gpu_parquet is not None:
            write_parquet(gpu, GPU_SECONDS_SCHEMA, gpu_parquet)
    text += [
        "## Wall time per stage",
        "",
        f"From the Snakemake benchmark files under `{benchmarks}` (the latest run of each job).",
        "",
        frame_table(per_stage, floats=1),
        "",
        "## Per job",
        "",
        frame_table(jobs, floats=1),
        "",
    ]
    Path(markdown).write_text("\n".join(text))
    write_parquet(jobs, RUNTIME_SCHEMA, parquet)
    return jobs


def _gpu_seconds_text(gpu: pl.DataFrame) -> list[str]:
    main = gpu.filter(pl.col("dataset") == "all").drop("dataset")
    cached = gpu.filter(pl.col("computed_share") < 1)
    text = [
        "## GPU-seconds per hidden question",
        "",
        "Device time of `audit_scores`' scoring calls, CUDA synchronised around each stage: counterexample "
        "search (V_base and the target reading q_m, q_h and the search pool) and sequential testing (both "
        "reading the test pools, all of them: this workflow scores whole pools before the test runs). "
        "`test_s_per_qh_tested` is the share of the paraphrases the test read (`n_tested`, stopping at the "
        "first counterexample), what a scorer that scores only those, like the release's, spends. Over all "
        "datasets per architecture:",
        "",
        frame_table(main, floats=3),
        "",
    ]
    if cached.height:
        text += [
            f"{cached.height} row(s) read part of their scores from the call cache (`computed_share` < 1): "
            "their seconds cover only the computed calls. Delete the verifier's cache folder to measure all.",
            "",
        ]
    text += ["Per dataset:", "", frame_table(gpu.filter(pl.col("dataset") != "all"), floats=3), ""]
    return text
