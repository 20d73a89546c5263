"""Tiny randomly initialised stand-ins of other architectures (source: random), built offline."""

from __future__ import annotations

import json

import pytest

from debate_audit.models import GenerationParams, LanguageModel, ModelSpec, prepare_model

ARCHITECTURES = ["llama", "mistral", "granite", "qwen2", "phi3", "qwen3", "gpt_oss", "gemma4_text", "qwen3_5_text"]


def random_spec(name: str, arch: str, **extra) -> ModelSpec:
    return ModelSpec.from_config(name, {"source": "random", "id": arch, "tokenizer": "smollm2-135m", **extra})


@pytest.mark.slow
@pytest.mark.parametrize("arch", ARCHITECTURES)
def test_random_model_of_each_architecture_generates_and_scores(tmp_path, embedded_model_dir, arch):
    record = prepare_model(random_spec(f"r-{arch}", arch), tmp_path, embedded_model_dir)
    assert record["random_weights"] is True
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == arch
    assert (tmp_path / "RANDOM_WEIGHTS.txt").exists()
    lm = LanguageModel(tmp_path, batch_size=2, cache=None)
    assert lm.tokenizer.get_vocab() == LanguageModel(embedded_model_dir, batch_size=1, cache=None).tokenizer.get_vocab()
    (reply,) = lm.generate([[{"role": "user", "content": "Say something."}]], GenerationParams(max_new_tokens=5))
    assert isinstance(reply[0], str)
    (scores,) = lm.choice_logprobs(["Question: yes or no? Answer:"], [" A", " B"])
    assert len(scores) == 2 and all(s < 0 for s in scores)


def test_same_name_gives_the_same_weights_and_another_name_other_weights(tmp_path, embedded_model_dir):
    first = prepare_model(random_spec("same", "llama"), tmp_path / "a", embedded_model_dir)
    again = prepare_model(random_spec("same", "llama"), tmp_path / "b", embedded_model_dir)
    other = prepare_model(random_spec("other", "llama"), tmp_path / "c", embedded_model_dir)
    assert first["weights_sha256"] == again["weights_sha256"] != other["weights_sha256"]


def test_init_overrides_the_default_shape(tmp_path, embedded_model_dir):
    prepare_model(
        random_spec("wide", "qwen2", init={"hidden_size": 96, "num_hidden_layers": 1}), tmp_path, embedded_model_dir
    )
    config = json.loads((tmp_path / "config.json").read_text())
    assert (config["hidden_size"], config["num_hidden_layers"]) == (96, 1)


@pytest.mark.parametrize(
    "entry, message",
    [
        ({"source": "random", "id": "llama"}, "needs the key 'tokenizer'"),
        ({"source": "hf", "id": "x/y", "tokenizer": "smollm2-135m"}, "apply to source 'random' only"),
        ({"source": "random", "tokenizer": "smollm2-135m"}, "needs the key 'id'"),
    ],
)
def test_random_spec_errors_name_the_key(entry, message):
    with pytest.raises(ValueError, match=message):
        ModelSpec.from_config("bad", entry)


def test_unknown_architecture_names_the_model(tmp_path, embedded_model_dir):
    with pytest.raises(ValueError, match="models.bad: 'no-such-arch' is not a transformers model type"):
        prepare_model(random_spec("bad", "no-such-arch"), tmp_path, embedded_model_dir)


def test_missing_tokenizer_model_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="'smollm2-135m', which is not prepared"):
        prepare_model(random_spec("r", "llama"), tmp_path / "out", tmp_path / "nowhere")


@pytest.mark.slow
def test_sliding_window_model_generates_long_prompts_without_prefix_reuse(tmp_path, embedded_model_dir):
    """A Gemma-style stand-in (sliding-window layers with a 64-token window) on prompts longer than the
    window: states cannot be stored and extended, so the model layer turns prefix reuse off for it."""
    from debate_audit.models.lm import has_sliding_window

    prepare_model(random_spec("slide", "gemma4_text", init={"sliding_window": 64}), tmp_path, embedded_model_dir)
    lm = LanguageModel(tmp_path, batch_size=2, cache=None)
    assert has_sliding_window(lm.model.config) and not lm.batch_invariant and not lm.prefix_sharing
    long = " ".join(["word"] * 150)
    conversations = [[{"role": "user", "content": long + f" {i}"}] for i in range(3)]
    for _ in range(2):  # the second call would extend stored states if they were kept
        replies = lm.generate(conversations, GenerationParams(max_new_tokens=4))
        assert len(replies) == 3
    assert len(lm.choice_logprobs([long + " A or B?"] * 2, [" A", " B"])) == 2


def test_full_attention_models_keep_prefix_reuse(embedded_model_dir):
    from transformers import AutoConfig

    from debate_audit.models.lm import has_sliding_window

    assert not has_sliding_window(AutoConfig.from_pretrained(embedded_model_dir))
    assert not has_sliding_window(AutoConfig.for_model("qwen2", sliding_window=4096, use_sliding_window=False))
    assert has_sliding_window(AutoConfig.for_model("mistral", sliding_window=4096))


def test_hybrid_linear_attention_model_scores_the_same_in_any_batch(tmp_path, embedded_model_dir):
    """A Qwen3.5-style stand-in (a linear-attention layer keeps a recurrent state, not keys and values):
    no prefix reuse, and a prompt scores the same alone and batched with longer ones."""
    from debate_audit.models.lm import has_linear_attention

    prepare_model(random_spec("hybrid", "qwen3_5_text"), tmp_path, embedded_model_dir)
    lm = LanguageModel(tmp_path, batch_size=4, cache=None)
    assert has_linear_attention(lm.model.config) and not lm.prefix_sharing and not lm.batch_invariant
    prompts = ["A long shared preamble about a story and its question, then: yes or no? Answer:"] * 3
    prompts.append("Short: yes or no? Answer:")
    batched = lm.choice_logprobs(prompts, [" A", " B"])
    alone = LanguageModel(tmp_path, batch_size=1, cache=None).choice_logprobs(prompts[-1:], [" A", " B"])
    assert batched[-1] == pytest.approx(alone[0], abs=1e-5)
    (reply,) = lm.generate([[{"role": "user", "content": prompts[0]}]], GenerationParams(max_new_tokens=4))
    assert isinstance(reply[0], str)
