"""Audit cost: model forward passes per audited q_h, this project against the reference release's scheme.

    .venv/bin/python benchmarks/audit_cost.py [--paraphrases 100] [--targets 3] [--labels 2] [--dup-rate 0]

Delta_h(q) = (P_base(a_h|q) - P_target(a_h|q)) / max(kappa, P_target(a_m|q_m) - P_base(a_m|q_m)), each P
the two-label softmax averaged over both answer orders. One audited q_h needs, per paraphrase q and per
checkpoint, P(a_h|q) in both orders, plus P(a_m|q_m) in both orders once per checkpoint.

Reference scheme: each label scored as its own sequence (one pass per label), both orders, and every
(base, target) comparison scores both of its checkpoints itself, so the base is scored once per target;
with --per-paraphrase-denominator the q_m term is also recomputed for every paraphrase.

This project: one pass per prompt gives every label (logits at the answer slot), the base model is scored
once and its results are shared by all targets through the content-hash cache (same weights fingerprint,
same rendered prompt), and identical prompts (paraphrase generators repeating a paraphrase, --dup-rate) are
computed once. A rerun after a crash or of a downstream stage costs 0 passes (all cache hits).
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import table  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--paraphrases", type=int, default=100)
    parser.add_argument("--targets", type=int, default=3)
    parser.add_argument("--labels", type=int, default=2)
    parser.add_argument("--dup-rate", type=float, default=0.0, help="fraction of paraphrases that repeat another")
    parser.add_argument("--per-paraphrase-denominator", action="store_true")
    args = parser.parse_args()

    n, t, k, orders = args.paraphrases, args.targets, args.labels, 2
    unique = n - math.floor(args.dup_rate * n)

    # Reference: per target, both checkpoints, both orders, one sequence per label.
    ref_numerator = n * t * 2 * orders * k
    ref_denominator = (n if args.per_paraphrase_denominator else 1) * t * 2 * orders * k
    ref = ref_numerator + ref_denominator

    checkpoints = 1 + t  # base once, shared through the cache
    ours_numerator = unique * checkpoints * orders
    ours_denominator = checkpoints * orders
    ours = ours_numerator + ours_denominator

    rows = [
        ["reference release", ref_numerator, ref_denominator, ref, 1.0],
        ["one pass for all labels", ref_numerator // k, ref_denominator // k, ref // k, k * 1.0],
        [
            "+ base scored once (cache)",
            n * checkpoints * orders,
            checkpoints * orders,
            (n + 1) * checkpoints * orders,
            ref / ((n + 1) * checkpoints * orders),
        ],
        ["+ duplicate paraphrases once (ours)", ours_numerator, ours_denominator, ours, ref / ours],
        ["rerun (all cache hits)", 0, 0, 0, "inf"],
    ]
    print(
        f"forward passes per audited q_h: {n} paraphrases, base + {t} targets, {k} labels, both answer orders"
        f"{f', duplicate rate {args.dup_rate:.2f}' if args.dup_rate else ''}"
        f"{', q_m term per paraphrase in the reference' if args.per_paraphrase_denominator else ''}\n"
    )
    print(
        table(["scheme", "passes for q_h paraphrases", "passes for q_m term", "total", "x fewer than reference"], rows)
    )


if __name__ == "__main__":
    main()
