import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from debate_audit.eraudit.finetune import FinetuneSettings, argument_target, save_verifier, train
from debate_audit.eraudit.losses import IGNORE, encode_example
from debate_audit.eraudit.readout import LABELS, answer_probability
from debate_audit.models import LanguageModel, read_fingerprint

ITEM = {
    "q_m": "Why did Ines wait before reporting the Marigold?",
    "y_true": "She wanted to hear Pim's side first.",
    "y_false": "She feared the deputy collector.",
    "q_h": "What was the Marigold said to be carrying?",
    "h_true": "Quinine for a fever outbreak.",
    "h_false": "Untaxed tobacco.",
}
TRANSCRIPT = ("Question: Why did Ines wait?\nDebater A defends: She wanted to hear Pim's side first.\n"
              "Debater B defends: She feared the deputy collector.\n\nRound 1\nDebater A: "
              + "She trusted Pim and <v_quote>waited for him</v_quote>. " * 40 + "\nDebater B: She was afraid.")


@pytest.fixture(scope="module")
def tokenizer(embedded_model_dir):
    return AutoTokenizer.from_pretrained(embedded_model_dir)


def decode(tokenizer, ids):
    return tokenizer.decode(ids)


def test_encoding_puts_each_answer_at_its_target_label_and_masks_the_prompt(tokenizer):
    ex = encode_example(tokenizer, pair_id=0, transcript=TRANSCRIPT, item=ITEM, true_position="B",
                        target=argument_target("B", ITEM["y_true"], "She trusted Pim."), with_qh=True,
                        max_length=256, max_target_tokens=32, readout="plain")
    fc0, fc1 = (decode(tokenizer, c.ids) for c in ex.fc)
    assert fc0.endswith(f"A. {ITEM['y_true']}\nB. {ITEM['y_false']}\nAnswer:") and ex.fc[0].target == 0
    assert fc1.endswith(f"A. {ITEM['y_false']}\nB. {ITEM['y_true']}\nAnswer:") and ex.fc[1].target == 1
    qh0, qh1 = (decode(tokenizer, c.ids) for c in ex.qh)
    # L_qh pushes towards H_false: H_false sits at the target label in both orders.
    assert qh0.endswith(f"A. {ITEM['h_false']}\nB. {ITEM['h_true']}\nAnswer:") and ex.qh[0].target == 0
    assert qh1.endswith(f"A. {ITEM['h_true']}\nB. {ITEM['h_false']}\nAnswer:") and ex.qh[1].target == 1
    target = [t for t in ex.lm_labels if t != IGNORE]
    assert decode(tokenizer, target).startswith(f" B. {ITEM['y_true']}\nReason: She trusted Pim.")
    assert ex.lm_labels[: len(ex.lm_ids) - len(target)] == [IGNORE] * (len(ex.lm_ids) - len(target))
    # The long transcript was cut to fit, keeping its header and its end.
    assert all(len(c.ids) <= 256 for c in ex.fc + ex.qh) and len(ex.lm_ids) <= 256
    assert "Debater A defends" in fc0 and "She was afraid." in fc0 and "[...]" in fc0


def test_honest_and_adv_encodings_have_no_qh_examples(tokenizer):
    ex = encode_example(tokenizer, pair_id=0, transcript=TRANSCRIPT, item=ITEM, true_position="A",
                        target=argument_target("A", ITEM["y_true"], "x"), with_qh=False, max_length=256,
                        max_target_tokens=32)
    assert ex.qh == []


