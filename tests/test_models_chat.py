"""Chat formats (models/chat.py): the published templates of GPT-OSS (harmony) and Qwen3.5 (thinking), their
switches, a fixed clock, and replies read back to their final answer, through `LanguageModel.generate`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from debate_audit.models import GenerationParams, LanguageModel, write_fingerprint
from debate_audit.models.chat import CLOSED_THINK, TEMPLATE_DATE, ChatFormat, reasoning_format

TEMPLATES = Path(__file__).parent / "chat_templates"
HARMONY_TOKENS = ["<|start|>", "<|channel|>", "<|message|>", "<|end|>", "<|return|>", "<|call|>", "<|constrain|>"]
QUESTION = [{"role": "user", "content": "Which debater quotes the story?"}]
ANALYSIS = "We need to compare the quotes. Debater A quotes twice."
ANSWER = "Debater A's quotes are verified.\nAnswer: A"
# GPT-OSS's reply as the harmony docs show it: analysis, then the final channel, ended by <|return|>.
HARMONY_REPLY = (
    f"<|channel|>analysis<|message|>{ANALYSIS}<|end|><|start|>assistant<|channel|>final<|message|>{ANSWER}<|return|>"
)


def fixture_tokenizer(embedded_model_dir, template: str, kind: str):
    """The embedded model's tokenizer with a published template and that model's control tokens."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir)
    tokenizer.chat_template = (TEMPLATES / template).read_text()
    if kind == "harmony":
        tokenizer.add_special_tokens({"additional_special_tokens": HARMONY_TOKENS, "eos_token": "<|return|>"})
    else:  # Qwen3.5: <think> / </think> are added tokens, not special ones
        tokenizer.add_tokens(["<think>", "</think>"], special_tokens=False)
    return tokenizer


@pytest.fixture(scope="module")
def harmony(embedded_model_dir):
    return fixture_tokenizer(embedded_model_dir, "gpt-oss-20b.jinja", "harmony")


@pytest.fixture(scope="module")
def qwen(embedded_model_dir):
    return fixture_tokenizer(embedded_model_dir, "qwen3.5-9b.jinja", "think")


def test_reasoning_format_comes_from_the_vocabulary(harmony, qwen, embedded_lm):
    assert reasoning_format(harmony) == "harmony"
    assert reasoning_format(qwen) == "think"
    assert reasoning_format(embedded_lm.tokenizer) == "none"


def test_gpt_oss_template_renders_a_fixed_date_and_its_effort_switch(harmony):
    chat = ChatFormat.of(harmony, {"reasoning_effort": "low"})
    prompt = chat.render(harmony, QUESTION)
    assert f"Current date: {TEMPLATE_DATE:%Y-%m-%d}\n" in prompt and "Reasoning: low\n" in prompt
    assert prompt.endswith("<|start|>user<|message|>Which debater quotes the story?<|end|><|start|>assistant")
    # The template's own default, and the same text on every call (no clock in the prompt)
    default = ChatFormat.of(harmony)
    assert "Reasoning: medium\n" in default.render(harmony, QUESTION) == default.render(harmony, QUESTION)


def test_gpt_oss_prefill_opens_the_final_channel_as_the_release_does(harmony):
    prompt = ChatFormat.of(harmony).render(harmony, QUESTION, assistant_prefix="Answer:")
    # adversarial_transcript/score_verifier.py: FINAL_CHANNEL_PREFILL = "<|channel|>final<|message|>Answer:"
    assert prompt.endswith("<|start|>assistant<|channel|>final<|message|>Answer:")
    prefilled = ChatFormat.of(harmony).render(harmony, [*QUESTION, {"role": "assistant", "content": "Answer:"}])
    assert prefilled == prompt


def test_qwen_thinking_switch_and_prefill(qwen):
    on, off = ChatFormat.of(qwen), ChatFormat.of(qwen, {"enable_thinking": False})
    assert on.render(qwen, QUESTION).endswith("<|im_start|>assistant\n<think>\n")
    assert off.render(qwen, QUESTION).endswith("<|im_start|>assistant\n" + CLOSED_THINK)
    # The release's Qwen direct prefill "<think>\n\n</think>\n\nAnswer:", with the switch on or off
    for chat in (on, off):
        assert chat.render(qwen, QUESTION, "Answer:").endswith("<|im_start|>assistant\n<think>\n\n</think>\n\nAnswer:")


