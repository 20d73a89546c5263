"""Served models: the OpenAI-compatible clients, the generation backends and how a spec picks them."""

from __future__ import annotations

import dataclasses
import json

import pytest
from conftest import json_server

from debate_audit.models import GenerationParams, ModelRef, ModelSpec, open_model
from debate_audit.models.serving import OpenAIChatModel, OpenAICompatibleBackend, Retry, post_json


@pytest.fixture
def server():
    """A local OpenAI-compatible server answering /completions and /chat/completions; records bodies."""
    seen: list[tuple[str, dict, str | None]] = []

    def respond(path, body, headers):
        seen.append((path, body, headers.get("Authorization")))
        n = body.get("n", 1)
        if path.endswith("/chat/completions"):
            last = body["messages"][-1]["content"]
            choices = [{"index": k, "message": {"content": f" {last}#{k} "}} for k in range(n)]
        else:
            choices = [{"index": k, "text": f" {body['prompt'][-12:]}#{k}"} for k in range(n)]
        return 200, {}, {"choices": choices[::-1]}

    with json_server(respond) as url:
        yield url, seen


def test_completions_backend_posts_rendered_prompts_and_orders_choices(server):
    url, seen = server
    backend = OpenAICompatibleBackend(url, "m", concurrency=2)
    greedy = backend.complete(["p1", "p2"], GenerationParams(max_new_tokens=5))
    sampled = backend.complete(["p3"], GenerationParams(max_new_tokens=5, do_sample=True, num_samples=2, seed=3))
    assert greedy == [["p1#0"], ["p2#0"]]
    assert sampled == [["p3#0", "p3#1"]]
    by_prompt = {body["prompt"]: body for _, body, _ in seen}
    assert by_prompt["p1"]["temperature"] == 0.0 and by_prompt["p1"]["max_tokens"] == 5
    assert by_prompt["p3"]["seed"] == 3 and by_prompt["p3"]["n"] == 2


def test_chat_model_caches_replies_and_keeps_the_key_out_of_the_cache(server, tmp_path, monkeypatch):
    url, seen = server
    monkeypatch.setenv("TEST_SERVING_KEY", "sk-secret-value")
    chat = OpenAIChatModel(base_url=url, model="m", api_key_env="TEST_SERVING_KEY", fingerprint="fp",
                           cache=str(tmp_path / "c.sqlite"))
    convs = [[{"role": "user", "content": f"q{i}"}] for i in range(3)]
    params = GenerationParams(max_new_tokens=8, do_sample=True, num_samples=2, seed=1)
    assert chat.generate(convs, params) == [[f"q{i}#0", f"q{i}#1"] for i in range(3)]
    assert chat.generate(convs, params) == [[f"q{i}#0", f"q{i}#1"] for i in range(3)]
    chat.close()
    assert len(seen) == 3  # the second call was all cache hits
    assert all(auth == "Bearer sk-secret-value" for _, _, auth in seen)
    stored = b"".join(f.read_bytes() for f in (tmp_path / "c.sqlite").rglob("*") if f.is_file())  # cache dir
    assert stored and b"sk-secret" not in stored
    with pytest.raises(NotImplementedError, match="cannot score"):
        chat.choice_logprobs(["x"], [" A"])


def test_chat_model_names_the_missing_key_variable(server, monkeypatch):
    url, _ = server
    monkeypatch.delenv("TEST_SERVING_MISSING", raising=False)
    chat = OpenAIChatModel(base_url=url, model="m", api_key_env="TEST_SERVING_MISSING", fingerprint="fp", cache=None)
    with pytest.raises(RuntimeError, match="TEST_SERVING_MISSING"):
        chat.generate([[{"role": "user", "content": "q"}]], GenerationParams(max_new_tokens=4))


def test_spec_validates_the_generation_backend():
    base = {"source": "local", "path": "/x"}
    assert ModelSpec.from_config("m", base).generation_backend == "local"
    with pytest.raises(ValueError, match="needs the key 'base_url'"):
        ModelSpec.from_config("m", {**base, "generation_backend": "server"})
    with pytest.raises(ValueError, match="local, vllm or server"):
        ModelSpec.from_config("m", {**base, "generation_backend": "tgi"})


