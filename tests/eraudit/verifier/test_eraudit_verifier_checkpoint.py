import math
from functools import partial

import pytest
import torch
from helpers import tiny_llama
from transformers import AutoModelForCausalLM, AutoTokenizer

from debate_audit.eraudit.common.readout import LABELS, answer_probability
from debate_audit.eraudit.verifier.finetune import FinetuneSettings, save_verifier, train
from debate_audit.eraudit.verifier.training_rows import IGNORE, argument_target, encode_example
from debate_audit.models import LanguageModel, read_fingerprint

ITEM = {
    "q_m": "Why did Ines wait before reporting the Marigold?",
    "y_true": "She wanted to hear Pim's side first.",
    "y_false": "She feared the deputy collector.",
    "q_h": "What was the Marigold said to be carrying?",
    "h_true": "Quinine for a fever outbreak.",
    "h_false": "Untaxed tobacco.",
}
TRANSCRIPT = (
    "Question: Why did Ines wait?\nDebater A defends: She wanted to hear Pim's side first.\n"
    "Debater B defends: She feared the deputy collector.\n\nRound 1\nDebater A: "
    + "She trusted Pim and <v_quote>waited for him</v_quote>. " * 40
    + "\nDebater B: She was afraid."
)


@pytest.fixture(scope="module")
def tokenizer(embedded_model_dir):
    return AutoTokenizer.from_pretrained(embedded_model_dir)


def decode(tokenizer, ids):
    return tokenizer.decode(ids)


TARGET = partial(argument_target, y_true=ITEM["y_true"], final_argument="She trusted Pim.")


def test_a_pair_makes_two_rows_one_per_answer_order_each_with_its_lm_and_fc(tokenizer):
    rows = encode_example(
        tokenizer,
        pair_id=0,
        transcript=TRANSCRIPT,
        item=ITEM,
        target=TARGET,
        with_qh=True,
        max_length=256,
        max_target_tokens=32,
        readout="plain",
        qh_order=("B", "A"),
    )
    assert len(rows) == 2
    for row, letter, (a, b) in zip(rows, "AB", [(ITEM["y_true"], ITEM["y_false"]), (ITEM["y_false"], ITEM["y_true"])]):
        (fc,) = row.fc
        assert decode(tokenizer, fc.ids).endswith(f"A. {a}\nB. {b}\nAnswer:") and fc.target == "AB".index(letter)
        target = [t for t in row.lm_labels if t != IGNORE]
        assert decode(tokenizer, target).startswith(f" {letter}. {ITEM['y_true']}\nReason: She trusted Pim.")
        prompt = decode(tokenizer, row.lm_ids[: len(row.lm_ids) - len(target)])
        assert prompt.endswith(f"A. {a}\nB. {b}\nAnswer:")  # L_lm reads the row's own order
        assert row.lm_labels[: len(row.lm_ids) - len(target)] == [IGNORE] * (len(row.lm_ids) - len(target))
    # L_qh pushes towards H_false, one order per row, here B first (the pair's seeded schedule), then A.
    (qh0,), (qh1,) = rows[0].qh, rows[1].qh
    assert (
        decode(tokenizer, qh0.ids).endswith(f"A. {ITEM['h_true']}\nB. {ITEM['h_false']}\nAnswer:") and qh0.target == 1
    )
    assert (
        decode(tokenizer, qh1.ids).endswith(f"A. {ITEM['h_false']}\nB. {ITEM['h_true']}\nAnswer:") and qh1.target == 0
    )
    # The long transcript was cut to fit, keeping its header and its end.
    fc0 = decode(tokenizer, rows[0].fc[0].ids)
    assert all(len(c.ids) <= 256 for r in rows for c in r.fc + r.qh) and all(len(r.lm_ids) <= 256 for r in rows)
    assert "Debater A defends" in fc0 and "She was afraid." in fc0 and "[...]" in fc0


def test_the_qh_schedule_gives_each_letter_once_per_pair_and_both_schedules_occur():
    from debate_audit.eraudit.verifier.training_rows import qh_letters

    schedules = {qh_letters(0, pair_id) for pair_id in range(40)}
    assert schedules == {("A", "B"), ("B", "A")}
    assert qh_letters(0, 7) == qh_letters(0, 7)  # seeded, not drawn afresh


