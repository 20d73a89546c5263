"""Set-up that several test files share: Snakemake and torchrun run as subprocesses, and the tiny random models
that tests build themselves (rather than through the library's `source: random`).

Plain functions, imported by bare name (`from helpers import ...`) like `smoke_workflow`: pytest puts tests/ on
sys.path when it loads tests/conftest.py, and a script run on its own (eraudit/verifier/distributed_train.py)
puts it there itself. torch and transformers are imported inside the model builders, so a file that only runs
Snakemake does not pay for them at collection.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from smoke_workflow import BIN, REPO

if TYPE_CHECKING:
    from transformers import Gemma3ForCausalLM, LlamaForCausalLM

DEAD_PROXY = "http://127.0.0.1:9"  # a closed port: a download attempt fails at once instead of going out


def beside_another_worker() -> bool:
    """Whether this test process shares the machine's cores with a second pytest-xdist worker (`make test`):
    torch work here then runs on one thread, since two threads beside the other worker spin at every barrier."""
    return int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1


# ------------------------------------------------------------------ Snakemake as a subprocess
def offline_env() -> dict[str, str]:
    """This process's environment with the checkout's library on PYTHONPATH, every proxy at a closed port and
    the hub offline: a dry run must plan URLs and hub ids without fetching them, and one that tried would fail
    here instead of reaching the network (or passing only where the network is up)."""
    return {
        **os.environ,
        "PYTHONPATH": str(REPO / "src"),
        "HTTP_PROXY": DEAD_PROXY,
        "HTTPS_PROXY": DEAD_PROXY,
        "http_proxy": DEAD_PROXY,
        "https_proxy": DEAD_PROXY,
        "HF_HUB_OFFLINE": "1",
    }


def venv_env(**extra: str) -> dict[str, str]:
    """This process's environment, with this interpreter's bin/ first on PATH (and `extra` over it): the jobs'
    commands find the venv's programs even when pytest was started without activating the venv."""
    return {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", **extra}


def run_snakemake(workdir: Path, *args: str, env: dict[str, str] | None = None, timeout: int = 300) -> str:
    """The venv's `snakemake *args` in `workdir` under `env` (None: this process's); fails the test with the
    ends of both streams unless it succeeds. Returns stdout and stderr together, the text the tests read a dry
    run's plan and job stats from."""
    result = subprocess.run(
        [str(BIN / "snakemake"), *args], cwd=workdir, capture_output=True, text=True, timeout=timeout, env=env
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result.stdout + result.stderr


def offline_snakemake(workdir: Path, *args: str) -> str:
    """`run_snakemake` under `offline_env()`: the dry runs and `--touch` runs that must need nothing fetched."""
    return run_snakemake(workdir, *args, env=offline_env())


def torchrun(processes: int, script: Path, *args: str) -> None:
    """`script *args` in `processes` local processes through torch.distributed.run (a standalone rendezvous):
    the multi-process training paths, on a CPU over gloo. Fails the test with the end of stderr unless every
    process succeeds."""
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc-per-node",
        str(processes),
        str(script),
        *args,
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]


# ------------------------------------------------------------------ tiny random models
# The shape most tiny models here share, whatever the architecture: small enough to train in milliseconds on one
# thread, with a few heads and two layers so attention, grouping and layer order are real. Tests' numbers depend
# on these values (and the seeds): a test that needs another shape passes its own, never changes these.
TINY_SHAPE: dict[str, int] = dict(
    vocab_size=48,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=4,
)
TINY_POSITIONS = 64  # max_position_embeddings of the tiny Llama and Gemma: longer than the rows they train on


def tiny_llama(seed: int | None = 0, **shape: Any) -> LlamaForCausalLM:
    """A randomly initialised Llama (the embedded model's architecture) at TINY_SHAPE and TINY_POSITIONS, `shape`
    over them; LlamaConfig's own defaults for the rest. Seeded with `seed` first; None draws on from torch's
    generator as it stands (a test that builds several in a row from one seed)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    if seed is not None:
        torch.manual_seed(seed)
    return LlamaForCausalLM(LlamaConfig(**{**TINY_SHAPE, "max_position_embeddings": TINY_POSITIONS, **shape}))


def tiny_gemma3(seed: int = 0, window: int = 4) -> Gemma3ForCausalLM:
    """A tiny random Gemma 3 text model at TINY_SHAPE (one key head of 8): a sliding-window layer (`window`
    tokens) and a full-attention one, the layer mix that makes the losses run unpacked."""
    import torch
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig

    torch.manual_seed(seed)
    config = Gemma3TextConfig(
        **{**TINY_SHAPE, "num_key_value_heads": 1},
        head_dim=8,
        sliding_window=window,
        layer_types=["sliding_attention", "full_attention"],
        max_position_embeddings=TINY_POSITIONS,
    )
    return Gemma3ForCausalLM(config)
