"""Route a Snakemake script's output (prints, warnings, logging, tqdm) into its rule's log file, and record
the rule's provenance for the outputs it writes."""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from debate_audit.runtime.cluster import ClusterSettings, cache_environment
from debate_audit.runtime.gpu_slots import pinned
from debate_audit.runtime.provenance import rule_provenance
from debate_audit.runtime.threads import job_threads


@contextlib.contextmanager
def to_log(path: str | Path) -> Iterator[logging.Logger]:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", buffering=1) as fh:
        handler = logging.StreamHandler(fh)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        previous_level = root.level
        root.setLevel(logging.INFO)
        try:
            with contextlib.redirect_stdout(fh), contextlib.redirect_stderr(fh):
                try:
                    yield logging.getLogger("debate_audit")
                except Exception:
                    # Snakemake shows only the log path; the traceback must be in the log itself.
                    logging.getLogger("debate_audit").exception("stage failed")
                    raise
        finally:
            root.removeHandler(handler)
            root.setLevel(previous_level)
            sys.stdout.flush()


# The rules that download (models from the hub, datasets by URL or hub id): `make prefetch` runs them on a
# node with internet. Every other job reads only prepared files, so it runs with the hub offline: a stray
# download fails at once, naming the file, instead of hanging on a compute node without internet.
DOWNLOADING_RULES = frozenset({"prepare_model", "prepare_truthfulqa", "prepare_quality_h", "prepare_gpqa_h"})
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}


@contextlib.contextmanager
def rule_context(snakemake: Any) -> Iterator[logging.Logger]:
    """What every workflow script runs in: its log (`to_log`) and its provenance (rule, wildcards, params),
    which every Parquet file and figure written inside records; the hub offline outside DOWNLOADING_RULES;
    vLLM's, Triton's and the hub's caches on scratch (config `cluster.cache_dir`, runtime/cluster.py); on a
    local machine with GPUs, the job's `gpu` resource pinned to GPUs of its own (gpu_slots.py); in a SLURM
    step sized for a GPU job, torch's threads from the cores it holds (threads.py)."""

    offline = snakemake.rule not in DOWNLOADING_RULES
    caches = cache_environment(ClusterSettings.from_config(getattr(snakemake, "config", None) or {}))
    before = {key: os.environ.get(key) for key in (*OFFLINE_ENV, *caches)}
    if offline:
        os.environ.update(OFFLINE_ENV)
    os.environ.update(caches)  # the engines the job starts (vLLM, torchrun's workers) inherit them
    try:
        resources = getattr(snakemake, "resources", None)
        gpus = int(getattr(resources, "gpu", 0) or 0)
        cpus_per_task = int(getattr(resources, "cpus_per_task", 0) or 0)
        with (
            to_log(snakemake.log[0]) as log,
            pinned(gpus, what=f"rule {snakemake.rule}"),
            rule_provenance(snakemake.rule, dict(snakemake.params.items()), dict(snakemake.wildcards.items())),
            job_threads(int(getattr(snakemake, "threads", 1) or 1), cpus_per_task, gpus, log),
        ):
            if caches:
                log.info("caches: %s", ", ".join(f"{key}={value}" for key, value in caches.items()))
            yield log
    finally:
        for key, value in before.items():  # a script run in-process (a test) leaves its process as it was
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
