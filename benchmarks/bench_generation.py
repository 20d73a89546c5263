"""Generation benchmark: batched greedy `generate` against per-prompt greedy, one process.

    .venv/bin/python benchmarks/bench_generation.py [--prompts 16] [--max-new-tokens 96] [--batch-sizes 8 16]

Per-prompt greedy is LanguageModel(batch_size=1).generate (no padding at all); the batched rows use the
same call with larger batches (length-sorted, left padding, position ids from the attention mask).
Both run on the same debate-style prompts (benchmarks/prompts.py). Identity is checked token for token
on the generated text; rows that differ are counted and the first differing character is shown, since
fp32 matrix products over a different batch shape can flip a near-tied greedy choice.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import MODEL_DIR, machine, table, timed  # noqa: E402
from prompts import generation_messages  # noqa: E402

from debate_audit.models import GenerationParams, LanguageModel  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=16)
    parser.add_argument("--max-new-tokens", type=int, default=96)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[16])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--out")
    args = parser.parse_args()

    single = LanguageModel(MODEL_DIR, batch_size=1, cache=None)
    convs = generation_messages(args.prompts)
    params = GenerationParams(max_new_tokens=args.max_new_tokens)
    runs = {"per-prompt greedy": single}
    for b in args.batch_sizes:
        runs[f"batched greedy, batch {b}"] = LanguageModel(MODEL_DIR, batch_size=b, cache=None, model=single.model,
                                                           tokenizer=single.tokenizer)
    times: dict[str, list[float]] = {k: [] for k in runs}
    outs: dict[str, list[str]] = {}
    for rep in range(args.repeats):
        for name, lm in runs.items():
            dt, out = timed(lambda: lm.generate(convs, params, desc=name))
            times[name].append(dt)
            outs[name] = [o[0] for o in out]
            print(f"repeat {rep + 1}: {name} {dt:.1f} s", file=sys.stderr, flush=True)
    ref = outs["per-prompt greedy"]
    new_tokens = sum(len(single.tokenizer(t, add_special_tokens=False)["input_ids"]) for t in ref)
    base = statistics.median(times["per-prompt greedy"])
    rows, notes = [], []
    for name in runs:
        t = statistics.median(times[name])
        differ = [i for i, (a, b) in enumerate(zip(outs[name], ref)) if a != b]
        rows.append([name, t, new_tokens / t, base / t, f"{len(ref) - len(differ)}/{len(ref)}"])
        for i in differ:
            k = next((j for j, (x, y) in enumerate(zip(outs[name][i], ref[i])) if x != y), min(len(ref[i]), len(outs[name][i])))
            notes.append(f"{name}: prompt {i} differs from char {k} of {len(ref[i])}: "
                         f"{ref[i][max(0, k - 20):k + 20]!r} vs {outs[name][i][max(0, k - 20):k + 20]!r}")
    text = (f"{len(convs)} prompts, greedy, max_new_tokens {args.max_new_tokens}, {new_tokens} new tokens "
            f"(per-prompt run); median of {args.repeats}\nmachine: {machine()}\n\n"
            + table(["method", "seconds", "new tokens/s", "x per-prompt", "identical outputs"], rows))
    if notes:
        text += "\n\n" + "\n".join(notes)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
