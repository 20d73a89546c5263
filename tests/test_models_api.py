"""Hosted models through their providers' SDKs (models/api.py): what each provider receives, as the real SDK
builds it against a local server, and what is kept of each reply."""

from __future__ import annotations

import copy
import json
import logging
from pathlib import Path

import pytest
import yaml
from conftest import json_server

from debate_audit.models import GenerationParams, ModelRef, ModelSpec, open_model
from debate_audit.models.api import HostedChatModel, request_timeout_s
from debate_audit.tools.config_check import config_errors

REPO = Path(__file__).resolve().parents[1]
OVERLAY = yaml.safe_load((REPO / "config/api-generators.yaml").read_text())
KEY_ENV = "DA_TEST_API_KEY"
KEY = "sk-test-0123456789-do-not-log-me"
# a pool's draw as paraphrase/pools.py asks it: sampled, seeded, one per request, with the pool's settings
DRAW = GenerationParams(max_new_tokens=1024, do_sample=True, temperature=1.0, top_p=0.95, num_samples=1, seed=11)
USAGE = {
    "openai": {
        "prompt_tokens": 50,
        "completion_tokens": 700,
        "total_tokens": 750,
        "completion_tokens_details": {"reasoning_tokens": 600},
    },
    "anthropic": {"input_tokens": 50, "output_tokens": 900},
}


def ask(text: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": text}]


@pytest.fixture
def provider_server():
    """One local server for both SDKs: /v1/chat/completions (OpenAI) and /v1/messages (Anthropic) answer
    the last message back; a message containing "long" stops at the token cap, "fail" gets a 400, "echo"
    a 401 whose body quotes the credentials the request carried (as a provider might). Records every request
    (path, body, headers)."""
    seen: list[tuple[str, dict, dict]] = []

    def respond(path, body, headers):
        seen.append((path, body, dict(headers)))
        last = body["messages"][-1]["content"]
        if "fail" in last:
            return 400, {}, {"error": {"type": "invalid_request_error", "message": "this prompt is refused"}}
        if "echo" in last:
            shown = headers.get("Authorization") or headers.get("x-api-key")
            return 401, {}, {"error": {"type": "authentication_error", "message": f"bad credentials: {shown}"}}
        long = "long" in last
        if path.endswith("/chat/completions"):
            return (
                200,
                {},
                {
                    "id": "chatcmpl-1",
                    "object": "chat.completion",
                    "created": 1,
                    "model": body["model"],
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": f" re: {last} "},
                            "finish_reason": "length" if long else "stop",
                        }
                    ],
                    "usage": USAGE["openai"],
                },
            )
        return (
            200,
            {},
            {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": body["model"],
                "content": [
                    {"type": "thinking", "thinking": "first I think", "signature": "sig"},
                    {"type": "text", "text": "re: "},
                    {"type": "text", "text": last},
                ],
                "stop_reason": "max_tokens" if long else "end_turn",
                "stop_sequence": None,
                "usage": USAGE["anthropic"],
            },
        )

    with json_server(respond) as url:
        yield url, seen


def shipped(name: str, url: str) -> dict:
    """The model `name` of config/api-generators.yaml, its endpoint and key variable the test's own (the
    Anthropic SDK appends /v1/messages to its base URL, the OpenAI SDK /chat/completions)."""
    entry = copy.deepcopy(OVERLAY["models"][name])
    entry["base_url"] = url if entry["provider"] == "openai" else url.removesuffix("/v1")
    entry["api_key_env"] = KEY_ENV
    return entry


def hosted(name: str, url: str, cache: Path, tmp_path: Path, concurrency: int = 4):
    """The shipped model `name`, opened as a workflow job opens it (spec -> ModelRef -> open_model)."""
    spec = ModelSpec.from_config(name, {**shipped(name, url), "concurrency": concurrency})
    directory = tmp_path / "models" / name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "fingerprint.json").write_text(json.dumps({"name": name, "weights_sha256": "ab" * 32}))
    return open_model(ModelRef.from_spec(spec, directory), cache=cache)


@pytest.fixture(autouse=True)
def api_key(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)


def test_gpt_is_sent_what_query_gpt_sends_and_none_of_the_pools_settings(provider_server, tmp_path):
    url, seen = provider_server
    with hosted("gpt-5.6-terra", url, tmp_path / "cache", tmp_path) as lm:
        assert lm.generate([ask("Is water wet?")], DRAW) == [["re: Is water wet?"]]
    ((path, body, _),) = seen
    assert path == "/v1/chat/completions"
    # query_llm.py (commit 4cb6829) query_gpt: model, reasoning_effort='high', temperature=1.8, messages; no
    # token cap, no top_p, and not the pool's temperature, budget or seed
    assert body == {
        "model": "gpt-5.6-terra",
        "messages": ask("Is water wet?"),
        "reasoning_effort": "high",
        "temperature": 1.8,
    }