@pytest.mark.parametrize(
    "reply, answer",
    [
        (HARMONY_REPLY, ANSWER),
        (f"<|channel|>analysis<|message|>{ANALYSIS} and more", ""),  # the budget ran out in the analysis
        (f"<|channel|>analysis<|message|>x<|end|><|start|>assistant<|channel|>final<|message|>{ANSWER}", ANSWER),
        (f"<|channel|>final<|message|>{ANSWER}<|return|>", ANSWER),  # no analysis at all
        (
            "<|channel|>commentary<|message|>calling<|end|><|start|>assistant<|channel|>final <|constrain|>json"
            '<|message|>{"a": 1}<|return|>',
            '{"a": 1}',
        ),
    ],
)
def test_harmony_reply_reads_back_its_final_channel(harmony, reply, answer):
    chat = ChatFormat.of(harmony)
    assert chat.final_answer(chat.render(harmony, QUESTION), reply) == answer


def test_harmony_prefilled_reply_is_the_continuation(harmony):
    chat = ChatFormat.of(harmony)
    prompt = chat.render(harmony, QUESTION, "Answer:")
    assert chat.final_answer(prompt, " A<|return|>") == "A"


def test_harmony_tokens_decoded_as_the_model_emits_them(harmony):
    """The bug this fixes: with special tokens skipped, the analysis ends up in the text."""
    chat = ChatFormat.of(harmony)
    ids = harmony(HARMONY_REPLY.removesuffix("<|return|>"), add_special_tokens=False)["input_ids"]
    skipped = harmony.decode(ids, skip_special_tokens=True)
    assert ANALYSIS in skipped and skipped.startswith("analysis")
    kept = harmony.decode(ids, skip_special_tokens=not chat.keeps_special_tokens)
    assert chat.final_answer(chat.render(harmony, QUESTION), kept) == ANSWER


@pytest.mark.parametrize(
    "switch, reply, answer",
    [
        (None, f"{ANALYSIS}\n</think>\n\n{ANSWER}", ANSWER),  # the template opened the block
        (None, ANALYSIS, ""),  # the budget ran out while thinking
        (False, ANSWER, ANSWER),  # thinking off: the reply is the answer
        (False, f"<think>\n{ANALYSIS}\n</think>\n\n{ANSWER}", ANSWER),  # it thought anyway
    ],
)
def test_qwen_reply_reads_back_what_follows_the_think_block(qwen, switch, reply, answer):
    chat = ChatFormat.of(qwen, None if switch is None else {"enable_thinking": switch})
    assert chat.final_answer(chat.render(qwen, QUESTION), reply) == answer


def test_a_model_without_reasoning_is_unchanged(embedded_lm):
    chat = ChatFormat.of(embedded_lm.tokenizer)
    assert not chat.keeps_special_tokens and chat.key() == {}
    text = chat.render(embedded_lm.tokenizer, QUESTION, "Answer:")
    assert (
        text
        == embedded_lm.tokenizer.apply_chat_template(QUESTION, tokenize=False, add_generation_prompt=True) + "Answer:"
    )
    assert chat.final_answer(text, "  <think>x</think> y ") == "<think>x</think> y"