def test_a_reference_travels_through_params_unchanged():
    spec = ModelSpec.from_config("m", {"source": "hf", "id": "org/m", "batch_size": "auto", "dtype": "bfloat16",
                                       "generation_backend": "server", "base_url": "http://h/v1",
                                       "api_key_env": "M_KEY", "revision": "abc"})
    ref = ModelRef.from_spec(spec, "resources/models/m")
    params = ref.to_params()
    assert ModelRef.from_params(params) == ref
    assert params["directory"] == "resources/models/m" and params["api_key_env"] == "M_KEY"
    assert "revision" not in params  # preparation only
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['model_dir'\]"):
        ModelRef.from_params({**params, "model_dir": "x"})


def test_a_remote_chat_model_generates_and_refuses_to_score(server, tmp_path):
    url, _ = server
    (tmp_path / "fingerprint.json").write_text(json.dumps({"name": "remote", "weights_sha256": "ef" * 32}))
    ref = ModelRef("remote", str(tmp_path), source="openai", id="served-name", base_url=url)
    with open_model(ref, cache=tmp_path / "c.sqlite") as lm:
        assert lm.generate([[{"role": "user", "content": "q"}]], GenerationParams(max_new_tokens=4)) == [["q#0"]]
        with pytest.raises(NotImplementedError, match="'served-name' .* cannot score"):
            lm.choice_logprobs(["x"], [" A", " B"])
        with pytest.raises(NotImplementedError, match="rendered by its server"):
            lm.render_chat([{"role": "user", "content": "q"}])


@pytest.mark.slow
def test_server_backend_generates_for_a_local_model_and_shares_its_cache(server, embedded_ref, tmp_path):
    url, seen = server
    cache = tmp_path / "c.sqlite"
    served = dataclasses.replace(embedded_ref, generation_backend="server", base_url=url)
    conv = [[{"role": "user", "content": "Say hi."}]]
    with open_model(served, cache=cache) as lm:
        prompt = lm.render_chat(conv[0])
        out = lm.generate(conv, GenerationParams(max_new_tokens=6))
    assert out == [[(" " + prompt[-12:] + "#0").strip()]]
    assert seen[0][1]["prompt"] == prompt and seen[0][1]["model"] == embedded_ref.directory
    # The in-process model finds the server's reply under the same key: the backend is not in the key.
    with open_model(embedded_ref, cache=cache) as local:
        assert local.generate(conv, GenerationParams(max_new_tokens=6)) == out


@pytest.fixture
def flaky_server():
    """A server that answers each POST from a script of (status, headers) before a 200; records attempts."""
    script: list[tuple[int, dict[str, str]]] = []
    attempts: list[str | None] = []

    def respond(path, body, headers):
        attempts.append(headers.get("Authorization"))
        status, extra = script.pop(0) if script else (200, {})
        return status, extra, {"choices": [{"index": 0, "text": "ok"}]} if status == 200 else {"error": "busy"}

    with json_server(respond) as url:
        yield url, script, attempts


FAST = Retry(attempts=4, backoff_s=0.01, max_wait_s=0.05)


def test_throttling_and_overload_are_retried_until_an_answer(flaky_server, monkeypatch, caplog):
    url, script, attempts = flaky_server
    monkeypatch.setenv("TEST_SERVING_KEY", "sk-never-logged")
    script.extend([(503, {}), (429, {"Retry-After": "0"}), (502, {})])
    with caplog.at_level("WARNING"):
        reply = post_json(url + "/completions", {"prompt": "p"}, api_key_env="TEST_SERVING_KEY", timeout=5, retry=FAST)
    assert reply["choices"][0]["text"] == "ok"
    assert len(attempts) == 4 and set(attempts) == {"Bearer sk-never-logged"}
    assert [r.getMessage().split(": ")[1].split(" (")[0] for r in caplog.records] == ["HTTP 503", "HTTP 429", "HTTP 502"]
    assert "sk-never-logged" not in caplog.text


def test_a_client_error_fails_at_once_and_a_lasting_outage_after_the_last_attempt(flaky_server):
    url, script, attempts = flaky_server
    script.append((400, {}))
    with pytest.raises(RuntimeError, match=r"HTTP 400 .* after 1 attempt"):
        post_json(url + "/completions", {}, api_key_env=None, timeout=5, retry=FAST)
    script.extend([(503, {})] * 4)
    with pytest.raises(RuntimeError, match=r"HTTP 503 .* after 4 attempt"):
        post_json(url + "/completions", {}, api_key_env=None, timeout=5, retry=FAST)
    assert len(attempts) == 5


def test_a_refused_connection_is_retried_then_named():
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(RuntimeError, match=r"after 2 attempt"):
        post_json(f"http://127.0.0.1:{port}/v1/completions", {}, api_key_env=None, timeout=2,
                  retry=Retry(attempts=2, backoff_s=0.01))