@pytest.fixture
def tiny_base(tokenizer, tmp_path):
    """A tiny randomly initialised Llama with the embedded model's tokenizer, saved like a prepared model."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from debate_audit.models import write_fingerprint

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=512,
                         tie_word_embeddings=True)
    out = tmp_path / "base"
    LlamaForCausalLM(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_fingerprint(out, name="tiny-base")
    return out


@pytest.mark.slow
def test_checkpoint_reloads_to_the_same_scores(tiny_base, tokenizer, tmp_path):
    embedded_model_dir = tiny_base
    model = AutoModelForCausalLM.from_pretrained(embedded_model_dir, dtype=torch.float32)
    label_ids = [tokenizer(label, add_special_tokens=False)["input_ids"][0] for label in LABELS]
    ex = encode_example(tokenizer, pair_id=0, transcript=TRANSCRIPT, item=ITEM, true_position="A",
                        target=argument_target("A", ITEM["y_true"], "She trusted Pim."), with_qh=True,
                        max_length=160, max_target_tokens=16)
    settings = FinetuneSettings(epochs=1, max_steps=1, learning_rate=1e-2, batch_size=1, grad_accum=1)
    train(model, [ex], settings, label_ids, tokenizer.pad_token_id or tokenizer.eos_token_id)
    questions, answers, others = [ITEM["q_m"], ITEM["q_h"]], [ITEM["y_true"], ITEM["h_true"]], [ITEM["y_false"], ITEM["h_false"]]
    in_memory = answer_probability(LanguageModel(embedded_model_dir, model=model, tokenizer=tokenizer, cache=None),
                                   questions, answers, others)
    out = tmp_path / "org"
    record = save_verifier(model, tokenizer, out, name="verifier-test-org", dataset="test", variant="org")
    reloaded = answer_probability(LanguageModel(out, cache=None), questions, answers, others)
    assert reloaded == pytest.approx(in_memory, abs=1e-5)
    base = answer_probability(LanguageModel(embedded_model_dir, cache=None), questions, answers, others)
    assert max(abs(a - b) for a, b in zip(reloaded, base)) > 1e-6  # the step changed the verifier
    assert record["weights_sha256"] != read_fingerprint(embedded_model_dir)["weights_sha256"]
    assert read_fingerprint(out)["variant"] == "org"


@pytest.mark.slow
def test_lora_adapter_checkpoint_scores_as_the_merged_one_and_travels_with_its_base(tiny_base, tokenizer, tmp_path):
    pytest.importorskip("peft")
    import shutil

    from debate_audit.eraudit.finetune import _apply_lora
    from debate_audit.models import write_fingerprint
    from debate_audit.models.adapter import is_adapter

    lora = {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    model = _apply_lora(AutoModelForCausalLM.from_pretrained(tiny_base, dtype=torch.float32), lora)
    label_ids = [tokenizer(label, add_special_tokens=False)["input_ids"][0] for label in LABELS]
    ex = encode_example(tokenizer, pair_id=0, transcript=TRANSCRIPT, item=ITEM, true_position="A",
                        target=argument_target("A", ITEM["y_true"], "She trusted Pim."), with_qh=True,
                        max_length=160, max_target_tokens=16)
    settings = FinetuneSettings(epochs=1, max_steps=2, learning_rate=5e-2, batch_size=1, grad_accum=1, lora=lora)
    train(model, [ex], settings, label_ids, tokenizer.pad_token_id or tokenizer.eos_token_id)
    base_sha = read_fingerprint(tiny_base)["weights_sha256"]
    adapter = tmp_path / "verifiers" / "org"
    save_verifier(model, tokenizer, adapter, adapter_of=tiny_base, base_weights_sha256=base_sha)
    merged = tmp_path / "merged"
    save_verifier(model.merge_and_unload(), tokenizer, merged, base_weights_sha256=base_sha)
    assert is_adapter(adapter) and not is_adapter(merged)
    assert read_fingerprint(adapter)["checkpoint"] == "lora-adapter" and read_fingerprint(merged)["checkpoint"] == "full"
    size = sum(f.stat().st_size for f in adapter.glob("*.safetensors"))
    assert size < sum(f.stat().st_size for f in merged.glob("*.safetensors")) / 5
    questions, answers, others = [ITEM["q_m"], ITEM["q_h"]], [ITEM["y_true"], ITEM["h_true"]], [ITEM["y_false"], ITEM["h_false"]]
    from_merged = answer_probability(LanguageModel(merged, cache=None), questions, answers, others)
    from_adapter = answer_probability(LanguageModel(adapter, cache=None), questions, answers, others)
    assert from_adapter == pytest.approx(from_merged, abs=1e-6)
    base = answer_probability(LanguageModel(tiny_base, cache=None), questions, answers, others)
    assert max(abs(a - b) for a, b in zip(from_adapter, base)) > 1e-6  # the adapter is applied

    # The adapter names its base relative to itself: moving both keeps it loadable.
    moved = tmp_path / "moved"
    shutil.copytree(tiny_base, moved / "base")
    shutil.copytree(adapter, moved / "verifiers" / "org")
    assert answer_probability(LanguageModel(moved / "verifiers" / "org", cache=None), questions, answers,
                              others) == pytest.approx(from_adapter, abs=1e-6)
    # A base that changed under the adapter is an error naming the adapter, not a silently different verifier.
    torch.manual_seed(1)
    AutoModelForCausalLM.from_config(AutoModelForCausalLM.from_pretrained(tiny_base).config).save_pretrained(moved / "base")
    write_fingerprint(moved / "base", name="tiny-base")
    with pytest.raises(ValueError, match=r"verifiers/org: LoRA adapter trained on base weights .* retrain the verifier"):
        LanguageModel(moved / "verifiers" / "org", cache=None)
