"""Hosted models through their providers' SDKs (models/api.py): what each provider receives, as the real SDK
builds it against a local server, and what is kept of each reply."""

from __future__ import annotations

import copy
import json
import logging
import math
import re
from pathlib import Path

import pytest
import yaml
from conftest import json_server

from debate_audit.models import GenerationParams, ModelRef, ModelSpec, open_model
from debate_audit.models.api import EndpointChatModel, request_timeout_s
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
        EndpointChatModel(
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


# ---------------------------------------------------------------------------------- scoring through an endpoint
def top(*pairs: tuple[str, float]) -> list[dict]:
    """The first reply token's top log-probabilities as OpenAI's chat completions return them."""
    return [{"token": t, "logprob": lp, "bytes": list(t.encode())} for t, lp in pairs]


# what the scoring server returns, keyed by the word that starts the question: both letters among the top-k,
# and B outside it (its mass all but spent by the top 3: the bound is the log of what they leave)
TOP = {
    "both": top(("A", -0.2), (" B", -1.9), ("The", -3.0)),
    "missing": top(("A", -0.05), ("**", -3.5), ("The", -4.0)),
}
GPT_CHAT = {"source": "openai", "provider": "openai", "id": "gpt-4.1-mini", "request": {"temperature": 0.0}}


@pytest.fixture
def scoring_server():
    """/v1/chat/completions: a request asking for logprobs gets its first token's top log-probabilities from
    TOP (keyed by the first word of the question), one without them a judge's reply; /v1/messages (Anthropic)
    a judge's reply. Records every request (path, body)."""
    seen: list[tuple[str, dict]] = []

    def respond(path, body, headers):
        seen.append((path, body))
        question = body["messages"][-1]["content"].split("Question: ")[-1]
        reply = "Rationale: the first answer is right.\nFinal Answer: Answer A\nConfidence: 4"
        if path.endswith("/messages"):
            content = [{"type": "text", "text": reply}]
            usage = {"input_tokens": 50, "output_tokens": 20}
            return (
                200,
                {},
                {
                    "id": "m",
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": content,
                    "stop_reason": "end_turn",
                    "usage": usage,
                },
            )
        choice = {"index": 0, "message": {"role": "assistant", "content": reply}, "finish_reason": "stop"}
        if body.get("logprobs"):
            tops = TOP[question.split()[0]]
            first = {**tops[0], "top_logprobs": tops}
            choice = {**choice, "message": {"role": "assistant", "content": first["token"]}, "finish_reason": "length"}
            choice["logprobs"] = {"content": [first]}
        usage = {"prompt_tokens": 80, "completion_tokens": 1, "total_tokens": 81}
        return (
            200,
            {},
            {
                "id": "c",
                "object": "chat.completion",
                "created": 1,
                "model": body["model"],
                "choices": [choice],
                "usage": usage,
            },
        )

    with json_server(respond) as url:
        yield url, seen


def endpoint(name: str, entry: dict, url: str, tmp_path: Path, cache: Path | None):
    """The endpoint model `entry`, opened as a workflow job opens it."""
    base = url if entry.get("provider") != "anthropic" else url.removesuffix("/v1")
    spec = ModelSpec.from_config(name, {**entry, "base_url": base, "api_key_env": KEY_ENV})
    directory = tmp_path / "models" / name
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "fingerprint.json").write_text(json.dumps({"name": name, "weights_sha256": "cd" * 32}))
    return open_model(ModelRef.from_spec(spec, directory), cache=cache)


def test_a_label_outside_the_top_k_gets_the_bound_the_top_k_implies():
    from math import log

    from debate_audit.models.api import label_scores

    # B absent, the top-3 leaving 0.1: below both the k-th (0.2) and what is left (0.1)
    got = label_scores([("A", log(0.4)), ("x", log(0.3)), ("y", log(0.2))], [" A", " B"])
    assert got.logprobs == pytest.approx([log(0.4), log(0.1)]) and got.bounded == [False, True]
    # the top-3 leaving 0.4: the k-th (0.05) is the tighter bound
    got = label_scores([("A", log(0.5)), ("x", log(0.05)), ("y", log(0.05))], [" A", " B"])
    assert got.logprobs == pytest.approx([log(0.5), log(0.05)]) and got.bounded == [False, True]
    # "A" and " A" both spell the label: the likelier one is its first token; whitespace never matters
    got = label_scores([(" A", log(0.3)), ("A", log(0.5)), ("B\n", log(0.1))], [" A", " B"])
    assert got.logprobs == pytest.approx([log(0.5), log(0.1)]) and not got.any_bounded


