"""GPU benchmark (H100/H200): scoring and batched greedy generation in bf16, one process.

    python benchmarks/gpu_bench.py [--model-dir resources/models/smollm2-135m] [--shapes 135m 8b] [--out DIR]

Needs only the tokenizer, config and fingerprint of a model directory: when the weights are absent (or
with --random-weights) each shape is built with random bf16 weights, which times the same kernels (greedy
text is then meaningless, and never stops at EOS, so every row runs to max_new_tokens). Shapes: `135m` is
the directory's own config (SmolLM2-135M), `8b` a Llama-3.1-8B-shaped config (the paper models' scale).

Scoring rows (same judge/verifier prompts as bench_scoring.py): naive (two passes per prompt, batch 1,
full logits; timed on the first --naive-prompts prompts and reported per prompt), the lead's first batch
plan (8 prompts per batch, length-sorted), and choice_logprobs with batch_size="auto" (probed token
budget, prefix KV reuse). FLOP rate against a measured bf16 8192^3 torch.matmul.
Generation rows: per-prompt greedy (first --single-prompts prompts; transformers `generate` and ours),
batched greedy (all prompts; transformers `generate` on left-padded batches and ours) and seeded sampling.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import MODEL_DIR, gemm_peak, machine, model_flops, table, timed  # noqa: E402
from prompts import generation_messages, scoring_prompts  # noqa: E402

from debate_audit.models import GenerationParams, LanguageModel  # noqa: E402
from debate_audit.models.decoding import left_pad  # noqa: E402
from debate_audit.models.size import DENSE_WIDTHS, known_widths  # noqa: E402

LABELS = [" A", " B"]
# Llama-3.1-8B-Instruct at the widths `make plan` prices
EIGHT_B = known_widths("meta-llama/Llama-3.1-8B-Instruct", DENSE_WIDTHS)


def build(model_dir: Path, shape: str, random_weights: bool, device: str):
    from transformers import AutoConfig, AutoModelForCausalLM

    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    if shape == "135m" and not random_weights and (model_dir / "model.safetensors").exists():
        return AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype, attn_implementation="sdpa").to(
            device
        ), False
    config = AutoConfig.from_pretrained(model_dir)
    if shape == "8b":
        for key, value in EIGHT_B.items():
            setattr(config, key, value)
    elif shape == "tiny":  # CPU smoke test of this script
        config.num_hidden_layers = 2
    config._attn_implementation = "sdpa"
    with torch.device(device):
        torch.set_default_dtype(dtype)
        model = AutoModelForCausalLM.from_config(config, attn_implementation="sdpa")
        torch.set_default_dtype(torch.float32)
    return model.to(dtype).eval(), True


@torch.inference_mode()
def naive(lm: LanguageModel, encoded: list[list[int]], label_ids: list[int]) -> list[list[float]]:
    out = []
    for seq in encoded:
        row = []
        for lab in label_ids:
            logits = lm.model(input_ids=torch.tensor([seq + [lab]], device=lm.device)).logits
            row.append(torch.log_softmax(logits[0, -2].float(), -1)[lab].item())
        out.append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-dir", default=MODEL_DIR)
    parser.add_argument("--shapes", nargs="+", default=["135m", "8b"])
    parser.add_argument("--random-weights", action="store_true")
    parser.add_argument("--prompts", type=int, default=512)
    parser.add_argument("--naive-prompts", type=int, default=32)
    parser.add_argument("--gen-prompts", type=int, default=64)
    parser.add_argument("--single-prompts", type=int, default=4)
    parser.add_argument("--max-new-tokens", type=int, default=128)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--skip-scoring", action="store_true", help="generation rows only")
    parser.add_argument("--out", default=os.environ.get("OUT"))
    args = parser.parse_args()
    model_dir = Path(args.model_dir)
    device = args.device
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    peak = gemm_peak(
        8192 if device == "cuda" else 1024, device=device, dtype=torch.bfloat16 if device == "cuda" else torch.float32
    )
    lines = [
        f"machine: {machine()}",
        f"GEMM peak ({'bf16 8192^3' if device == 'cuda' else 'fp32 1024^3'}): {peak / 1e12:.1f} TFLOP/s",
        "",
    ]
    for shape in args.shapes:
        model, random = build(model_dir, shape, args.random_weights, device)
        lm = LanguageModel(model_dir, device=device, batch_size="auto", cache=None, model=model)
        fixed = LanguageModel(
            model_dir,
            device=device,
            batch_size=8,
            cache=None,
            model=model,
            tokenizer=lm.tokenizer,
            prefix_sharing=False,
        )
        if not args.skip_scoring:
            prompts = scoring_prompts(lm, args.prompts)
            encoded = [lm._encode(p) for p in prompts]
            label_ids = lm.label_token_ids(LABELS)
            useful = model_flops(model.config, [p for s in encoded for p in range(len(s))], len(prompts))
            lm.choice_logprobs(prompts[:8], LABELS)  # warm-up (and the batch probe)
            fixed.choice_logprobs(prompts[:8], LABELS)
            k = min(args.naive_prompts, len(prompts))
            naive(lm, encoded[:2], label_ids)
            t_naive, ref = timed(lambda: naive(lm, encoded[:k], label_ids))
            t_naive *= len(prompts) / k
            rows, res = [], {}
            t_fixed, res["fixed"] = timed(lambda: fixed.choice_logprobs(prompts, LABELS, desc="batch 8"))
            t_auto = []
            for _ in range(3):
                t, res["auto"] = timed(lambda: lm.choice_logprobs(prompts, LABELS, desc="auto"))
                t_auto.append(t)
            t_ours = statistics.median(t_auto)
            for name, t, key in [
                (f"naive (extrapolated from {k})", t_naive, None),
                ("batch 8, length-sorted", t_fixed, "fixed"),
                (f"choice_logprobs auto ({lm._token_budget} tokens/batch)", t_ours, "auto"),
            ]:
                diff = (
                    "-"
                    if key is None
                    else f"{max(abs(math.exp(a) - math.exp(b)) for r, s in zip(res[key][:k], ref) for a, b in zip(r, s)):.1e}"
                )
                rows.append(
                    [name, t, len(prompts) / t, t_naive / t, useful / t / 1e12, f"{100 * useful / t / peak:.0f}%", diff]
                )
            lines += [
                f"## {shape} ({'random' if random else 'real'} bf16 weights), scoring {len(prompts)} prompts, "
                f"{sum(map(len, encoded))} tokens",
                "",
                table(
                    [
                        "method",
                        "seconds",
                        "prompts/s",
                        "x naive",
                        "TFLOP/s (all tokens)",
                        "of GEMM peak",
                        "max |dp| vs naive",
                    ],
                    rows,
                ),
                "",
            ]
        convs = generation_messages(args.gen_prompts)
        params = GenerationParams(max_new_tokens=args.max_new_tokens)
        single = LanguageModel(model_dir, device=device, batch_size=1, cache=None, model=model, tokenizer=lm.tokenizer)
        eos = lm._eos_ids()
        hf_kwargs = dict(
            max_new_tokens=args.max_new_tokens,
            do_sample=False,
            temperature=None,
            top_p=None,
            top_k=None,
            eos_token_id=eos,
            pad_token_id=lm.tokenizer.pad_token_id,
        )
        encoded_convs = [lm._encode(lm.render_chat(c)) for c in convs]

        def texts(rows, width):
            return [
                [lm.tokenizer.decode([t for t in r[width:].tolist() if t not in eos], skip_special_tokens=True).strip()]
                for r in rows
            ]

        @torch.inference_mode()
        def hf_generate(seqs, size):
            out = []
            for start in range(0, len(seqs), size):
                ids, mask = left_pad(seqs[start : start + size], lm.tokenizer.pad_token_id, device)
                out += texts(model.generate(input_ids=ids, attention_mask=mask, **hf_kwargs), ids.shape[1])
            return out

        hf_generate(encoded_convs[:1], 1)  # warm-up
        single.generate(convs[:1], GenerationParams(max_new_tokens=4))
        s = min(args.single_prompts, len(convs))
        t_hf1, out_hf1 = timed(lambda: hf_generate(encoded_convs[:s], 1))
        t_single, out_single = timed(lambda: single.generate(convs[:s], params, desc="per-prompt"))
        t_hfb, out_hfb = timed(lambda: hf_generate(encoded_convs, lm.batch_size))
        t_batch, out_batch = timed(lambda: lm.generate(convs, params, desc="batched"))
        sampled = GenerationParams(
            max_new_tokens=args.max_new_tokens, do_sample=True, temperature=0.8, top_p=0.95, num_samples=4, seed=1
        )
        t_sample, out_sample = timed(lambda: lm.generate(convs, sampled, desc="sampled"))
        tok = lambda outs: sum(len(lm._encode(t)) for o in outs for t in o)  # noqa: E731
        same = lambda outs: f"{sum(a == b for a, b in zip(out_hf1, outs[:s]))}/{s}"  # noqa: E731
        base = tok(out_hf1) / t_hf1
        gen_rows = [
            ["per-prompt transformers generate", s, t_hf1, base, 1.0, "-"],
            [
                "per-prompt LanguageModel.generate",
                s,
                t_single,
                tok(out_single) / t_single,
                tok(out_single) / t_single / base,
                same(out_single),
            ],
            [
                f"transformers generate, batch {lm.batch_size}",
                len(convs),
                t_hfb,
                tok(out_hfb) / t_hfb,
                tok(out_hfb) / t_hfb / base,
                same(out_hfb),
            ],
            [
                f"LanguageModel.generate, batch {lm.batch_size} (ours)",
                len(convs),
                t_batch,
                tok(out_batch) / t_batch,
                tok(out_batch) / t_batch / base,
                same(out_batch),
            ],
            [
                f"ours, sampled x4 per prompt ({len(convs) * 4} rows)",
                len(convs),
                t_sample,
                tok(out_sample) / t_sample,
                tok(out_sample) / t_sample / base,
                "-",
            ],
        ]
        lines += [
            f"### {shape} generation: greedy, max_new_tokens {args.max_new_tokens}",
            "",
            table(
                ["method", "prompts", "seconds", "new tokens/s", "x per-prompt", "identical to per-prompt"], gen_rows
            ),
            "",
        ]
        print("\n".join(lines[-12:]), flush=True)
        lm = fixed = single = model = None  # free the weights before the next shape
        if device == "cuda":
            torch.cuda.empty_cache()
    text = "\n".join(lines)
    print("\n\n" + text)
    if args.out:
        Path(args.out, "gpu_bench.md").write_text(text + "\n")


if __name__ == "__main__":
    main()
