"""The one in-process loader (models/weights.py): gpt-oss's MXFP4 checkpoint loads offline as a trainable bf16 /
fp32 model on a node where transformers would otherwise fetch a kernel from the hub; a composite Qwen3.5
checkpoint loads as the causal LM with every weight; either, saved by save_pretrained (as a fine-tuned verifier
is), reloads weight for weight; a missing or unexpected weight fails, named.

The checkpoints are written by the test at a tiny shape in the hub's own format (tools/tiny_checkpoints.py):
gpt-oss's experts as `*_blocks` / `*_scales` MXFP4 tensors under its `quantization_config`, Qwen3.5 as
Qwen3_5ForConditionalGeneration (language model, vision tower) plus an MTP head."""

from __future__ import annotations

import json
import shutil

import huggingface_hub.constants
import pytest
import torch
from helpers import tiny_llama
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaForCausalLM

from debate_audit.models.prepare import write_fingerprint
from debate_audit.models.weights import MXFP4_DEQUANTIZED, IncompleteWeightsError, load_pretrained
from debate_audit.tools.tiny_checkpoints import (
    mxfp4_encode,
    tiny_gpt_oss_config,
    tiny_qwen3_5_config,
    write_mxfp4_gpt_oss,
    write_qwen3_5_composite,
)


@pytest.fixture
def cuda_node_offline(monkeypatch):
    """What a GPU job sees: the hub offline (HF_HUB_OFFLINE=1, as every job runs), `kernels` importable (it is
    in constraints.txt) and a Triton that transformers' MXFP4 path accepts (>= 3.4 on CUDA; the CPU build of
    torch here has none, the one condition faked)."""
    import transformers.quantizers.quantizer_mxfp4 as quantizer

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(quantizer, "is_triton_available", lambda *args, **kwargs: True)


def test_mxfp4_codes_decode_to_what_transformers_dequantizes():
    from transformers.integrations.mxfp4 import convert_moe_packed_tensors

    weight = torch.randn(2, 64, 6) * torch.logspace(-3, 1, 6)  # (experts, in, out), several binades
    blocks, scales, decoded = mxfp4_encode(weight)
    assert blocks.shape == (2, 6, 2, 16) and scales.shape == (2, 6, 2) and blocks.dtype == scales.dtype == torch.uint8
    torch.testing.assert_close(convert_moe_packed_tensors(blocks, scales, dtype=torch.float32), decoded, rtol=0, atol=0)
    # each value is its block's nearest E2M1 code times the block's power of two: off by at most half the widest
    # gap between codes (2, between 4 and 6) times that power
    step = torch.exp2(scales.float() - 127).repeat_interleave(32, dim=-1).transpose(1, 2)
    assert ((decoded - weight).abs() <= step).all()


def test_gpt_oss_mxfp4_loads_offline_trains_its_experts_and_scores(tmp_path, cuda_node_offline, embedded_model_dir):
    model_dir = tmp_path / "gpt-oss"
    config = tiny_gpt_oss_config(vocab_size=len(AutoTokenizer.from_pretrained(embedded_model_dir)))
    expected = write_mxfp4_gpt_oss(model_dir, config)
    stored = load_file(model_dir / "model.safetensors")
    assert stored["model.layers.0.mlp.experts.gate_up_proj_blocks"].dtype == torch.uint8
    assert json.loads((model_dir / "config.json").read_text())["quantization_config"]["quant_method"] == "mxfp4"
    # Before: transformers keeps the experts packed and asks the hub for their kernel, which an offline job
    # cannot reach (transformers#39945, huggingface/kernels#172).
    with pytest.raises(Exception, match="kernels-community/gpt-oss-triton-kernels"):
        AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    # After: dequantized while loading, no kernel, every weight the one stored (the experts decoded exactly).
    model = load_pretrained(model_dir, dtype=torch.float32)
    state = model.state_dict()
    assert set(state) == set(expected)
    for name, weight in expected.items():
        torch.testing.assert_close(state[name], weight, rtol=0, atol=0, msg=name)
    assert not hasattr(model.config, "quantization_config")  # a fine-tuned copy saves plain weights
    # Trainable: one step's gradient reaches every layer's experts (and its router and sinks).
    model.train()
    ids = torch.randint(0, config.vocab_size, (2, 12))
    model(input_ids=ids, labels=ids).loss.backward()
    for layer in model.model.layers:
        for param in (layer.mlp.experts.gate_up_proj, layer.mlp.experts.down_proj, layer.self_attn.sinks):
            assert param.requires_grad and param.grad is not None and param.grad.abs().sum() > 0
    # And it scores, in-process through LanguageModel, its numbers kept apart from a packed kernel's.
    from debate_audit.models.lm import LanguageModel

    AutoTokenizer.from_pretrained(embedded_model_dir).save_pretrained(model_dir)
    write_fingerprint(model_dir, name="tiny-gpt-oss")
    lm = LanguageModel(model_dir, device="cpu", dtype="float32", cache=None)
    assert lm.cache_namespace.endswith(MXFP4_DEQUANTIZED)
    (scores,) = lm.choice_logprobs(["Question: is the sky blue? Answer:"], [" A", " B"])
    assert all(torch.isfinite(torch.tensor(scores)))


