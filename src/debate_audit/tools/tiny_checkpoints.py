"""Checkpoints in the hub's own file formats at a chosen shape, written without a download: what the tests
and the GPU device check (benchmarks/gpu_device_check.py) load where the real model cannot be fetched.

- `write_mxfp4_gpt_oss`: gpt-oss as openai/gpt-oss-20b ships it: every weight in bf16 except each layer's
  experts, stored as MXFP4 `*_blocks` (two 4-bit E2M1 codes a byte, 32 values a block) and `*_scales` (one
  E8M0 exponent a block, biased by 127) under the hub's tensor names, and the hub's `quantization_config`.
- `write_qwen3_5_composite`: Qwen3.5 as Qwen/Qwen3.5-9B ships it: the multimodal Qwen3_5ForConditionalGeneration
  (language model under `model.language_model.`, vision tower under `model.visual.`) plus an MTP head
  (`mtp.*`) that no transformers class reads.
- `tiny_tokenizer`: a byte-level BPE tokenizer with a chat template, built in memory from a fixed vocabulary
  (nothing downloaded, nothing stored in the repository): what the device check's random models read and write
  where no prepared model is at hand.

Each writer returns the weights a correct loader must produce, to compare against what it loaded.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch

# E2M1 values of the 16 codes (transformers.integrations.mxfp4.FP4_VALUES, the OCP MX format)
FP4_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
MXFP4_BLOCK = 32
# openai/gpt-oss-20b's config.json quantization_config
GPT_OSS_QUANTIZATION = {
    "modules_to_not_convert": [
        "model.layers.*.self_attn",
        "model.layers.*.mlp.router",
        "model.embed_tokens",
        "lm_head",
    ],
    "quant_method": "mxfp4",
}


# ChatML as SmolLM2's chat template writes it (the embedded model's), without its default system message
CHATML_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)
CHATML_SPECIAL = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")


def tiny_tokenizer() -> Any:
    """A byte-level BPE tokenizer (GPT-2's byte alphabet, as SmolLM2's and Llama's) built in memory: ChatML's
    three special tokens, then every byte one token, then a space merged with each capital letter, so that " A"
    and " B" (the answer labels, choice_logprobs's single tokens) are one token each; 285 tokens in all, every
    text encodable and decoded back to itself. A transformers fast tokenizer with ChatML's chat template,
    `<|im_end|>` its end-of-sequence and padding token."""
    import string

    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {token: i for i, token in enumerate((*CHATML_SPECIAL, *sorted(pre_tokenizers.ByteLevel.alphabet())))}
    merges = [("\u0120", letter) for letter in string.ascii_uppercase]  # "\u0120": the byte alphabet's space
    vocab.update({a + b: len(vocab) + i for i, (a, b) in enumerate(merges)})
    backend = Tokenizer(models.BPE(vocab=vocab, merges=merges))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_special_tokens(list(CHATML_SPECIAL))
    return PreTrainedTokenizerFast(
        tokenizer_object=backend,
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
        unk_token="<|endoftext|>",
        chat_template=CHATML_TEMPLATE,
    )


def mxfp4_encode(weight: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(blocks, scales, decoded) of an expert weight in transformers' layout (experts, in, out): blocks
    (experts, out, in / 32, 16) uint8, scales (experts, out, in / 32) uint8 as the hub stores them, and the
    fp32 values they decode to (each block's nearest E2M1 codes times a power of two). Expert by expert, in
    O(size) memory: gpt-oss-20b's widths are 530M values a tensor."""
    blocks, scales, decoded = [], [], []
    for expert in weight.detach():
        rows = expert.float().t()  # the hub stores (out, in)
        out, inner = rows.shape
        if inner % MXFP4_BLOCK:
            raise ValueError(f"MXFP4 blocks of {MXFP4_BLOCK}: input width {inner} is not a multiple")
        values = rows.reshape(out, inner // MXFP4_BLOCK, MXFP4_BLOCK)
        # the smallest exponent whose scaled block fits E2M1's largest magnitude, 6
        top = values.abs().amax(-1).clamp(min=2.0**-126)
        exponent = torch.ceil(torch.log2(top / 6.0)).clamp(-127, 127)
        scaled = values / torch.exp2(exponent)[..., None]
        # the nearest of E2M1's magnitudes (0, 0.5, 1, 1.5, 2, 3, 4, 6): the midpoints between them
        magnitudes = torch.tensor(FP4_VALUES[:8], device=scaled.device)
        midpoints = (magnitudes[1:] + magnitudes[:-1]) / 2
        codes = torch.bucketize(scaled.abs().contiguous(), midpoints).to(torch.uint8)
        codes = torch.where((scaled < 0) & (codes > 0), codes + 8, codes)  # the sign bit; zero stays +0
        blocks.append((codes[..., 0::2] | (codes[..., 1::2] << 4)).contiguous())  # the even element low
        scales.append((exponent + 127).to(torch.uint8))
        signs = torch.where(codes >= 8, -1.0, 1.0)
        decoded.append(
            (signs * magnitudes[(codes % 8).long()] * torch.exp2(exponent)[..., None]).reshape(out, inner).t()
        )
    return torch.stack(blocks), torch.stack(scales), torch.stack(decoded).contiguous()


def tiny_gpt_oss_config(**shape: Any):
    """A gpt-oss config at a small shape (`shape` overrides): mixture-of-experts, attention sinks, sliding-window
    and full-attention layers alternating, as gpt-oss-20b."""
    from transformers import GptOssConfig

    fields = dict(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        num_local_experts=4,
        num_experts_per_tok=2,
        sliding_window=8,
        max_position_embeddings=4096,
        tie_word_embeddings=False,
    )
    return GptOssConfig(**{**fields, **shape})


def write_mxfp4_gpt_oss(
    out_dir: str | Path, config: Any, *, seed: int = 0, device: str = "cpu"
) -> dict[str, torch.Tensor]:
    """A gpt-oss checkpoint of `config` with random weights, its experts in MXFP4 as on the hub; returns every
    weight as a correct loader holds it (experts decoded, the rest as stored, bf16), on the CPU. `device`: where
    the weights are drawn and encoded (a GPU: seconds at gpt-oss-20b's widths)."""
    from safetensors.torch import save_file
    from transformers import GptOssForCausalLM

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(seed)
    with torch.device(device):
        model = GptOssForCausalLM(config).to(torch.bfloat16)
    stored: dict[str, torch.Tensor] = {}
    expected: dict[str, torch.Tensor] = {}
    for name, tensor in model.state_dict().items():
        is_expert = name.endswith(("mlp.experts.gate_up_proj", "mlp.experts.down_proj"))
        if is_expert:
            blocks, scales, decoded = mxfp4_encode(tensor.float() * 3.0)
            stored[f"{name}_blocks"] = blocks.cpu()
            stored[f"{name}_scales"] = scales.cpu()
            expected[name] = decoded.cpu()
        else:
            stored[name] = tensor.contiguous().cpu()
            expected[name] = tensor.float().cpu()
    save_file(stored, str(out_dir / "model.safetensors"), metadata={"format": "pt"})
    fields = config.to_dict()
    fields["quantization_config"] = GPT_OSS_QUANTIZATION
    fields["architectures"] = ["GptOssForCausalLM"]
    fields["dtype"] = "bfloat16"
    (out_dir / "config.json").write_text(json.dumps(fields, indent=2) + "\n")
    return expected


def tiny_qwen3_5_config(**text: Any):
    """A composite Qwen3.5 config (text + vision) at a small shape: three linear-attention layers to one
    full-attention layer, as Qwen3.5-9B."""
    from transformers.models.qwen3_5 import Qwen3_5Config

    text_fields = dict(
        vocab_size=512,
        hidden_size=64,
        intermediate_size=96,
        num_hidden_layers=4,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        linear_num_key_heads=2,
        linear_num_value_heads=4,
        linear_key_head_dim=16,
        linear_value_head_dim=16,
        layer_types=["linear_attention"] * 3 + ["full_attention"],
        tie_word_embeddings=False,
    )
    vision = dict(
        depth=2,
        hidden_size=32,
        intermediate_size=64,
        num_heads=2,
        out_hidden_size=text.get("hidden_size", 64),
        num_position_embeddings=64,
    )
    return Qwen3_5Config(text_config={**text_fields, **text}, vision_config=vision, tie_word_embeddings=False)


def write_qwen3_5_composite(
    out_dir: str | Path, config: Any, *, seed: int = 0, device: str = "cpu"
) -> dict[str, torch.Tensor]:
    """A Qwen3_5ForConditionalGeneration checkpoint of `config` with random bf16 weights and an MTP head
    (`mtp.*`, which the hub checkpoint stores and no transformers class reads); returns the language model's
    weights under the names Qwen3_5ForCausalLM gives them (`model.language_model.X` -> `model.X`)."""
    from safetensors.torch import load_file, save_file
    from transformers.models.qwen3_5 import Qwen3_5ForConditionalGeneration

    out_dir = Path(out_dir)
    torch.manual_seed(seed)
    with torch.device(device):
        model = Qwen3_5ForConditionalGeneration(config).to(torch.bfloat16)
    model.save_pretrained(out_dir, safe_serialization=True)
    del model
    files = sorted(out_dir.glob("*.safetensors"))
    if len(files) != 1:
        raise RuntimeError(f"{out_dir}: expected one safetensors file, found {[f.name for f in files]}")
    stored = load_file(str(files[0]))
    hidden = config.text_config.hidden_size
    stored["mtp.fc.weight"] = torch.randn(hidden, 2 * hidden).to(torch.bfloat16)
    stored["mtp.norm.weight"] = torch.ones(hidden, dtype=torch.bfloat16)
    save_file(stored, str(files[0]), metadata={"format": "pt"})
    return {
        name.replace("model.language_model.", "model.", 1): tensor.float()
        for name, tensor in stored.items()
        if name.startswith("model.language_model.") or name == "lm_head.weight"
    }
