"""vLLM engine start-up against the work of one CW-POR word limit: what one engine per model saves.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/vllm_startup.py [--starts 3] [--prompts 40] [--max-new-tokens 61]

The engine is `generation_backend: vllm`'s (models/serving.py `VLLMServer`, config/vllm.yaml's settings: the
embedded model in fp32, enforce_eager, 1 GiB of key/value cache), started `--starts` times: each start is
timed from the process's launch to its first answer to /v1/models (import, weights, key/value cache, server),
then stopped. On the last start, one word limit's generations of the default CW-POR run (20 questions x 2
roles at v = 30: 61 new tokens at most, benchmark prompts) are timed too. A word limit per job pays
k x (start + generation) for k word limits, one job per model start + k x generation.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import MODEL_DIR, machine  # noqa: E402
from prompts import generation_messages  # noqa: E402

from debate_audit.models import GenerationParams, LanguageModel  # noqa: E402
from debate_audit.models.serving import VLLMServer  # noqa: E402
from debate_audit.models.spec import VLLMSettings  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--prompts", type=int, default=40)
    parser.add_argument("--max-new-tokens", type=int, default=61)
    parser.add_argument("--python", default=".venv-vllm/bin/python", help="interpreter of vLLM's environment")
    args = parser.parse_args()

    print(machine())
    lm = LanguageModel(MODEL_DIR, batch_size=1, cache=None)
    prompts = [lm._encode(lm.render_chat(c)) for c in generation_messages(args.prompts)]
    settings = VLLMSettings(python=args.python, enforce_eager=True, cpu_kvcache_gb=1, max_model_len=4096)
    starts, generation = [], None
    for i in range(args.starts):
        engine = VLLMServer(MODEL_DIR, name="smollm2-135m", dtype="float32", settings=settings)
        began = time.perf_counter()
        engine.start()
        starts.append(time.perf_counter() - began)
        print(f"start {i + 1}: {starts[-1]:.1f} s", flush=True)
        if i == args.starts - 1:
            done: dict[int, list[list[int]]] = {}
            began = time.perf_counter()
            engine.complete(
                prompts,
                GenerationParams(max_new_tokens=args.max_new_tokens),
                stop_ids=lm._eos_ids(),
                on_finished=done.update,
            )
            generation = time.perf_counter() - began
            tokens = sum(len(ids[0]) for ids in done.values())
            print(f"one word limit: {len(prompts)} prompts, {tokens} new tokens in {generation:.1f} s", flush=True)
        engine.stop()
    start = statistics.median(starts)
    print(f"engine start-up: median {start:.1f} s of {len(starts)} (min {min(starts):.1f}, max {max(starts):.1f})")
    for k in (2, 10):
        apart, together = k * (start + generation), start + k * generation
        print(
            f"{k} word limits: one job each {apart:.0f} s, one job per model {together:.0f} s "
            f"({apart / together:.2f}x; start-ups are {k * start / apart:.0%} of one job each)"
        )


if __name__ == "__main__":
    main()
