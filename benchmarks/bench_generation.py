"""Generation benchmark: batched greedy `generate` against per-prompt greedy decoding, one process.

    .venv/bin/python benchmarks/bench_generation.py [--prompts 64] [--max-new-tokens 200] [--batch-sizes 16 64]
        [--vllm .venv-vllm/bin/python] [--no-transformers]

Rows (same debate-style prompts, benchmarks/prompts.py, asking for 30-150 words, so replies end anywhere
between a few dozen tokens and the budget):

  per-prompt transformers generate   the baseline: `model.generate` on one prompt at a time (no padding)
  transformers generate, batch B     `model.generate` on length-sorted left-padded batches: finished rows
                                     keep running until the longest row of the batch ends
  LanguageModel.generate, batch B    ours (models/decoding.py): same forward pass, finished rows leave the
                                     batch and its key/value cache at once
  vLLM (CPU engine), all in flight   with --vllm: the engine `generation_backend: vllm` starts (a vLLM server
                                     from that interpreter's environment, fp32, enforce_eager, as many
                                     threads as this process), fed the same token ids, every prompt in
                                     flight at once; its start-up is timed apart and not in the row

With --no-transformers the transformers rows are left out (they take most of the time on a loaded
machine) and the first remaining row is the baseline. Identity is checked token for token against the baseline; rows that differ are counted and the first
differing character is shown (fp32 products over another batch shape can flip a near-tied greedy choice).
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import MODEL_DIR, machine, table, timed  # noqa: E402
from prompts import generation_messages  # noqa: E402

from debate_audit.models import GenerationParams, LanguageModel  # noqa: E402
from debate_audit.models.decoding import left_pad  # noqa: E402
from debate_audit.models.serving import VLLMServer  # noqa: E402
from debate_audit.models.spec import VLLMSettings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--max-new-tokens", type=int, default=200)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--vllm", metavar="PYTHON", help="interpreter of vLLM's environment: add the vLLM row")
    parser.add_argument("--no-transformers", action="store_true", help="leave out the transformers rows")
    parser.add_argument("--out")
    args = parser.parse_args()

    lm = LanguageModel(MODEL_DIR, batch_size=1, cache=None)
    model, tok = lm.model, lm.tokenizer
    convs = generation_messages(args.prompts)
    encoded = [lm._encode(lm.render_chat(c)) for c in convs]
    eos = lm._eos_ids()
    params = GenerationParams(max_new_tokens=args.max_new_tokens)
    hf_kwargs = dict(
        max_new_tokens=args.max_new_tokens,
        do_sample=False,
        temperature=None,
        top_p=None,
        top_k=None,
        eos_token_id=eos,
        pad_token_id=tok.pad_token_id,
    )

    def decode_rows(rows: torch.Tensor, width: int) -> list[str]:
        return [
            tok.decode([t for t in row[width:].tolist() if t not in eos], skip_special_tokens=True).strip()
            for row in rows
        ]

    @torch.inference_mode()
    def hf_per_prompt() -> list[str]:
        out = []
        for seq in encoded:
            ids = torch.tensor([seq])
            out += decode_rows(
                model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), **hf_kwargs), len(seq)
            )
        return out

    def hf_batched(size: int):
        @torch.inference_mode()
        def run() -> list[str]:
            order = sorted(range(len(encoded)), key=lambda i: len(encoded[i]), reverse=True)
            out: dict[int, str] = {}
            for start in range(0, len(order), size):
                chunk = order[start : start + size]
                ids, mask = left_pad([encoded[i] for i in chunk], tok.pad_token_id, "cpu")
                rows = model.generate(input_ids=ids, attention_mask=mask, **hf_kwargs)
                out.update(zip(chunk, decode_rows(rows, ids.shape[1])))
            return [out[i] for i in range(len(encoded))]

        return run

    def ours(size: int):
        # no cross-call prompt reuse: each repeat computes everything again
        batched = LanguageModel(MODEL_DIR, batch_size=size, cache=None, model=model, tokenizer=tok, prefix_store_mb=0)
        return lambda: [o[0] for o in batched.generate(convs, params, desc=f"ours b{size}")]

    engine, started = None, 0.0
    if args.vllm:
        import os

        os.environ.setdefault("OMP_NUM_THREADS", str(torch.get_num_threads()))  # the engine's threads
        engine = VLLMServer(
            MODEL_DIR,
            name="smollm2-135m",
            dtype="float32",
            concurrency=len(encoded),
            settings=VLLMSettings(python=args.vllm, enforce_eager=True, cpu_kvcache_gb=2, max_model_len=4096),
        )
        started, _ = timed(engine.start)

    def served() -> list[str]:
        done: dict[int, list[list[int]]] = {}
        engine.complete(encoded, params, stop_ids=eos, on_finished=done.update)
        return [lm._decode(done[i])[0] for i in range(len(encoded))]

    methods = {} if args.no_transformers else {"per-prompt transformers generate": hf_per_prompt}
    for b in args.batch_sizes:
        if not args.no_transformers:
            methods[f"transformers generate, batch {b}"] = hf_batched(b)
        methods[f"LanguageModel.generate, batch {b} (ours)"] = ours(b)
    if engine is not None:
        methods[f"vLLM {engine.version} (CPU engine), all {len(encoded)} in flight"] = served
    times: dict[str, list[float]] = {k: [] for k in methods}
    outs: dict[str, list[str]] = {}
    try:
        for rep in range(args.repeats):
            for name, fn in methods.items():
                dt, out = timed(fn)
                times[name].append(dt)
                outs[name] = out
                print(f"repeat {rep + 1}: {name} {dt:.1f} s", file=sys.stderr, flush=True)
    finally:
        if engine is not None:
            engine.stop()
    baseline = next(iter(methods))
    ref = outs[baseline]
    lengths = [len(tok(t, add_special_tokens=False)["input_ids"]) for t in ref]
    new_tokens = sum(lengths)
    base = statistics.median(times[baseline])
    rows, notes = [], []
    vllm_time = next((statistics.median(times[n]) for n in methods if n.startswith("vLLM")), None)
    for name in methods:
        t = statistics.median(times[name])
        differ = [i for i, (a, b) in enumerate(zip(outs[name], ref)) if a != b]
        rows.append(
            [
                name,
                t,
                new_tokens / t,
                base / t,
                *([vllm_time / t] if vllm_time else []),
                f"{len(ref) - len(differ)}/{len(ref)}",
            ]
        )
        for i in differ:
            k = next(
                (j for j, (x, y) in enumerate(zip(outs[name][i], ref[i])) if x != y),
                min(len(ref[i]), len(outs[name][i])),
            )
            notes.append(
                f"{name}: prompt {i} differs from char {k} of {len(ref[i])}: "
                f"{ref[i][max(0, k - 20) : k + 20]!r} vs {outs[name][i][max(0, k - 20) : k + 20]!r}"
            )
    lengths.sort()
    text = (
        f"{len(convs)} prompts ({min(map(len, encoded))}-{max(map(len, encoded))} tokens), greedy, "
        f"max_new_tokens {args.max_new_tokens}; {new_tokens} new tokens in the baseline's replies "
        f"(per reply: min {lengths[0]}, median {lengths[len(lengths) // 2]}, max {lengths[-1]}); "
        f"median of {args.repeats}"
        + (f"; vLLM's engine started in {started:.0f} s (not in its row)" if engine is not None else "")
        + f"\nmachine: {machine()}\n\n"
        + table(
            [
                "method",
                "seconds",
                "new tokens/s",
                f"x {baseline}",
                *(["x vLLM"] if vllm_time else []),
                "identical to the first row",
            ],
            rows,
        )
    )
    if notes:
        text += "\n\n" + "\n".join(notes)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
