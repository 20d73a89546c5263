"""Tiny fine-tunes whose measured memory peak test_training_memory.py holds against the planned figure, in one
process and, through torchrun, in two (`python training_memory_cases.py OUT`: each rank saves its results).

Each case is shaped so that some terms of memory.TrainingMemory are each larger than the room between the
planned figure and the peak: dropping such a term would plan less than the run holds."""

from __future__ import annotations

import dataclasses
import sys

import torch

from debate_audit.models.memory import TrainingSetup

LLAMA = dict(num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False)
CASES: dict[str, tuple[str, dict, TrainingSetup]] = {
    # a large vocabulary and many L_lm targets: the peak at the backward's start (logits, fp32 loss), and the
    # root unit (embeddings and head) large
    "head": (
        "llama",
        dict(LLAMA, hidden_size=64, intermediate_size=128, head_dim=16, vocab_size=8192, num_hidden_layers=2),
        TrainingSetup(max_length=256, max_target_tokens=128),
    ),
    # gpt-oss with checkpointing at 512 tokens: its eager attention's scores dominate a layer's backward, and
    # its two additive masks a pass are kept with the checkpointed layers
    "eager": (
        "gpt_oss",
        dict(
            hidden_size=64,
            intermediate_size=64,
            num_attention_heads=4,
            num_key_value_heads=2,
            head_dim=16,
            vocab_size=1024,
            num_local_experts=4,
            num_experts_per_tok=2,
            num_hidden_layers=2,
            sliding_window=16,
            tie_word_embeddings=False,
        ),
        TrainingSetup(gradient_checkpointing=True, max_length=512, max_target_tokens=16, grad_accum=2),
    ),
    # wide layers, short rows: the gathered layers, their gradients and reduce-scatter buffers
    "layers": (
        "llama",
        dict(LLAMA, hidden_size=128, intermediate_size=2048, head_dim=32, vocab_size=512, num_hidden_layers=2),
        TrainingSetup(gradient_checkpointing=True, max_length=64, max_target_tokens=8, with_qh=False),
    ),
    # Qwen3.5's linear-attention layers (transformers' torch implementation) keep their activations
    "linear": (
        "qwen3_5_text",
        dict(
            LLAMA,
            hidden_size=64,
            intermediate_size=96,
            head_dim=16,
            vocab_size=1024,
            num_hidden_layers=4,
            linear_num_key_heads=2,
            linear_num_value_heads=4,
            linear_key_head_dim=16,
            linear_value_head_dim=16,
        ),
        TrainingSetup(max_length=256, max_target_tokens=32, grad_accum=2),
    ),
}


def measure(name: str, rank, processes: int = 1):
    """The Measured peak of case `name` in this process of a group of `processes`."""
    from transformers import AutoConfig, AutoModelForCausalLM

    from debate_audit.tools.training_peak import measure_training

    arch, shape, setup = CASES[name]
    config = AutoConfig.for_model(arch, **shape)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    return measure_training(model, config.to_dict(), dataclasses.replace(setup, processes=processes), "cpu", rank)


def main(out: str, names: list[str]) -> None:
    from debate_audit.eraudit.verifier.distributed import start, stop

    torch.set_num_threads(1)
    rank, _ = start("cpu")
    results = {name: measure(name, rank, rank.world) for name in names}
    torch.save({name: (m.peak, dataclasses.asdict(m.planned)) for name, m in results.items()}, f"{out}.{rank.index}")
    stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