def test_a_hosted_chat_model_is_asked_for_one_letter_and_its_first_tokens_top_logprobs(scoring_server, tmp_path):
    from debate_audit.models.api import ONE_LETTER, TOP_LOGPROBS

    url, seen = scoring_server
    convs = [[{"role": "system", "content": "Judge."}, {"role": "user", "content": f"Question: {q} x?"}] for q in TOP]
    with endpoint("gpt-judge", GPT_CHAT, url, tmp_path, tmp_path / "cache") as lm:
        assert lm.no_logprobs is None
        scores = lm.choice_scores([lm.scoring_prompt(c, "Answer:") for c in convs], [" A", " B"])
    assert [s.bounded for s in scores] == [[False, False], [False, True]]
    assert scores[0].logprobs == pytest.approx([-0.2, -1.9])
    rest = 1 - sum(math.exp(t["logprob"]) for t in TOP["missing"])
    assert scores[1].logprobs == pytest.approx([-0.05, math.log(rest)])
    assert {path for path, _ in seen} == {"/v1/chat/completions"} and len(seen) == 2
    (body,) = [body for _, body in seen if "both" in body["messages"][-1]["content"]]
    asked = [convs[0][0], {"role": "user", "content": "Question: both x?\n\n" + ONE_LETTER.format(letters="A or B")}]
    # the spec's request (temperature), one token and its top log-probabilities; no token cap of the stage
    assert body == {
        "model": "gpt-4.1-mini",
        "messages": asked,
        "temperature": 0.0,
        "max_completion_tokens": 1,
        "logprobs": True,
        "top_logprobs": TOP_LOGPROBS,
    }
    with endpoint("gpt-judge", GPT_CHAT, url, tmp_path, tmp_path / "cache") as lm:  # from the cache, flags too
        assert lm.choice_scores([lm.scoring_prompt(c, "Answer:") for c in convs], [" A", " B"]) == scores
        with pytest.raises(ValueError, match=r"1 of 2 prompts have a label outside the endpoint's top 20"):
            lm.choice_logprobs([lm.scoring_prompt(c) for c in convs], [" A", " B"])  # no flag: refused
    assert len(seen) == 2
    records = [line for f in (tmp_path / "cache").rglob("*.shard") for line in f.read_text().splitlines()[1:]]
    assert len(records) == 2 and all(KEY not in r for r in records)


def test_an_openai_compatible_server_is_sent_the_scoring_request_in_the_apis_own_names(scoring_server, tmp_path):
    url, seen = scoring_server
    served = {"source": "openai", "id": "org/served-model"}
    conv = [{"role": "user", "content": "Question: both x?"}]
    with endpoint("served", served, url, tmp_path, None) as lm:
        (score,) = lm.choice_scores([lm.scoring_prompt(conv, "Answer:")], [" A", " B"])
    assert score.logprobs == pytest.approx([-0.2, -1.9])
    ((_, body),) = seen
    assert {k: v for k, v in body.items() if k != "messages"} == {
        "model": "org/served-model",
        "max_tokens": 1,
        "temperature": 0.0,
        "logprobs": True,
        "top_logprobs": 20,
    }


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        (OVERLAY["models"]["claude-opus-4-8"], r"models\.m\.provider is anthropic"),
        (OVERLAY["models"]["gpt-5.6-terra"], r"models\.m\.request\.reasoning_effort is 'high'"),
        ({**GPT_CHAT, "logprobs": False}, r"models\.m\.logprobs is false"),
    ],
)
def test_an_endpoint_without_logprobs_is_refused_before_any_request(scoring_server, tmp_path, entry, reason):
    url, seen = scoring_server
    with endpoint("m", entry, url, tmp_path, None) as lm:
        assert re.search(reason, lm.no_logprobs)
        with pytest.raises(RuntimeError, match=rf"^models\.m cannot score answer labels: {reason}"):
            lm.choice_scores([lm.scoring_prompt([{"role": "user", "content": "Question: both"}])], [" A", " B"])
    assert seen == []


def test_an_endpoint_without_logprobs_fails_at_start_up_naming_the_key():
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["models"]["claude"] = {**OVERLAY["models"]["claude-opus-4-8"], "api_key_env": KEY_ENV}
    config["verifier"]["base_models"] = ["claude"]
    assert [e for e in config_errors(config, REPO / "config/schema.yaml") if "log-probabilities" in e] == [
        "verifier.base_models[0]: model 'claude' cannot score answers, which needs log-probabilities: "
        "models.claude.provider is anthropic, whose Messages API returns no log-probabilities"
    ]
    # as a CW-POR judge it is taken (judging by its text, without LLC), with a template of one free reply
    config = yaml.safe_load((REPO / "config/config.yaml").read_text())
    config["models"]["claude"] = {**OVERLAY["models"]["claude-opus-4-8"], "api_key_env": KEY_ENV}
    config["cwpor"]["judge_model"] = "claude"
    assert [e for e in config_errors(config) if e.startswith("cwpor.")] == [
        "cwpor.judge_template: 'v4' prefills the judge's reply slot by slot, which a chat endpoint cannot "
        "continue (judge(s) ['claude'], source openai); use a template with one free reply (paper, v1)"
    ]
    config["cwpor"]["judge_template"] = "paper"
    assert config_errors(config, REPO / "config/schema.yaml") == []