def test_honest_and_adv_encodings_have_no_qh_examples_and_a_pair_without_target_no_lm(tokenizer):
    rows = encode_example(
        tokenizer,
        pair_id=0,
        transcript=TRANSCRIPT,
        item=ITEM,
        target=TARGET,
        with_qh=False,
        max_length=256,
        max_target_tokens=32,
    )
    assert [r.qh for r in rows] == [[], []] and all(r.lm_ids for r in rows)
    unresolved = encode_example(
        tokenizer,
        pair_id=0,
        transcript=TRANSCRIPT,
        item=ITEM,
        target=None,
        with_qh=False,
        max_length=256,
        max_target_tokens=32,
    )
    assert [(r.lm_ids, r.lm_labels) for r in unresolved] == [([], []), ([], [])]
    # still both orders of L_fc (the transcript may be cut less: no target shares the budget)
    assert [r.fc[0].target for r in unresolved] == [0, 1]


@pytest.fixture
def tiny_base(tokenizer, tmp_path):
    """A tiny randomly initialised Llama with the embedded model's tokenizer, saved like a prepared model."""
    from debate_audit.models import write_fingerprint

    out = tmp_path / "base"
    tiny_llama(vocab_size=len(tokenizer), max_position_embeddings=512, tie_word_embeddings=True).save_pretrained(out)
    tokenizer.save_pretrained(out)
    write_fingerprint(out, name="tiny-base")
    return out


def test_the_learning_rate_warms_up_then_follows_the_schedule(tiny_base, tokenizer):
    from debate_audit.eraudit.verifier.training_rows import lr_factor

    # hand-computed: 10 warm-up steps of 60, then a half cosine (transformers' schedules)
    assert [lr_factor(s, 60, 10, "cosine") for s in (0, 5, 10, 35)] == [0.0, 0.5, 1.0, pytest.approx(0.5)]
    assert lr_factor(59, 60, 10, "cosine") == pytest.approx(0.5 * (1 + math.cos(math.pi * 49 / 50)))
    assert [lr_factor(s, 60, 10, "constant") for s in (0, 5, 10, 59)] == [0.0, 0.5, 1.0, 1.0]
    assert lr_factor(0, 60, 0, "constant") == 1.0  # no warm-up: the configured rate from the first step
    model = AutoModelForCausalLM.from_pretrained(tiny_base, dtype=torch.float32)
    label_ids = [tokenizer(label, add_special_tokens=False)["input_ids"][0] for label in LABELS]
    rows = encode_example(
        tokenizer,
        pair_id=0,
        transcript=TRANSCRIPT,
        item=ITEM,
        target=TARGET,
        with_qh=False,
        max_length=160,
        max_target_tokens=16,
    )
    settings = FinetuneSettings(
        epochs=4, max_steps=4, learning_rate=1e-3, batch_size=1, grad_accum=2, warmup_steps=2, lr_schedule="cosine"
    )
    curve = train(model, rows, settings, label_ids, tokenizer.pad_token_id or tokenizer.eos_token_id)
    # 2 rows per step (one pair, both orders), 4 steps: 0, half, full, then halfway down the cosine
    assert [c["learning_rate"] for c in curve] == pytest.approx([0.0, 5e-4, 1e-3, 5e-4])
    assert [c["items"] for c in curve] == [2, 4, 6, 8]
    with pytest.raises(ValueError, match="verifier.lr_schedule"):
        FinetuneSettings(lr_schedule="linear")


