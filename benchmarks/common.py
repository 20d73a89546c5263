"""Timing, FLOP counting and table helpers shared by the benchmark scripts."""

from __future__ import annotations

import os
import platform
import statistics
import time
from collections.abc import Callable, Sequence

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MODEL_DIR = os.path.join(ROOT, "resources", "models", "smollm2-135m")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as handle:
            cpu = next(line.split(":", 1)[1].strip() for line in handle if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    gpu = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU"
    return (
        f"{cpu}, {os.cpu_count()} cores, torch {torch.__version__} ({torch.get_num_threads()} threads), "
        f"{gpu}, load average {load:.1f} at start"
    )


def timed(fn: Callable[[], object], clock: Callable[[], float] = time.perf_counter) -> tuple[float, object]:
    """Seconds `fn` took by `clock` (wall time by default; `time.process_time` counts this process's CPU time
    only, which a machine shared with other jobs inflates far less than wall time), and its result."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    start = clock()
    out = fn()
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return clock() - start, out


def gemm_peak(n: int = 2048, repeats: int = 5, device: str = "cpu", dtype=torch.float32) -> float:
    """Median FLOP/s of an n x n x n torch.matmul (the machine's practical GEMM peak)."""
    a = torch.randn(n, n, device=device, dtype=dtype)
    b = torch.randn(n, n, device=device, dtype=dtype)
    for _ in range(2):
        a @ b
    rates = []
    for _ in range(repeats):
        dt, _ = timed(lambda: a @ b)
        rates.append(2 * n**3 / dt)
    return statistics.median(rates)


def model_flops(config, positions: Sequence[int], answer_slots: int) -> float:
    """Forward FLOPs for tokens at the given 0-based positions plus `answer_slots` vocabulary projections.

    Per token: 2 x non-embedding weights (the GEMMs) + attention scores and mixing, 4 x (position+1) x
    heads x head_dim per layer. The vocabulary projection (2 x hidden x vocab) counts only where logits are
    needed: one per prompt at the answer slot.
    """
    h, inter, layers = config.hidden_size, config.intermediate_size, config.num_hidden_layers
    head_dim = getattr(config, "head_dim", None) or h // config.num_attention_heads
    q = config.num_attention_heads * head_dim
    kv = config.num_key_value_heads * head_dim
    weights = layers * (h * q + 2 * h * kv + q * h + 3 * h * inter)
    attention = 4 * layers * q * sum(p + 1 for p in positions)
    return 2 * weights * len(positions) + attention + answer_slots * 2 * h * config.vocab_size


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    cells = [[f"{c:.4g}" if isinstance(c, float) else str(c) for c in row] for row in rows]
    widths = [max(len(h), *(len(r[k]) for r in cells)) for k, h in enumerate(headers)]
    line = lambda values: "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths)) + " |"  # noqa: E731
    return "\n".join([line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|", *map(line, cells)])
