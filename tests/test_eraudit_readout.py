"""The verifier's forced-choice prompt in its two formats (verifier.readout): the chat template with an
"Answer:" prefill (instruct models) and plain text (tokenizers without a template)."""

import pytest
from transformers import AutoTokenizer

from debate_audit.eraudit.finetune import argument_target
from debate_audit.eraudit.losses import IGNORE, encode_example
from debate_audit.eraudit.readout import (ANSWER_SLOT, LABELS, answer_probability, readout_id, render_prompt,
                                          renderer_for, resolve_readout, tokenizer_chat)

ITEM = {"q_m": "Why did Mira wait?", "y_true": "She trusted Pim", "y_false": "She was afraid",
        "q_h": "Is the ferry late?", "h_true": "Yes", "h_false": "No"}
TRANSCRIPT = "Debater A: She trusted Pim and <v_quote>waited for him</v_quote>.\nDebater B: She was afraid."


@pytest.fixture(scope="module")
def tokenizer(embedded_model_dir):
    return AutoTokenizer.from_pretrained(embedded_model_dir)


@pytest.fixture(scope="module")
def plain_tokenizer(embedded_model_dir):
    tok = AutoTokenizer.from_pretrained(embedded_model_dir)
    tok.chat_template = None  # a base model's tokenizer: no template
    return tok


def _enc(tokenizer, text):
    return tokenizer(text, add_special_tokens=False)["input_ids"]


def test_embedded_instruct_model_reads_in_chat_by_default(tokenizer, plain_tokenizer):
    assert resolve_readout("auto", tokenizer) == "chat"
    assert resolve_readout("auto", plain_tokenizer) == "plain"
    assert resolve_readout("plain", tokenizer) == "plain"
    with pytest.raises(ValueError, match="verifier.readout"):
        resolve_readout("chat", plain_tokenizer)
    with pytest.raises(ValueError, match="verifier.readout"):
        resolve_readout("chatml", tokenizer)


@pytest.mark.parametrize("transcript", [None, TRANSCRIPT])
def test_chat_prompt_ends_at_the_prefilled_slot_and_each_label_is_one_more_token(tokenizer, transcript):
    chat = renderer_for("auto", tokenizer)
    prompt = render_prompt(ITEM["q_m"], ITEM["y_true"], ITEM["y_false"], transcript=transcript, chat=chat)
    template = tokenizer.apply_chat_template([{"role": "user", "content": "x"}], tokenize=False,
                                             add_generation_prompt=True)
    assert template.split("x")[0] in prompt  # the model's own chat header, not a hand-made one
    assert prompt.endswith("<|im_start|>assistant\n" + ANSWER_SLOT)  # the assistant turn holds only "Answer:"
    assert f"Question: {ITEM['q_m']}\nA. {ITEM['y_true']}\nB. {ITEM['y_false']}" in prompt
    assert (transcript is None) == ("Debate transcript:" not in prompt)
    ids = _enc(tokenizer, prompt)
    for label in LABELS:
        with_label = _enc(tokenizer, prompt + label)
        assert with_label[: len(ids)] == ids and len(with_label) == len(ids) + 1, label
    assert len({_enc(tokenizer, prompt + label)[-1] for label in LABELS}) == 2


def test_language_model_and_tokenizer_render_the_same_chat_prompt(embedded_lm, tokenizer):
    via_lm = render_prompt("Q?", "x", "y", transcript=TRANSCRIPT,
                           chat=lambda m, prefix: embedded_lm.render_chat(m, assistant_prefix=prefix))
    assert via_lm == render_prompt("Q?", "x", "y", transcript=TRANSCRIPT, chat=tokenizer_chat(tokenizer))


def test_plain_format_is_unchanged_without_a_chat_template(plain_tokenizer):
    chat = renderer_for("auto", plain_tokenizer)
    assert chat is None
    assert render_prompt("Q?", "x", "y", chat=chat) == "Question: Q?\nA. x\nB. y\nAnswer:"
    assert render_prompt("Q?", "x", "y", transcript="T", chat=chat) == \
        "Debate transcript:\nT\n\nQuestion: Q?\nA. x\nB. y\nAnswer:"


class Recorder:
    """Scores label A higher by a fixed margin whatever the prompt; keeps the prompts it saw."""

    def __init__(self, tokenizer, margin=2.0):
        self.tokenizer, self.margin, self.prompts = tokenizer, margin, []

    def render_chat(self, messages, assistant_prefix=None):
        return tokenizer_chat(self.tokenizer)(messages, assistant_prefix or "")

    def choice_logprobs(self, prompts, labels, desc=""):
        self.prompts.extend(prompts)
        return [[0.0, -self.margin] for _ in prompts]


def test_chat_readout_averages_both_orders_so_position_bias_cancels(tokenizer):
    lm = Recorder(tokenizer)
    assert answer_probability(lm, ["Q?"], ["x"], ["y"], readout="chat") == [pytest.approx(0.5)]
    first, second = lm.prompts
    assert "A. x\nB. y" in first and "A. y\nB. x" in second and first.endswith(ANSWER_SLOT)


def test_chat_readout_on_the_embedded_model_is_a_probability_from_both_orders(embedded_lm):
    chat, plain = (answer_probability(embedded_lm, ["What colour is the sky on a clear day?"], ["blue"], ["green"],
                                      readout=mode) for mode in ("chat", "plain"))
    assert 0.0 < chat[0] < 1.0 and 0.0 < plain[0] < 1.0
    assert chat != plain  # the format reaches the model


def test_training_examples_use_the_same_chat_prompt_as_scoring(tokenizer):
    ex = encode_example(tokenizer, pair_id=0, transcript=TRANSCRIPT, item=ITEM, true_position="A",
                        target=argument_target("A", ITEM["y_true"], "She trusted Pim."), with_qh=True,
                        max_length=512, max_target_tokens=32, readout="auto")
    chat = tokenizer_chat(tokenizer)
    assert ex.fc[0].ids == _enc(tokenizer, render_prompt(ITEM["q_m"], ITEM["y_true"], ITEM["y_false"],
                                                         transcript=TRANSCRIPT, chat=chat))
    assert ex.qh[0].ids == _enc(tokenizer, render_prompt(ITEM["q_h"], ITEM["h_false"], ITEM["h_true"],
                                                         transcript=TRANSCRIPT, chat=chat))
    prompt_len = ex.lm_labels.count(IGNORE)
    assert tokenizer.decode(ex.lm_ids[:prompt_len]).endswith("<|im_start|>assistant\nAnswer:")
    assert tokenizer.decode(ex.lm_ids[prompt_len:]).startswith(f" A. {ITEM['y_true']}\nReason: She trusted Pim.")


def test_readout_id_changes_with_the_mode():
    ids = {readout_id(mode) for mode in ("chat", "plain", "auto")}
    assert len(ids) == 3 and all(i.startswith("readout:") for i in ids)
    with pytest.raises(ValueError, match="verifier.readout"):
        readout_id("chatml")


def test_a_bad_readout_is_a_config_error_naming_the_key(monkeypatch):
    import yaml

    from debate_audit.config_check import config_errors
    from conftest import REPO

    monkeypatch.chdir(REPO)
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    assert config["verifier"]["readout"] == "auto" and config_errors(config, REPO / "config/schema.yaml") == []
    config["verifier"]["readout"] = "chatml"
    errors = config_errors(config, REPO / "config/schema.yaml")
    assert any("verifier.readout" in e for e in errors), errors
