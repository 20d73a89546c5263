"""Tiny randomly initialised stand-ins of other architectures (source: random), built offline."""

from __future__ import annotations

import json

import pytest

from debate_audit.models import GenerationParams, LanguageModel, ModelSpec, prepare_model

ARCHITECTURES = ["llama", "mistral", "granite", "qwen2", "phi3", "qwen3", "gpt_oss"]


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
    prepare_model(random_spec("wide", "qwen2", init={"hidden_size": 96, "num_hidden_layers": 1}), tmp_path,
                  embedded_model_dir)
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