def test_claude_is_sent_what_query_claude_sends_and_no_sampling_parameter(provider_server, tmp_path):
    url, seen = provider_server
    with hosted("claude-opus-4-8", url, tmp_path / "cache", tmp_path) as lm:
        (replies,) = lm.generate_replies([ask("Is water wet?")], DRAW)
    ((path, body, _),) = seen
    assert path == "/v1/messages"
    # query_claude: max_tokens=MAX_TOKENS (16384), thinking adaptive, output_config effort high, messages
    assert body == {
        "model": "claude-opus-4-8",
        "messages": ask("Is water wet?"),
        "max_tokens": 16384,
        "thinking": {"type": "adaptive"},
        "output_config": {"effort": "high"},
    }
    assert not {"temperature", "top_p", "top_k"} & set(body)
    assert [r.text for r in replies] == ["re: Is water wet?"]  # the text blocks joined, the thinking left out


@pytest.mark.parametrize(
    ("name", "cut_reason", "end_reason"),
    [("gpt-5.6-terra", "length", "stop"), ("claude-opus-4-8", "max_tokens", "end_turn")],
)
def test_a_reply_stopped_by_its_token_cap_is_cut_and_keeps_its_finish_reason(
    provider_server, tmp_path, name, cut_reason, end_reason
):
    url, seen = provider_server
    convs = [ask("a long question"), ask("a short one")]
    with hosted(name, url, tmp_path / "cache", tmp_path) as lm:
        first = lm.generate_replies(convs, DRAW)
    assert [(r.cut, r.finish_reason) for (r,) in first] == [(True, cut_reason), (False, end_reason)]
    sent = len(seen)
    with hosted(name, url, tmp_path / "cache", tmp_path) as lm:
        assert lm.generate_replies(convs, DRAW) == first  # from the cache, cut and reason included
    assert len(seen) == sent


@pytest.mark.parametrize("name", ["gpt-5.6-terra", "claude-opus-4-8"])
def test_every_reply_records_the_providers_token_usage(provider_server, tmp_path, name):
    url, _ = provider_server
    provider = OVERLAY["models"][name]["provider"]
    with hosted(name, url, tmp_path / "cache", tmp_path) as lm:
        ((reply,),) = lm.generate_replies([ask("q")], DRAW)
        assert reply.usage == USAGE[provider]
        total = "completion_tokens" if provider == "openai" else "output_tokens"
        assert lm.usage[total] == USAGE[provider][total]
    records = [
        json.loads(line.split("\t", 3)[3])
        for f in (tmp_path / "cache").rglob("*.shard")
        for line in f.read_text().splitlines()[1:]
    ]
    assert [r["usage"] for r in records] == [[USAGE[provider]]]
    assert records[0]["engine"].startswith(f"{provider}-python ")


def test_a_reply_is_in_the_cache_when_a_later_request_fails(provider_server, tmp_path):
    url, seen = provider_server
    # one request at a time: the first is answered (and paid for) before the second fails for good
    with pytest.raises(
        RuntimeError,
        match=r"BadRequestError.*this prompt is refused.*the 1 replies that arrived "
        r"are cached",
    ):
        with hosted("gpt-5.6-terra", url, tmp_path / "cache", tmp_path, concurrency=1) as lm:
            lm.generate_replies([ask("paid for"), ask("fail"), ask("never sent")], DRAW)
    assert [body["messages"][0]["content"] for _, body, _ in seen] == ["paid for", "fail"]  # a 400 is not retried
    with hosted("gpt-5.6-terra", url, tmp_path / "cache", tmp_path) as lm:
        assert lm.generate([ask("paid for")], DRAW) == [["re: paid for"]]
    assert len(seen) == 2  # from the cache: not asked, not paid for again


def test_each_draw_of_a_pool_is_its_own_request_and_cached_reply(provider_server, tmp_path):
    url, seen = provider_server
    with hosted("claude-opus-4-8", url, tmp_path / "cache", tmp_path) as lm:
        for seed in (11, 12, 11):  # the pools' draw j of round r: seed + 1000 r + j
            lm.generate([ask("q")], GenerationParams(max_new_tokens=64, do_sample=True, seed=seed))
    assert len(seen) == 2 and seen[0][1] == seen[1][1]  # the same request twice: the seed is not sent


