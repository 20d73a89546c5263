"""Config `cluster` (`ClusterSettings`), and where a job's engines keep their caches: every job sets them
(runtime/job.py), so this module imports nothing of the library; what a job asks a scheduler for is
tools/job_sizes.py."""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class ClusterSettings:
    """Config `cluster` (config/README.md)."""

    engine_cpus: int = 2  # cores of a vLLM engine besides one per GPU (its API server and engine core)
    cpus_per_gpu: int = 4  # cores per GPU of in-process work (scoring, generation, a fine-tuning process)
    offload_cpus_per_gpu: int = 8  # ... of a fine-tuning process whose optimizer step runs on the host
    runtime_margin: float = 2.0  # time limit = estimate x margin (x attempt)
    min_runtime: int = 30  # minutes
    # minutes: a cap, 48 h by default, a common GPU partition's MaxTime (SLURM leaves a job asking for more
    # than its partition allows pending, or refuses it); None: no cap
    max_runtime: int | None = 2880
    cache_dir: str | None = None  # vLLM, Triton and hub caches (None: the job's scratch, `cache_root`)
    # whether the GPU nodes have the `gpu` extra's kernels of Qwen3.5's linear-attention layers (`make
    # install-gpu`, docs/cluster.md): false prices the in-process work of such a model at transformers' torch
    # fallback (tools/plan_hours.py LINEAR_ATTENTION_FALLBACK), in make plan and in the jobs' time limits
    linear_attention_kernels: bool = True

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> ClusterSettings:
        cluster = config.get("cluster") or {}
        cpus, runtime = cluster.get("cpus") or {}, cluster.get("runtime") or {}
        default = cls()
        return cls(
            engine_cpus=int(cpus.get("engine", default.engine_cpus)),
            cpus_per_gpu=int(cpus.get("per_gpu", default.cpus_per_gpu)),
            offload_cpus_per_gpu=int(cpus.get("offload_per_gpu", default.offload_cpus_per_gpu)),
            runtime_margin=float(runtime.get("margin", default.runtime_margin)),
            min_runtime=int(runtime.get("min_minutes", default.min_runtime)),
            max_runtime=runtime.get("max_minutes", default.max_runtime),
            cache_dir=cluster.get("cache_dir", default.cache_dir),
            linear_attention_kernels=bool(cluster.get("linear_attention_kernels", default.linear_attention_kernels)),
        )


# Where the job's engines compile and cache: vLLM's torch.compile and CUDA-graph artefacts (VLLM_CACHE_ROOT),
# Triton's kernels (TRITON_CACHE_DIR, the in-process path's and vLLM's) and the Hugging Face hub's downloads
# and xet chunks (HF_HUB_CACHE, HF_XET_CACHE: only the prepare_* rules download; `datasets` keeps its Arrow
# files under HF_DATASETS_CACHE). Their defaults are under $HOME, which on a cluster is a small, slow network
# quota. Each variable the job's environment already sets is left alone (HF_HOME counts for the hub's three).
CACHE_VARIABLES = {
    "VLLM_CACHE_ROOT": ("vllm",),
    "TRITON_CACHE_DIR": ("triton",),
    "HF_HUB_CACHE": ("huggingface", "hub"),
    "HF_XET_CACHE": ("huggingface", "xet"),
    "HF_DATASETS_CACHE": ("huggingface", "datasets"),
}
HUB_VARIABLES = ("HF_HUB_CACHE", "HF_XET_CACHE", "HF_DATASETS_CACHE")


def cache_root(settings: ClusterSettings, environ: Mapping[str, str] | None = None) -> Path:
    """The folder the caches go under: `cache_dir` with environment variables and ~ expanded, else a folder of
    this user under the job's scratch ($TMPDIR: Snakemake points it at the job's `tmpdir` resource, and many
    SLURM sites at a node-local disk)."""
    environ = os.environ if environ is None else environ
    if settings.cache_dir:

        def value(match: re.Match) -> str:
            name = match.group(1) or match.group(2)
            if not environ.get(name):
                raise ValueError(
                    f"cluster.cache_dir: {settings.cache_dir!r} names an unset environment variable {name}"
                )
            return environ[name]

        return Path(re.sub(r"\$(?:(\w+)|\{(\w+)\})", value, settings.cache_dir)).expanduser()
    scratch = environ.get("TMPDIR") or tempfile.gettempdir()
    return Path(scratch) / f"debate-audit-cache-{os.getuid()}"


def cache_environment(settings: ClusterSettings, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The cache variables (CACHE_VARIABLES) a job sets: those its environment leaves unset, under `cache_root`."""
    environ = os.environ if environ is None else environ
    root = cache_root(settings, environ)
    out = {}
    for name, parts in CACHE_VARIABLES.items():
        if environ.get(name) or (name in HUB_VARIABLES and environ.get("HF_HOME")):
            continue
        out[name] = str(root.joinpath(*parts))
    return out
