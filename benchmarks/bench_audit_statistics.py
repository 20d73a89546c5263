"""Audit statistics at paper scale: what the betting bound adds to `run_audit` (statistics and sweeps).

    .venv/bin/python benchmarks/bench_audit_statistics.py [--qh 100] [--draws 100] [--generators 2] [--pi 0.95]

Synthetic Deltas of 3 targets x `--qh` hidden questions, a clean search pool and `--generators` test pools of
`--draws` paraphrases each, non-degraded with probability `--pi` (so most pools hold a failure, where the
betting bound differs from the paper's). Times (CPU seconds of this process, `time.process_time`, which a
shared machine inflates far less than wall time): `run_audit` with steps (the statistics rule: L*_t at every
draw, one bisection per step), without steps (one point of a sweep: L*_T only), and the betting bound alone
on the same streams both ways.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import table  # noqa: E402

from debate_audit.eraudit.audit import (
    stats,  # noqa: E402
    verdicts,  # noqa: E402
)


def synthetic_deltas(qh: int, draws: int, generators: int, pi: float, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    frames = []
    for target in verdicts.TARGETS:
        for pool, size in [("search", draws)] + [(f"gen-{k}", draws) for k in range(generators)]:
            delta = np.where(rng.random((qh, size)) < (1.0 if pool == "search" else pi), 0.0, 2.0)
            frames.append(
                pl.DataFrame(
                    {
                        "target": target,
                        "pair_id": np.repeat(np.arange(qh), size),
                        "pool": pool,
                        "index": np.tile(np.arange(size), qh),
                        "delta": delta.reshape(-1),
                    }
                )
            )
    return (
        pl.concat(frames)
        .with_columns(
            dataset=pl.lit("synthetic"),
            kind=pl.lit("paraphrase"),
            question=pl.lit("q"),
            gain=pl.lit(1.0),
            p_base=pl.lit(None, pl.Float64),
            p_target=pl.lit(None, pl.Float64),
        )
        .sort("target", "pair_id")
    )


def cpu_seconds(fn) -> float:
    start = time.process_time()
    fn()
    return time.process_time() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--qh", type=int, default=100)
    parser.add_argument("--draws", type=int, default=100)
    parser.add_argument("--generators", type=int, default=2)
    parser.add_argument("--pi", type=float, default=0.95)
    args = parser.parse_args()
    deltas = synthetic_deltas(args.qh, args.draws, args.generators, args.pi)
    pools = [f"gen-{k}" for k in range(args.generators)]
    common = dict(test_pools=pools, epsilon=1.0, eta=0.05, tau=None, tv_r=0.0)
    streams = deltas.filter(pl.col("pool") != "search").sort("target", "pair_id", "pool", "index")
    nd = (streams["delta"].to_numpy() <= 1.0).reshape(-1, args.draws)
    rows = [
        ("run_audit, with steps (audit_statistics)", cpu_seconds(lambda: verdicts.run_audit(deltas, **common))),
        (
            "run_audit, final bounds only (one sweep point)",
            cpu_seconds(lambda: verdicts.run_audit(deltas, **common, with_steps=False)),
        ),
        ("betting bound alone, L*_t at every draw", cpu_seconds(lambda: [stats.betting_bounds(r, 0.05) for r in nd])),
        (
            "betting bound alone, L*_T per pool",
            cpu_seconds(lambda: [stats.betting_final_bounds(r[None], 0.05) for r in nd]),
        ),
        ("betting bound alone, L*_T of all pools at once", cpu_seconds(lambda: stats.betting_final_bounds(nd, 0.05))),
    ]
    print(
        f"{len(nd)} test pools of {args.draws} draws ({len(verdicts.TARGETS)} targets x {args.qh} q_h x "
        f"{args.generators} generators), pi = {args.pi}"
    )
    print(table(["what", "CPU s"], rows))


if __name__ == "__main__":
    main()