@pytest.mark.slow
def test_checkpoint_reloads_to_the_same_scores(tiny_base, tokenizer, tmp_path):
    embedded_model_dir = tiny_base
    model = AutoModelForCausalLM.from_pretrained(embedded_model_dir, dtype=torch.float32)
    label_ids = [tokenizer(label, add_special_tokens=False)["input_ids"][0] for label in LABELS]
    rows = encode_example(
        tokenizer,
        pair_id=0,
        transcript=TRANSCRIPT,
        item=ITEM,
        target=TARGET,
        with_qh=True,
        max_length=160,
        max_target_tokens=16,
    )
    settings = FinetuneSettings(epochs=1, max_steps=1, learning_rate=1e-2, batch_size=2, grad_accum=1)
    train(model, rows, settings, label_ids, tokenizer.pad_token_id or tokenizer.eos_token_id)
    questions, answers, others = (
        [ITEM["q_m"], ITEM["q_h"]],
        [ITEM["y_true"], ITEM["h_true"]],
        [ITEM["y_false"], ITEM["h_false"]],
    )
    in_memory = answer_probability(
        LanguageModel(embedded_model_dir, model=model, tokenizer=tokenizer, cache=None), questions, answers, others
    )
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

    from debate_audit.eraudit.verifier.finetune import _apply_lora
    from debate_audit.models import write_fingerprint
    from debate_audit.models.adapter import is_adapter

    lora = {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0, "target_modules": ["q_proj", "v_proj"]}
    model = _apply_lora(AutoModelForCausalLM.from_pretrained(tiny_base, dtype=torch.float32), lora)
    label_ids = [tokenizer(label, add_special_tokens=False)["input_ids"][0] for label in LABELS]
    rows = encode_example(
        tokenizer,
        pair_id=0,
        transcript=TRANSCRIPT,
        item=ITEM,
        target=TARGET,
        with_qh=True,
        max_length=160,
        max_target_tokens=16,
    )
    settings = FinetuneSettings(epochs=1, max_steps=2, learning_rate=5e-2, batch_size=1, grad_accum=1, lora=lora)
    train(model, rows, settings, label_ids, tokenizer.pad_token_id or tokenizer.eos_token_id)
    base_sha = read_fingerprint(tiny_base)["weights_sha256"]
    adapter = tmp_path / "verifiers" / "org"
    save_verifier(model, tokenizer, adapter, adapter_of=tiny_base, base_weights_sha256=base_sha)
    merged = tmp_path / "merged"
    save_verifier(model.merge_and_unload(), tokenizer, merged, base_weights_sha256=base_sha)
    assert is_adapter(adapter) and not is_adapter(merged)
    assert (
        read_fingerprint(adapter)["checkpoint"] == "lora-adapter" and read_fingerprint(merged)["checkpoint"] == "full"
    )
    size = sum(f.stat().st_size for f in adapter.glob("*.safetensors"))
    assert size < sum(f.stat().st_size for f in merged.glob("*.safetensors")) / 5
    questions, answers, others = (
        [ITEM["q_m"], ITEM["q_h"]],
        [ITEM["y_true"], ITEM["h_true"]],
        [ITEM["y_false"], ITEM["h_false"]],
    )
    from_merged = answer_probability(LanguageModel(merged, cache=None), questions, answers, others)
    from_adapter = answer_probability(LanguageModel(adapter, cache=None), questions, answers, others)
    assert from_adapter == pytest.approx(from_merged, abs=1e-6)
    base = answer_probability(LanguageModel(tiny_base, cache=None), questions, answers, others)
    assert max(abs(a - b) for a, b in zip(from_adapter, base)) > 1e-6  # the adapter is applied

    # The adapter names its base relative to itself: moving both keeps it loadable.
    moved = tmp_path / "moved"
    shutil.copytree(tiny_base, moved / "base")
    shutil.copytree(adapter, moved / "verifiers" / "org")
    assert answer_probability(
        LanguageModel(moved / "verifiers" / "org", cache=None), questions, answers, others
    ) == pytest.approx(from_adapter, abs=1e-6)
    # A base that changed under the adapter is an error naming the adapter, not a silently different verifier.
    torch.manual_seed(1)
    AutoModelForCausalLM.from_config(AutoModelForCausalLM.from_pretrained(tiny_base).config).save_pretrained(
        moved / "base"
    )
    write_fingerprint(moved / "base", name="tiny-base")
    with pytest.raises(
        ValueError, match=r"verifiers/org: LoRA adapter trained on base weights .* retrain the verifier"
    ):
        LanguageModel(moved / "verifiers" / "org", cache=None)
