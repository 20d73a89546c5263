"""Table 3: wall time, memory and CPU time per model-bound job and per stage, from this run's Snakemake
benchmark files (benchmarks/rules/<stage>/...)."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import polars as pl

from debate_audit.data.io import write_parquet
from debate_audit.markdown import frame_table

log = logging.getLogger(__name__)

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
        rows.append({"stage": rel.parts[0] if len(rel.parts) > 1 else "", "job": str(rel.with_suffix("")),
                     "wall_s": number("s"), "max_rss_mb": number("max_rss"), "cpu_time_s": number("cpu_time")})
    return pl.DataFrame(rows, schema=RUNTIME_SCHEMA)


def runtime_table(
    *, benchmarks: str | Path, markdown: str | Path, csv: str | Path, parquet: str | Path,
    files: Sequence[str | Path],
) -> pl.DataFrame:
    """Table 3: wall time per job and per stage from Snakemake benchmark files (last run of each).
    `files`: the current run's benchmark files (the rule's inputs), so stale records of other configurations
    stay out; `benchmarks`: the folder they lie under, which only names each job's stage."""
    jobs = read_benchmarks(benchmarks, files).sort("stage", "job")
    per_stage = jobs.group_by("stage", maintain_order=True).agg(
        pl.len().alias("jobs"), pl.col("wall_s").sum().alias("wall_s"), pl.col("max_rss_mb").max().alias("max_rss_mb")
    )
    Path(csv).parent.mkdir(parents=True, exist_ok=True)
    jobs.write_csv(csv)
    text = [
        "# Runtime per stage (Table 3)",
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
