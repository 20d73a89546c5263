"""One fine-tuning step of the embedded model: L_lm and L_fc packed into one forward pass against the two
passes (eraudit/verifier/losses.py, `pack`), on rows shaped as the default run's (a prompt of `--prompt`
tokens, an adjudication target of `--target` tokens, the q_m readout sharing the prompt and ending in its
own answer slot). Prints seconds per step of each and their ratio, and the largest loss difference; then
the AdamW update alone, PyTorch's default implementation (on a CPU a loop over the parameters) against its
fused one (finetune.train uses fused), from the same weights on the same rows, and the largest weight
difference after the steps.

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_finetune_step.py --steps 4
"""

from __future__ import annotations

import argparse
import random
import time

import torch
from common import MODEL_DIR, machine
from transformers import AutoModelForCausalLM

from debate_audit.eraudit.verifier.losses import verifier_losses
from debate_audit.eraudit.verifier.training_rows import IGNORE, ChoiceExample, TrainExample

LABEL_IDS, PAD = [330, 389], 2  # " A", " B" of SmolLM2's tokenizer; its padding id
WEIGHTS = {"lm": 1.0, "fc": 2.0, "qh": 10.0}


def row(rng: random.Random, prompt: int, target: int) -> TrainExample:
    ids = [rng.randrange(100, 40000) for _ in range(prompt)]
    answer = [rng.randrange(100, 40000) for _ in range(target)]
    readout = ChoiceExample(ids[:-1] + [rng.randrange(100, 40000) for _ in range(3)], rng.randrange(2))
    return TrainExample(0, ids + answer, [IGNORE] * prompt + answer, [readout])


def optimizer_steps(model, initial: dict, batches, fused: bool) -> tuple[list[float], dict]:
    """Seconds of each AdamW update (PyTorch's default or fused) after a packed forward and backward pass from
    the weights `initial`, the first (which allocates the moments) untimed, and the weights after the last."""
    model.load_state_dict(initial)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=1e-5, weight_decay=0.0, fused=fused)
    times = []
    for batch in batches:
        verifier_losses(model, batch, LABEL_IDS, WEIGHTS, PAD, pack=True)["total"].backward()
        started = time.perf_counter()
        optimizer.step()
        times.append(time.perf_counter() - started)
        optimizer.zero_grad(set_to_none=True)
    return times[1:], {name: p.detach().clone() for name, p in model.named_parameters()}


def step(model, optimizer, batch, pack: bool) -> tuple[float, float]:
    started = time.perf_counter()
    terms = verifier_losses(model, batch, LABEL_IDS, WEIGHTS, PAD, pack=pack)
    terms["total"].backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - started, terms["total"].item()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--prompt", type=int, default=230)
    parser.add_argument("--target", type=int, default=64)
    args = parser.parse_args()
    print(machine())
    rng = random.Random(0)
    batches = [[row(rng, args.prompt, args.target)] for _ in range(args.steps)]
    times, losses = {}, {}
    for pack in (False, True):  # the same starting weights and rows for both
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, dtype=torch.float32)
        model.train()
        optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5, weight_decay=0.0)
        step(model, optimizer, batches[0], pack)  # warm-up, not timed
        runs = [step(model, optimizer, batch, pack) for batch in batches[1:]]
        times[pack], losses[pack] = [t for t, _ in runs], [loss for _, loss in runs]
    two, one = sum(times[False]) / len(times[False]), sum(times[True]) / len(times[True])
    print(f"two passes: {two:.2f} s/step   one packed pass: {one:.2f} s/step   ratio {two / one:.2f}x")
    print(
        "largest relative loss difference over the steps:",
        max(abs(a - b) / abs(a) for a, b in zip(losses[False], losses[True])),
    )
    model = AutoModelForCausalLM.from_pretrained(MODEL_DIR, dtype=torch.float32)
    model.train()
    initial = {name: tensor.clone() for name, tensor in model.state_dict().items()}
    (default, w_default), (fused, w_fused) = (optimizer_steps(model, initial, batches, f) for f in (False, True))
    a, b = sum(default) / len(default), sum(fused) / len(fused)
    print(
        f"AdamW update: default {a:.3f} s/step   fused {b:.3f} s/step   ratio {a / b:.2f}x   largest weight "
        f"difference after {len(batches)} steps {max((w_default[n] - w_fused[n]).abs().max().item() for n in w_fused):.1e}"
    )


if __name__ == "__main__":
    main()
