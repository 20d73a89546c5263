"""What the CPU numerics checks of `models/cpu_numerics.py` find and cost on this machine (issue 27).

1. The row padding the start-up probe picks for the embedded model's weight shapes under MKL's code paths
   (`MKL_CBWR` values; the strict ones stand in for CPUs whose products depend on the row count), and how
   long the probe takes (one fresh process each).
2. What the padding costs: `choice_logprobs` on the benchmark prompts and greedy `generate`, unpadded vs
   padded to 8 rows (multiple 8, as `COMPATIBLE,STRICT` needs), in one process, interleaved, under this
   machine's default MKL mode; and whether the scores stay within 1e-5 (they are other bits, not other
   numbers).
3. How often a fresh multi-threaded process computes its first vector-math call (cos on a rotary-sized
   tensor after other threaded work) inaccurately, with and without the warm-up.

    .venv/bin/python benchmarks/cpu_numerics.py [--processes 60] [--prompts 32]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "resources" / "models" / "smollm2-135m"

_PROBE = textwrap.dedent("""
    import json, time
    from debate_audit.models import cpu_numerics
    from transformers import AutoConfig
    shapes = [(192, 576), (576, 576), (1536, 576), (576, 1536), (49152, 576)]  # SmolLM2-135M's linear layers
    t = time.perf_counter()
    padding = cpu_numerics.probe_row_padding(shapes)
    print(json.dumps({"padding": str(padding), "seconds": time.perf_counter() - t}))
""")

_FIRST_CALL = textwrap.dedent("""
    import sys, torch
    import debate_audit.models
    from debate_audit.models import cpu_numerics
    g = torch.Generator().manual_seed(0)
    torch.nn.functional.linear(torch.randn(64, 576, generator=g), torch.randn(1536, 576, generator=g))
    if sys.argv[1] == "warm":
        cpu_numerics.warm_up_vector_math()
    x = (torch.arange(91)[:, None].float() * (1.0 / 100000.0 ** (torch.arange(0, 64, 2).float() / 64))).repeat(1, 2)
    print((x.cos().double() - x.double().cos()).abs().max().item())
""")


def probe_table() -> list[str]:
    rows = ["| MKL_CBWR | padding found | probe s |", "| --- | --- | ---: |"]
    for mode in ("AUTO,STRICT", "AVX2,STRICT", "SSE4_2,STRICT", "COMPATIBLE,STRICT", "AUTO"):
        out = (
            subprocess.run(
                [sys.executable, "-c", _PROBE],
                env=dict(os.environ, MKL_CBWR=mode),
                capture_output=True,
                text=True,
                check=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        found = json.loads(out)
        rows.append(f"| `{mode}` | {found['padding']} | {found['seconds']:.2f} |")
    return rows


def padding_cost(prompts: int, repeats: int = 3) -> list[str]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import torch
    from prompts import generation_messages, scoring_prompts  # benchmarks/prompts.py

    from debate_audit.models import GenerationParams, LanguageModel
    from debate_audit.models.cpu_numerics import RowPadding, pad_linear_rows
    from debate_audit.models.decoding import register_attention

    plain = LanguageModel(MODEL, batch_size=8, cache=None)
    texts = scoring_prompts(plain, prompts)
    padded_model = (
        type(plain.model)
        .from_pretrained(MODEL, dtype=torch.float32, attn_implementation=register_attention(pad_queries=True))
        .eval()
    )
    pad_linear_rows(padded_model, RowPadding(8, 8))
    padded = LanguageModel(MODEL, batch_size=8, cache=None, model=padded_model, tokenizer=plain.tokenizer)
    convs = generation_messages(8)
    params = GenerationParams(max_new_tokens=48)
    times: dict[str, list[float]] = {"score plain": [], "score padded": [], "generate plain": [], "generate padded": []}
    results = {}
    for _ in range(repeats):
        for name, lm in (("plain", plain), ("padded", padded)):
            lm.prefix_store.clear()
            t = time.process_time()
            results[name] = lm.choice_logprobs(texts, [" A", " B"])
            times[f"score {name}"].append(time.process_time() - t)
            t = time.process_time()
            lm.generate(convs, params)
            times[f"generate {name}"].append(time.process_time() - t)
    diff = max(abs(a - b) for x, y in zip(results["plain"], results["padded"]) for a, b in zip(x, y))
    med = {k: statistics.median(v) for k, v in times.items()}
    return [
        "| operation | plain CPU s | padded to 8 rows CPU s | padded / plain |",
        "| --- | ---: | ---: | ---: |",
        *(
            f"| {op} | {med[f'{op} plain']:.2f} | {med[f'{op} padded']:.2f} | {med[f'{op} padded'] / med[f'{op} plain']:.2f} |"
            for op in ("score", "generate")
        ),
        f"\n{len(texts)} prompts, 8 greedy generations of up to 48 tokens, medians of {repeats}; largest score difference "
        f"padded vs plain: {diff:.1e}",
    ]


def first_call_rates(processes: int) -> list[str]:
    rows = ["| warm-up | processes | first cos call off by > 1e-6 |", "| --- | ---: | ---: |"]
    for mode in ("cold", "warm"):
        bad = 0
        for _ in range(processes):
            out = subprocess.run(
                [sys.executable, "-c", _FIRST_CALL, mode],
                env=dict(os.environ, OMP_NUM_THREADS="2"),
                capture_output=True,
                text=True,
                check=True,
            ).stdout
            bad += float(out.strip().splitlines()[-1]) > 1e-6
        rows.append(f"| {mode} | {processes} | {bad} |")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--processes", type=int, default=60)
    ap.add_argument("--prompts", type=int, default=32)
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()[0]:.1f}\n")
    print("\n".join(probe_table()), end="\n\n")
    print("\n".join(padding_cost(args.prompts)), end="\n\n")
    print("\n".join(first_call_rates(args.processes)))
    print(f"\nload average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