# ------------------------------------------------------------ through LanguageModel.generate
def scripted_model(tokenizer, out_dir: Path, prompt_ids: list[int], reply_ids: list[int]) -> Path:
    """A real transformers model (GPT-2 architecture) whose greedy continuation of `prompt_ids` is `reply_ids`:
    attention and MLP outputs are zero, so a position's logits come from its learned position embedding
    alone, and position p's embedding points at the token to write at p + 1."""
    import torch
    from transformers import GenerationConfig, GPT2Config, GPT2LMHeadModel

    width = len(prompt_ids) + len(reply_ids) + 8
    config = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=width,
        n_embd=width,
        n_layer=1,
        n_head=1,
        tie_word_embeddings=False,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    model = GPT2LMHeadModel(config)
    with torch.no_grad():
        for param in model.parameters():
            param.zero_()
        for layer_norm in (model.transformer.h[0].ln_1, model.transformer.h[0].ln_2, model.transformer.ln_f):
            layer_norm.weight.fill_(1.0)
        model.transformer.wpe.weight.copy_(torch.eye(width))
        start = len(prompt_ids) - 1  # the last prompt position predicts the first reply token
        for offset, token in enumerate(reply_ids):
            model.lm_head.weight[token, start + offset] = 10.0
    model.generation_config = GenerationConfig(eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    model.save_pretrained(out_dir, safe_serialization=True)
    tokenizer.save_pretrained(out_dir)
    write_fingerprint(out_dir, name="scripted")
    return out_dir


def test_generate_keeps_gpt_oss_final_channel_only(tmp_path, harmony):
    chat = ChatFormat.of(harmony)
    prompt_ids = harmony(chat.render(harmony, QUESTION), add_special_tokens=False)["input_ids"]
    reply_ids = harmony(HARMONY_REPLY, add_special_tokens=False)["input_ids"]
    assert reply_ids[-1] == harmony.convert_tokens_to_ids("<|return|>")
    model_dir = scripted_model(harmony, tmp_path / "m", prompt_ids, reply_ids)
    lm = LanguageModel(model_dir, batch_size=2, cache=tmp_path / "cache")
    params = GenerationParams(max_new_tokens=len(reply_ids) + 4)
    assert lm.generate([QUESTION], params) == [[ANSWER]]
    # A budget that ends inside the analysis: no final answer, counted (and logged), not analysis text
    short = GenerationParams(max_new_tokens=8)
    assert lm.generate([QUESTION], short) == [[""]] and lm.unanswered == 1
    lm.close()
    # The answers are cached under a key that names how they were read back
    again = LanguageModel(model_dir, batch_size=2, cache=tmp_path / "cache")
    assert again.generate([QUESTION], params) == [[ANSWER]] and again.cache.hits >= 1
    again.close()


def test_generate_keeps_qwen_answer_after_its_thinking(tmp_path, qwen):
    chat = ChatFormat.of(qwen)
    prompt_ids = qwen(chat.render(qwen, QUESTION), add_special_tokens=False)["input_ids"]
    reply_ids = qwen(f"{ANALYSIS}\n</think>\n\n{ANSWER}<|im_end|>", add_special_tokens=False)["input_ids"]
    model_dir = scripted_model(qwen, tmp_path / "m", prompt_ids, reply_ids)
    lm = LanguageModel(model_dir, batch_size=2, cache=None)
    assert lm.generate([QUESTION], GenerationParams(max_new_tokens=len(reply_ids) + 4)) == [[ANSWER]]
    # Switched off through the spec, the prompt carries the closed block: the model sees another prompt
    off = LanguageModel(model_dir, batch_size=2, cache=None, chat_template_kwargs={"enable_thinking": False})
    assert off.render_chat(QUESTION).endswith(CLOSED_THINK)
    assert json.loads((model_dir / "fingerprint.json").read_text())["name"] == "scripted"


def test_gemma_style_thought_channels_are_removed(qwen):
    chat = ChatFormat("channel", {}, ("<|channel>", "<channel|>", "<turn|>"))
    assert chat.final_answer("", f"<|channel>thought\n{ANALYSIS}<channel|>{ANSWER}<turn|>") == ANSWER
    assert chat.final_answer("", f"<|channel>thought\n{ANALYSIS}") == ""


@pytest.mark.slow
@pytest.mark.parametrize("arch, kind", [("gpt_oss", "harmony"), ("qwen3_5_text", "think")])
def test_rehearsal_stand_in_with_the_published_template_generates(tmp_path, harmony, qwen, arch, kind):
    """The rehearsal's randomly initialised GPT-OSS / Qwen3.5 classes, given their published templates: rendering,
    decoding with special tokens kept and reading back run through the real architectures."""
    from debate_audit.models import ModelSpec, prepare_model

    tokenizer = harmony if kind == "harmony" else qwen
    prompt_ids = tokenizer(ChatFormat.of(tokenizer).render(tokenizer, QUESTION), add_special_tokens=False)["input_ids"]
    borrowed = scripted_model(tokenizer, tmp_path / "tokenizer", prompt_ids, [tokenizer.eos_token_id])
    spec = ModelSpec.from_config("stand-in", {"source": "random", "id": arch, "tokenizer": "scripted"})
    prepare_model(spec, tmp_path / "m", borrowed)
    lm = LanguageModel(
        tmp_path / "m",
        batch_size=2,
        cache=None,
        chat_template_kwargs=None if kind == "harmony" else {"enable_thinking": False},
    )
    assert lm.chat.reasoning == kind
    (replies,) = lm.generate([QUESTION], GenerationParams(max_new_tokens=12))
    assert isinstance(replies[0], str) and not any(t in replies[0] for t in lm.chat.special_tokens)


def test_a_tokenizer_without_a_chat_template_gets_no_other_models_template(embedded_model_dir):
    from transformers import AutoTokenizer

    from debate_audit.models.chat import NoChatTemplateError, document_prefix

    tokenizer = AutoTokenizer.from_pretrained(embedded_model_dir)
    assert document_prefix(tokenizer) == ""  # SmolLM2's tokenizer adds no BOS: its plain prompts are as written
    tokenizer.chat_template = None
    chat = ChatFormat.of(tokenizer)
    assert not chat.has_template and chat.plain("Question: x") == "Question: x"
    with pytest.raises(NoChatTemplateError, match="no chat template .*plain prompts only"):
        chat.render(tokenizer, QUESTION)