def test_qwen3_5_composite_checkpoint_loads_as_the_causal_lm_with_every_weight(tmp_path):
    expected = write_qwen3_5_composite(tmp_path, tiny_qwen3_5_config())
    stored = load_file(tmp_path / "model.safetensors")
    assert any(k.startswith("model.visual.") for k in stored) and any(k.startswith("mtp.") for k in stored)
    model = load_pretrained(tmp_path, dtype=torch.float32)  # raises on any missing or unexpected key
    assert type(model).__name__ == "Qwen3_5ForCausalLM"
    state = model.state_dict()
    assert set(state) == set(expected)  # the language model whole; the vision tower and MTP head left out
    name = "model.layers.0.linear_attn.in_proj_qkv.weight"
    assert name in expected and expected[name].abs().sum() > 0
    torch.testing.assert_close(state[name], expected[name], rtol=0, atol=0)
    for key, weight in expected.items():
        torch.testing.assert_close(state[key], weight, rtol=0, atol=0, msg=key)


# What a fine-tuned verifier's checkpoint goes through: the base loaded from the hub's format, saved by
# save_pretrained as plain weights, read back by the loader the audit uses.
HUB_FORMATS = {
    "gpt_oss-mxfp4": lambda out: write_mxfp4_gpt_oss(out, tiny_gpt_oss_config()),
    "qwen3_5-composite": lambda out: write_qwen3_5_composite(out, tiny_qwen3_5_config()),
}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("hub_format", sorted(HUB_FORMATS))
def test_a_hub_format_checkpoint_saved_and_reloaded_keeps_every_weight(tmp_path, hub_format, dtype):
    expected = HUB_FORMATS[hub_format](tmp_path / "hub")
    loaded = load_pretrained(tmp_path / "hub", dtype=dtype)
    loaded.save_pretrained(tmp_path / "saved")
    # plain weights, one tensor each: no MXFP4 blocks or quantization_config, no vision tower or MTP head
    # (transformers writes Qwen3.5's language model back under the composite's `model.language_model.`)
    saved = load_file(tmp_path / "saved/model.safetensors")
    assert len(saved) == len(expected)
    assert not [k for k in saved if k.endswith(("_blocks", "_scales")) or k.startswith(("model.visual.", "mtp."))]
    assert "quantization_config" not in json.loads((tmp_path / "saved/config.json").read_text())
    reloaded = load_pretrained(tmp_path / "saved", dtype=dtype)
    assert type(reloaded) is type(loaded)
    state, again = loaded.state_dict(), reloaded.state_dict()
    assert set(again) == set(state) == set(expected)
    # exact in bf16 too: the decoded MXFP4 values (an E2M1 code times a power of two) and the stored bf16
    # weights are all bf16 numbers
    for name, weight in expected.items():
        assert again[name].dtype == dtype, name
        torch.testing.assert_close(again[name], state[name], rtol=0, atol=0, msg=name)
        torch.testing.assert_close(again[name].float(), weight, rtol=0, atol=0, msg=name)


def _tiny_llama(directory):
    model = tiny_llama(
        vocab_size=64,
        hidden_size=16,
        intermediate_size=32,
        num_attention_heads=2,
        num_key_value_heads=2,
        max_position_embeddings=2048,  # LlamaConfig's default
        tie_word_embeddings=False,
    )
    model.save_pretrained(directory)
    return directory / "model.safetensors"


def test_a_missing_or_an_unexpected_weight_fails_the_load_naming_it(tmp_path):
    files = _tiny_llama(tmp_path)
    weights = load_file(files)
    missing = dict(weights)
    del missing["model.layers.1.mlp.down_proj.weight"]
    save_file(missing, str(files), metadata={"format": "pt"})
    with pytest.raises(IncompleteWeightsError, match=r"missing .*model\.layers\.1\.mlp\.down_proj\.weight"):
        load_pretrained(tmp_path, dtype=torch.float32)
    save_file({**weights, "model.layers.7.extra.weight": torch.zeros(2)}, str(files), metadata={"format": "pt"})
    with pytest.raises(IncompleteWeightsError, match=r"unexpected .*model\.layers\.7\.extra\.weight"):
        load_pretrained(tmp_path, dtype=torch.float32)
    save_file(weights, str(files), metadata={"format": "pt"})
    load_pretrained(tmp_path, dtype=torch.float32)


def test_a_lora_adapter_missing_a_weight_fails_naming_it(tmp_path):
    from peft import LoraConfig, get_peft_model

    from debate_audit.models.adapter import load_merged

    base = tmp_path / "base"
    _tiny_llama(base)
    adapter = tmp_path / "adapter"
    peft_model = get_peft_model(
        LlamaForCausalLM.from_pretrained(base),
        LoraConfig(r=2, lora_alpha=4, target_modules=["q_proj", "v_proj"], task_type="CAUSAL_LM"),
    )
    peft_model.save_pretrained(adapter)
    load_merged(adapter, base, dtype=torch.float32)
    weights = load_file(adapter / "adapter_model.safetensors")
    lost = next(k for k in weights if "layers.1" in k and "lora_B" in k)
    save_file({k: v for k, v in weights.items() if k != lost}, str(adapter / "adapter_model.safetensors"))
    with pytest.raises(IncompleteWeightsError, match="LoRA adapter.*missing"):
        load_merged(adapter, base, dtype=torch.float32)
    shutil.rmtree(adapter)