def test_the_api_key_is_in_no_log_cache_file_record_or_error(provider_server, tmp_path, caplog):
    url, seen = provider_server
    caplog.set_level(logging.DEBUG)  # the SDKs' and their HTTP clients' debug lines too
    replies, errors = [], []
    for name in ("gpt-5.6-terra", "claude-opus-4-8"):
        with hosted(name, url, tmp_path / "cache", tmp_path) as lm:
            replies.append(lm.generate_replies([ask("q"), ask("a long one")], DRAW))
            with pytest.raises(RuntimeError) as failed:
                lm.generate_replies([ask("echo")], DRAW)
            errors.append(str(failed.value))
    assert all(any(KEY in value for value in headers.values()) for _, _, headers in seen)  # it was sent
    assert "/v1/chat/completions" in caplog.text and "/v1/messages" in caplog.text  # the SDKs' lines were caught
    assert all(f"<value of ${KEY_ENV}>" in e for e in errors)  # the provider's echo of it, replaced
    shards = list((tmp_path / "cache").rglob("*.shard"))
    assert shards
    for where, text in [
        ("log", caplog.text),
        ("errors", "\n".join(errors)),
        ("replies", repr(replies)),
        *((str(f), f.read_text()) for f in shards),
    ]:
        assert KEY not in text, where


def test_a_bad_provider_or_request_fails_naming_the_key(provider_server, tmp_path):
    url, _ = provider_server
    gpt = shipped("gpt-5.6-terra", url)
    with pytest.raises(ValueError, match=r"^models\.gen\.provider: 'azure' is not a provider"):
        ModelSpec.from_config("gen", {**gpt, "provider": "azure"})
    with pytest.raises(ValueError, match=r"^models\.gen\.provider: applies to source 'openai'"):
        ModelSpec.from_config("gen", {"source": "hf", "id": "org/m", "provider": "openai"})
    with pytest.raises(ValueError, match=r"^models\.gen\.request: .* need 'provider'"):
        ModelSpec.from_config("gen", {**gpt, "provider": None})
    with pytest.raises(ValueError, match=r"^models\.gen\.request\.n: set by the client"):
        ModelSpec.from_config("gen", {**gpt, "request": {"n": 2}})
    with pytest.raises(ValueError, match=r"^models\.gen\.request\.max_tokens: the Anthropic Messages API needs"):
        ModelSpec.from_config("gen", {**shipped("claude-opus-4-8", url), "request": {"thinking": {"type": "adaptive"}}})
    # a name the SDK's create() does not take fails when the model opens, before any request
    with pytest.raises(ValueError, match=r"^models\.gen\.request\.temprature: not a parameter of openai-python"):
        HostedChatModel(
            name="gen",
            provider="openai",
            model="m",
            base_url=url,
            api_key_env=KEY_ENV,
            request={"temprature": 1.8},
            fingerprint="f",
            cache=None,
        )
    # at start-up the whole config is checked: the schema and the spec both name the key
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["models"]["gen"] = {**gpt, "provider": "azure"}
    config["paraphrase"]["test"]["generators"]["gen-a"] = {"model": "gen", "temperature": 1.8}
    errors = config_errors(config, REPO / "config/schema.yaml")
    assert [e for e in errors if e.startswith("models.gen")] == [
        "models.gen.provider: 'azure' is not a provider; use one of ['openai', 'anthropic'] (or leave it unset for "
        "an OpenAI-compatible server such as vLLM)"
    ]


def test_a_pool_stating_another_temperature_than_its_provider_model_sends_is_refused():
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["models"].update(OVERLAY["models"])
    config["paraphrase"]["test"]["generators"]["gen-a"] = {"model": "gpt-5.6-terra", "temperature": 1.8}
    assert not [e for e in config_errors(config) if e.startswith("paraphrase.")]
    config["paraphrase"]["test"]["generators"]["gen-a"]["temperature"] = 1.0
    assert [e for e in config_errors(config) if e.startswith("paraphrase.")] == [
        "paraphrase.test.generators.gen-a.temperature: 1.0, but models.gpt-5.6-terra.request.temperature sends 1.8 "
        "(a provider model is sent its request, not the pool's settings); set it to 1.8"
    ]


def test_the_request_timeout_follows_the_token_budget(provider_server, tmp_path):
    url, _ = provider_server
    assert request_timeout_s(16384) > request_timeout_s(1024) > request_timeout_s(0) > 0
    with hosted("claude-opus-4-8", url, None, tmp_path) as claude, hosted("gpt-5.6-terra", url, None, tmp_path) as gpt:
        assert claude.token_cap == 16384  # its request's max_tokens
        assert gpt.token_cap is None  # uncapped: the stage's max_new_tokens sizes its timeout


def test_provider_and_request_define_a_models_numbers_and_are_left_out_where_unset(provider_server):
    url, _ = provider_server
    local = ModelSpec.from_config("m", {"source": "hf", "id": "org/m"})
    assert not {"provider", "request"} & set(local.number_settings())  # what existing runs tracked, unchanged
    gpt = ModelSpec.from_config("gen", shipped("gpt-5.6-terra", url))
    hotter = ModelSpec.from_config("gen", {**shipped("gpt-5.6-terra", url), "request": {"temperature": 2.0}})
    assert gpt.number_settings()["request"] == {"reasoning_effort": "high", "temperature": 1.8}
    assert gpt.number_settings() != hotter.number_settings()  # another request reruns what used the model
