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

Useful FLOPs count each unique token once (a prefix shared by a group counts once), its attention over
the tokens before it, and one vocabulary projection per prompt; the rate is compared with a measured
fp32 2048^3 torch.matmul in the same run.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import MODEL_DIR, gemm_peak, machine, model_flops, table, timed  # noqa: E402
from prompts import scoring_prompts  # noqa: E402

from debate_audit.models import LanguageModel  # noqa: E402
from debate_audit.models.batching import plan_batches  # noqa: E402

LABELS = [" A", " B"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=256)
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--baseline-prompts", type=int, default=32, help="prompts the batch-1 baselines run on")
    parser.add_argument("--no-lm-eval", action="store_true")
    parser.add_argument("--duplicates", action="store_true", help="add the '+ 50%% duplicates' row")
    parser.add_argument("--out", help="also write the table (Markdown) here")
    args = parser.parse_args()
    torch.manual_seed(0)

    lm = LanguageModel(MODEL_DIR, batch_size=args.batch_size, cache=None, prefix_store_mb=0)
    plain = LanguageModel(MODEL_DIR, batch_size=args.batch_size, cache=None, model=lm.model,
                          tokenizer=lm.tokenizer, prefix_sharing=False)
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
        return [torch.log_softmax(model(input_ids=torch.tensor([seq])).logits[0, -1].float(), -1)[label_ids].tolist()
                for seq in subset]

    @torch.inference_mode()
    def answer_slot():
        return [torch.log_softmax(model(input_ids=torch.tensor([seq]), logits_to_keep=1).logits[0, -1].float(),
                                  -1)[label_ids].tolist() for seq in subset]

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
            requests = [Instance(request_type="loglikelihood", doc={}, arguments=(p, lab), idx=k)
                        for p in prompts for k, lab in enumerate(LABELS)]

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
        rows.append([label, t, n / t, base / t, harness / t if harness else "-", rate / 1e9, f"{100 * rate / peak:.0f}%",
                     f"{diff:.1e}"])
    header = (f"{len(prompts)} prompts, {total_tokens} tokens ({min(map(len, encoded))}-{max(map(len, encoded))} "
              f"per prompt), {len(positions)} unique tokens under the prefix plan; batch size {args.batch_size}; "
              f"median of {args.repeats}\nmachine: {machine()}\nfp32 GEMM peak (torch.matmul 2048^3): "
              f"{peak / 1e9:.1f} GFLOP/s; useful work {useful / 1e9:.1f} GFLOP "
              f"(all tokens, no prefix reuse: {model_flops(model.config, all_positions, len(prompts)) / 1e9:.1f})")
    text = header + "\n\n" + table(
        ["method", "seconds", "prompts/s", "x naive", "x lm-eval", "useful GFLOP/s", "of GEMM peak",
         f"max |dp| vs naive (first {k})"], rows)
    if lm_eval_note:
        text += "\n\n" + lm_eval_note
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
