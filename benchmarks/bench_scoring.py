"""Scoring benchmark: choice_logprobs against the naive method and lm-evaluation-harness, one process.

    .venv/bin/python benchmarks/bench_scoring.py [--prompts 256] [--repeats 2] [--batch-size 16] [--baseline-prompts 32]

Each method scores the same judge/verifier prompts (benchmarks/prompts.py) for the labels " A" / " B";
runs are interleaved (method 1, 2, ..., then the next repeat) so a change in machine load hits all of
them, and the table shows medians. The techniques are added one at a time, so each row's gain over the
row above is that technique's:

  naive                one forward pass per label per prompt, batch 1, logits at every position
  one pass / labels    one pass per prompt for both labels, batch 1, logits at every position
  answer slot only     ... and the vocabulary projection only at the answer slot (logits_to_keep=1)
  batched, arrival     ... and batches of --batch-size prompts in arrival order (left padding)
  length-sorted        ... and batches sorted by length (LanguageModel(prefix_sharing=False))
  prefix KV reuse      ... and shared prefixes run once (LanguageModel default) = choice_logprobs
  + 50% duplicates     choice_logprobs on the prompts plus a duplicate of half of them (--duplicates)
  lm-eval HFLM         lm_eval.models.huggingface.HFLM.loglikelihood on (prompt, " A"), (prompt, " B")

The four batch-1 baselines (naive ... batched, arrival) cost minutes per repeat on a laptop CPU: they run on
the first --baseline-prompts prompts (the prompt list is shuffled, so judge and verifier prompts mix) and
their time is scaled to the full set (their cost is linear in the prompts); the other rows run on all.

`--shapes no-prefix short long mixed shared-prefix` instead runs the prompt-shape table (issue 16): random
words without a common prefix (70-320 tokens), short (15-60), long (600-1000), mixed (15-1000), and the
no-prefix lengths behind one shared 80-token head. Per shape, in one process on the same prompts:
naive two-pass (each label its own sequence, batch 1, full logits; on the first --baseline-prompts, scaled),
a plain length-sorted single-pass scorer (batches of --batch-size, left padding, SDPA, logits at the last
position only: what a careful user writes), lm-eval's HFLM.loglikelihood (batch --batch-size) and
choice_logprobs (batch --batch-size, no cache, prefix store off); medians of --repeats. With `--clock cpu`
the seconds are this process's CPU time (all methods run single-threaded with OMP_NUM_THREADS=1), which
other jobs on a shared machine inflate far less than wall time. `--profile` adds one call each of the plain
scorer and of ours under torch.profiler: self CPU time in matrix products, in attention and in the rest,
and what that bounds (the plain scorer's total over ours' products alone).

Useful FLOPs count each unique token once (a prefix shared by a group counts once), its attention over
the tokens before it, and one vocabulary projection per prompt; the rate is compared with a measured
fp32 2048^3 torch.matmul in the same run.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import MODEL_DIR, gemm_peak, machine, model_flops, table, timed  # noqa: E402
from prompts import scoring_prompts  # noqa: E402

from debate_audit.models import LanguageModel  # noqa: E402
from debate_audit.models.batching import plan_batches  # noqa: E402

LABELS = [" A", " B"]


WORDS = (
    "time year people way day man thing woman life child world school state family student group country "
    "problem hand part place case week company system program question work government number night point "
    "home water room mother area money story fact month lot right study book eye job word business issue side "
    "kind head house service friend father power hour game line end member law car city community name"
).split()
SHAPES = {
    "no-prefix": (70, 320),
    "short": (15, 60),
    "long": (600, 1000),
    "mixed": (15, 1000),
    "shared-prefix": (70, 320),
}


def shape_prompts(tokenizer, shape: str, count: int, seed: int = 0) -> list[str]:
    """Random-word prompts of a token-length range ending at "Answer:"; `shared-prefix` puts one 80-token
    head before each. Lengths are drawn per prompt; the text is cut at the drawn token count."""
    import random

    rng = random.Random(f"{shape}-{seed}")
    low, high = SHAPES[shape]
    head = ""
    if shape == "shared-prefix":
        ids = tokenizer(" ".join(rng.choice(WORDS) for _ in range(120)), add_special_tokens=False)["input_ids"][:80]
        head = tokenizer.decode(ids)
    out = []
    for _ in range(count):
        n = rng.randint(low, high)
        ids = tokenizer(" ".join(rng.choice(WORDS) for _ in range(n)), add_special_tokens=False)["input_ids"][: n - 3]
        out.append(head + tokenizer.decode(ids) + "\nAnswer:")
    return out


def shapes_table(args) -> str:
    from transformers import AutoModelForCausalLM

    lm = LanguageModel(MODEL_DIR, batch_size=args.batch_size, cache=None, prefix_store_mb=0)
    # The baselines run the model as a user loads it (SDPA attention); ours runs its CPU default (eager).
    ref_model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, dtype=torch.float32, attn_implementation="sdpa").eval()
    tok = lm.tokenizer
    label_ids = lm.label_token_ids(LABELS)
    hflm = None
    if not args.no_lm_eval:
        try:
            from lm_eval.api.instance import Instance
            from lm_eval.models.huggingface import HFLM

            hflm = HFLM(pretrained=ref_model, tokenizer=tok, batch_size=args.batch_size, device="cpu")
        except Exception as exc:  # noqa: BLE001 - report any reason it cannot run
            print(f"lm-eval not measured: {type(exc).__name__}: {exc}", file=sys.stderr)
    rows, profiles = [], []
    start_machine = machine()
    for shape in args.shapes:
        prompts = shape_prompts(tok, shape, args.prompts)
        encoded = [lm._encode(p) for p in prompts]
        k = min(args.baseline_prompts, len(prompts))

        @torch.inference_mode()
        def naive():
            return [
                [
                    torch.log_softmax(ref_model(input_ids=torch.tensor([seq + [lab]])).logits[0, -2].float(), -1)[
                        lab
                    ].item()
                    for lab in label_ids
                ]
                for seq in encoded[:k]
            ]

        @torch.inference_mode()
        def plain():
            out: dict[int, list[float]] = {}
            order = sorted(range(len(encoded)), key=lambda i: -len(encoded[i]))
            for start in range(0, len(order), args.batch_size):
                batch = order[start : start + args.batch_size]
                width = len(encoded[batch[0]])
                ids = torch.full((len(batch), width), tok.pad_token_id)
                mask = torch.zeros((len(batch), width), dtype=torch.long)
                for r, i in enumerate(batch):
                    ids[r, width - len(encoded[i]) :] = torch.tensor(encoded[i])
                    mask[r, width - len(encoded[i]) :] = 1
                logits = ref_model(
                    input_ids=ids,
                    attention_mask=mask,
                    position_ids=(mask.cumsum(-1) - 1).clamp(min=0),
                    logits_to_keep=1,
                ).logits[:, -1]
                for i, row in zip(batch, torch.log_softmax(logits.float(), -1)[:, label_ids].tolist()):
                    out[i] = row
            return [out[i] for i in range(len(encoded))]

        methods = {"naive two-pass": naive, "plain length-sorted single pass": plain}
        if hflm is not None:
            requests = [
                Instance(request_type="loglikelihood", doc={}, arguments=(p, lab), idx=j)
                for p in prompts
                for j, lab in enumerate(LABELS)
            ]

            def lm_eval_run(requests=requests, n=len(prompts)):
                res = hflm.loglikelihood(requests, disable_tqdm=True)
                return [[res[2 * i][0], res[2 * i + 1][0]] for i in range(n)]

            methods["lm-eval HFLM.loglikelihood"] = lm_eval_run
        methods["choice_logprobs (ours)"] = lambda: lm.choice_logprobs(prompts, LABELS, desc=shape)
        times: dict[str, list[float]] = {m: [] for m in methods}
        results = {}
        for rep in range(args.repeats):
            for name, fn in methods.items():
                dt, results[name] = timed(fn, time.process_time if args.clock == "cpu" else time.perf_counter)
                times[name].append(dt * (len(prompts) / k if name == "naive two-pass" else 1))
                print(f"{shape} repeat {rep + 1} {name}: {times[name][-1]:.2f} s", file=sys.stderr, flush=True)
        med = {m: statistics.median(t) for m, t in times.items()}
        if args.profile:
            profiles.append(
                profile_split(
                    shape,
                    {"plain": methods["plain length-sorted single pass"], "ours": methods["choice_logprobs (ours)"]},
                )
            )
        ref = results["naive two-pass"]
        for name in methods:
            diff = max(abs(math.exp(a) - math.exp(b)) for r, s in zip(results[name][:k], ref) for a, b in zip(r, s))
            harness = med.get("lm-eval HFLM.loglikelihood")
            rows.append(
                [
                    shape,
                    f"{min(map(len, encoded))}-{max(map(len, encoded))}",
                    name,
                    med[name],
                    len(prompts) / med[name],
                    med["naive two-pass"] / med[name],
                    harness / med[name] if harness else "-",
                    med["plain length-sorted single pass"] / med[name],
                    f"{diff:.1e}",
                ]
            )
    text = ""
    if profiles:
        text = "\n\nOperator profile (torch.profiler, one call each, self CPU seconds):\n\n" + table(
            [
                "shape",
                "method",
                "total",
                "matrix products (aten::mm)",
                "attention (SDPA)",
                "everything else",
                "ours with nothing but its mm, x plain",
                "ours' non-mm for 1.2x plain",
            ],
            [row for pair in profiles for row in pair],
        )
    header = (
        f"{args.prompts} two-choice prompts per shape, batch size {args.batch_size}, median of {args.repeats} "
        f"(naive on the first {args.baseline_prompts}, scaled), {args.clock} seconds\nmachine: {start_machine}, "
        f"{os.getloadavg()[0]:.1f} at the end"
    )
    return (
        header
        + "\n\n"
        + table(
            [
                "shape",
                "tokens",
                "method",
                "seconds",
                "prompts/s",
                "x naive",
                "x lm-eval",
                "x plain",
                f"max |dp| vs naive (first {args.baseline_prompts})",
            ],
            rows,
        )
        + text
    )


def profile_split(shape: str, methods: dict) -> list[list]:
    """One profiled call of the plain scorer and of ours: self CPU time in matrix products, in attention and
    in the rest. The bound column is the plain scorer's total over ours' matrix products alone: no change to
    anything but the products (which ours already runs on real tokens only) can take ours past it."""
    from torch.profiler import ProfilerActivity, profile

    split = {}
    for name, fn in methods.items():
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            fn()
        ops = {e.key: e.self_cpu_time_total / 1e6 for e in prof.key_averages()}
        total = sum(ops.values())
        mm = sum(t for k, t in ops.items() if k in ("aten::mm", "aten::addmm", "aten::bmm"))
        attention = sum(t for k, t in ops.items() if "scaled_dot_product" in k)
        split[name] = (total, mm, attention)
    plain_total, ours_mm = split["plain"][0], split["ours"][1]
    return [
        [
            shape,
            name,
            total,
            mm,
            attention,
            total - mm - attention,
            plain_total / ours_mm if name == "ours" else "-",
            max(0.0, plain_total / 1.2 - ours_mm) if name == "ours" else "-",
        ]
        for name, (total, mm, attention) in split.items()
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--baseline-prompts", type=int, default=32, help="prompts the batch-1 baselines run on")
    parser.add_argument("--no-lm-eval", action="store_true")
    parser.add_argument("--duplicates", action="store_true", help="add the '+ 50%% duplicates' row")
    parser.add_argument("--out", help="also write the table (Markdown) here")
    parser.add_argument("--shapes", nargs="+", choices=sorted(SHAPES), help="run the prompt-shape table instead")
    parser.add_argument(
        "--profile",
        action="store_true",
        help="prompt-shape table: also profile one call of the plain scorer and of ours per shape",
    )
    parser.add_argument(
        "--clock",
        choices=["wall", "cpu"],
        default="wall",
        help="prompt-shape table: wall time, or this process's CPU time (on a shared machine)",
    )
    args = parser.parse_args()
    torch.manual_seed(0)
    if args.shapes:
        text = shapes_table(args)
        print(text)
        if args.out:
            Path(args.out).write_text(text + "\n")
        return

    lm = LanguageModel(MODEL_DIR, batch_size=args.batch_size, cache=None, prefix_store_mb=0)
    plain = LanguageModel(
        MODEL_DIR, batch_size=args.batch_size, cache=None, model=lm.model, tokenizer=lm.tokenizer, prefix_sharing=False
    )
    model = lm.model
    prompts = scoring_prompts(lm, args.prompts)
    encoded = [lm._encode(p) for p in prompts]
    label_ids = lm.label_token_ids(LABELS)
    total_tokens = sum(map(len, encoded))

    # Useful work: unique tokens under the prefix plan (shared prefix once per group).
    plan = plan_batches(dict(enumerate(encoded)), batch_size=args.batch_size, max_tokens=args.batch_size * 512)
    positions: list[int] = []
    seen_prefixes: set[tuple[int, ...]] = set()
    for batch in plan:
        head = tuple(encoded[batch.items[0]][: batch.prefix])
        if batch.prefix and head not in seen_prefixes:
            seen_prefixes.add(head)
            positions.extend(range(batch.prefix))
        for i in batch.items:
            positions.extend(range(batch.prefix, len(encoded[i])))
    useful = model_flops(model.config, positions, len(prompts))
    all_positions = [p for seq in encoded for p in range(len(seq))]

    k = min(args.baseline_prompts, len(encoded))
    subset = encoded[:k]

    @torch.inference_mode()
    def naive():
        out = []
        for seq in subset:
            row = []
            for lab in label_ids:
                logits = model(input_ids=torch.tensor([seq + [lab]])).logits  # every position
                row.append(torch.log_softmax(logits[0, -2].float(), -1)[lab].item())
            out.append(row)
        return out

    @torch.inference_mode()
    def one_pass_full():
        return [
            torch.log_softmax(model(input_ids=torch.tensor([seq])).logits[0, -1].float(), -1)[label_ids].tolist()
            for seq in subset
        ]

    @torch.inference_mode()
    def answer_slot():
        return [
            torch.log_softmax(model(input_ids=torch.tensor([seq]), logits_to_keep=1).logits[0, -1].float(), -1)[
                label_ids
            ].tolist()
            for seq in subset
        ]

    @torch.inference_mode()
    def batched_arrival():
        out = []
        for start in range(0, len(subset), args.batch_size):
            logits = plain._last_logits(subset[start : start + args.batch_size], None)
            out.extend(torch.log_softmax(logits.float(), -1)[:, label_ids].tolist())
        return out

    dup = prompts + prompts[: len(prompts) // 2]
    baselines = {"naive", "one pass / labels", "answer slot only", "batched, arrival order"}
    methods = {
        "naive": naive,
        "one pass / labels": one_pass_full,
        "answer slot only": answer_slot,
        "batched, arrival order": batched_arrival,
        "length-sorted": lambda: plain.choice_logprobs(prompts, LABELS, desc="plain"),
        "prefix KV reuse (ours)": lambda: lm.choice_logprobs(prompts, LABELS, desc="ours"),
    }
    if args.duplicates:
        methods["+ 50% duplicates (ours)"] = lambda: lm.choice_logprobs(dup, LABELS, desc="dup")[: len(prompts)]
    lm_eval_note = ""
    if not args.no_lm_eval:
        try:
            from lm_eval.api.instance import Instance
            from lm_eval.models.huggingface import HFLM

            hflm = HFLM(pretrained=model, tokenizer=lm.tokenizer, batch_size=args.batch_size, device="cpu")
            requests = [
                Instance(request_type="loglikelihood", doc={}, arguments=(p, lab), idx=k)
                for p in prompts
                for k, lab in enumerate(LABELS)
            ]

            def lm_eval_run():
                res = hflm.loglikelihood(requests, disable_tqdm=True)
                return [[res[2 * i][0], res[2 * i + 1][0]] for i in range(len(prompts))]

            methods["lm-eval HFLM.loglikelihood"] = lm_eval_run
        except Exception as exc:  # noqa: BLE001 - report any reason it cannot run
            lm_eval_note = f"lm-eval not measured: {type(exc).__name__}: {exc}"

    peak_before = gemm_peak()
    times: dict[str, list[float]] = {name: [] for name in methods}
    results: dict[str, list[list[float]]] = {}
    for rep in range(args.repeats):
        for name, fn in methods.items():
            dt, out = timed(fn)
            if name in baselines:
                dt *= len(prompts) / k  # scaled from the subset
            times[name].append(dt)
            results[name] = out
            print(f"repeat {rep + 1}/{args.repeats} {name}: {dt:.2f} s", file=sys.stderr, flush=True)
    peak = statistics.median([peak_before, gemm_peak()])

    ref = results["naive"]
    base = statistics.median(times["naive"])
    harness = statistics.median(times["lm-eval HFLM.loglikelihood"]) if "lm-eval HFLM.loglikelihood" in times else None
    rows = []
    for name in methods:
        t = statistics.median(times[name])
        n = len(dup) if name.startswith("+ 50%") else len(prompts)
        diff = max(abs(math.exp(a) - math.exp(b)) for r, s in zip(results[name][:k], ref) for a, b in zip(r, s))
        rate = useful / t
        label = f"{name} (timed on {k}, scaled)" if name in baselines and k < len(prompts) else name
        rows.append(
            [
                label,
                t,
                n / t,
                base / t,
                harness / t if harness else "-",
                rate / 1e9,
                f"{100 * rate / peak:.0f}%",
                f"{diff:.1e}",
            ]
        )
    header = (
        f"{len(prompts)} prompts, {total_tokens} tokens ({min(map(len, encoded))}-{max(map(len, encoded))} "
        f"per prompt), {len(positions)} unique tokens under the prefix plan; batch size {args.batch_size}; "
        f"median of {args.repeats}\nmachine: {machine()}\nfp32 GEMM peak (torch.matmul 2048^3): "
        f"{peak / 1e9:.1f} GFLOP/s; useful work {useful / 1e9:.1f} GFLOP "
        f"(all tokens, no prefix reuse: {model_flops(model.config, all_positions, len(prompts)) / 1e9:.1f})"
    )
    text = (
        header
        + "\n\n"
        + table(
            [
                "method",
                "seconds",
                "prompts/s",
                "x naive",
                "x lm-eval",
                "useful GFLOP/s",
                "of GEMM peak",
                f"max |dp| vs naive (first {k})",
            ],
            rows,
        )
    )
    if lm_eval_note:
        text += "\n\n" + lm_eval_note
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
