"""Served models: the OpenAI-compatible client (the `openai` SDK), the generation backends and how a spec
picks them."""

from __future__ import annotations

import dataclasses
import json

import pytest
from conftest import json_server

from debate_audit.models import GenerationParams, ModelRef, ModelSpec, open_model
from debate_audit.models.api import EndpointChatModel
from debate_audit.models.params import hit_cap
from debate_audit.models.serving import CompletionsBackend


def chat_model(url: str, cache, api_key_env: str | None = None, model: str = "m", fingerprint: str = "fp"):
    """A model behind an OpenAI-compatible server (no provider), as `open_model` makes one."""
    return EndpointChatModel(
        name="served",
        provider=None,
        model=model,
        base_url=url,
        api_key_env=api_key_env,
        request=None,
        fingerprint=fingerprint,
        cache=None if cache is None else str(cache),
    )


@pytest.fixture
def server(tmp_path):
    """A local OpenAI-compatible server: /chat/completions echoes the last message; /completions answers a
    prompt of token ids with its last two ids and the sample index (vLLM's `token_ids`); /models serves
    `served` (its `root`, a prepared directory), /version says 0.0-test. Records every request."""
    seen: list[tuple[str, dict, str | None]] = []
    served = tmp_path / "served-model"
    served.mkdir()
    (served / "fingerprint.json").write_text(json.dumps({"name": "m", "weights_sha256": "ab" * 32}))

    def respond(path, body, headers):
        seen.append((path, body or {}, headers.get("Authorization")))
        if body is None:  # GET
            if path.endswith("/models"):
                return (
                    200,
                    {},
                    {"data": [{"id": "other", "root": str(tmp_path)}, {"id": "served", "root": str(served)}]},
                )
            return 200, {}, {"version": "0.0-test"}
        n = body.get("n", 1)
        if path.endswith("/chat/completions"):
            last = body["messages"][-1]["content"]
            # a message asking for a "long" reply stops at max_tokens (finish_reason "length")
            finish = "length" if "long" in last else "stop"
            choices = [{"index": k, "message": {"content": f" {last}#{k} "}, "finish_reason": finish} for k in range(n)]
        else:
            choices = [{"index": k, "text": "ignored", "token_ids": [*body["prompt"][-2:], k]} for k in range(n)]
        return 200, {}, {"choices": choices[::-1]}

    with json_server(respond) as url:
        yield url, seen, served


def test_completions_backend_sends_token_ids_to_the_server_of_the_prepared_directory(server):
    url, seen, served = server
    backend = CompletionsBackend(url, served, concurrency=2)
    got: list[dict] = []
    backend.complete([[1, 2, 3], [4, 5]], GenerationParams(max_new_tokens=5), stop_ids=[0], on_finished=got.append)
    backend.complete(
        [[6, 7]],
        GenerationParams(max_new_tokens=5, do_sample=True, num_samples=2, seed=3),
        stop_ids=[0],
        on_finished=got.append,
    )
    assert got[0] == {0: [[2, 3, 0]], 1: [[4, 5, 0]]} and got[1] == {0: [[6, 7, 0], [6, 7, 1]]}
    assert backend.served == "served" and backend.describe() == "server (vllm 0.0-test)"
    posts = [body for path, body, _ in seen if path.endswith("/completions")]
    by_prompt = {tuple(body["prompt"]): body for body in posts}
    assert by_prompt[(1, 2, 3)]["temperature"] == 0.0 and by_prompt[(1, 2, 3)]["max_tokens"] == 5
    assert by_prompt[(1, 2, 3)]["stop_token_ids"] == [0] and by_prompt[(1, 2, 3)]["model"] == "served"
    assert by_prompt[(6, 7)]["seed"] == 3 and by_prompt[(6, 7)]["n"] == 2


def test_completions_backend_refuses_a_server_of_other_weights(server, tmp_path):
    url, _, _ = server
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "fingerprint.json").write_text(json.dumps({"name": "m", "weights_sha256": "cd" * 32}))
    with pytest.raises(RuntimeError, match=r"does not serve the prepared model .*elsewhere.*vllm serve"):
        CompletionsBackend(url, elsewhere).check()


def test_completions_backend_hands_over_each_finished_group_and_keeps_them_when_a_request_fails(server):
    url, _, served = server
    backend = CompletionsBackend(url, served, concurrency=2, max_retries=0)
    original = backend._one

    def failing_last(prompt, params, stop_ids):
        if prompt == [99]:
            raise RuntimeError("HTTP 400 from the server")
        return original(prompt, params, stop_ids)

    backend._one = failing_last
    got: list[dict] = []
    with pytest.raises(RuntimeError, match="HTTP 400"):
        backend.complete(
            [[i, i] for i in range(1, 6)] + [[99]],
            GenerationParams(max_new_tokens=2),
            stop_ids=[],
            on_finished=got.append,
        )
    assert {i for group in got for i in group} == {0, 1, 2, 3, 4}
    assert all(1 <= len(group) <= 2 for group in got[:-1])


def test_chat_model_caches_replies_and_keeps_the_key_out_of_the_cache(server, tmp_path, monkeypatch):
    url, seen, _ = server
    monkeypatch.setenv("TEST_SERVING_KEY", "sk-secret-value")
    chat = chat_model(url, tmp_path / "c.sqlite", api_key_env="TEST_SERVING_KEY")
    convs = [[{"role": "user", "content": f"q{i}"}] for i in range(3)]
    params = GenerationParams(max_new_tokens=8, do_sample=True, num_samples=2, seed=1)
    assert chat.generate(convs, params) == [[f"q{i}#0", f"q{i}#1"] for i in range(3)]
    assert chat.generate(convs, params) == [[f"q{i}#0", f"q{i}#1"] for i in range(3)]
    chat.close()
    assert len(seen) == 3  # the second call was all cache hits
    assert all(auth == "Bearer sk-secret-value" for _, _, auth in seen)
    stored = b"".join(f.read_bytes() for f in (tmp_path / "c.sqlite").rglob("*") if f.is_file())  # cache dir
    assert stored and b"sk-secret" not in stored
    with pytest.raises(TypeError, match="renders its own chat template"):
        chat.choice_logprobs(["x"], [" A"])  # rendered text: it has no template of its own to render


def test_chat_model_names_the_missing_key_variable(server, monkeypatch):
    url, _, _ = server
    monkeypatch.delenv("TEST_SERVING_MISSING", raising=False)
    chat = chat_model(url, None, api_key_env="TEST_SERVING_MISSING")
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
    spec = ModelSpec.from_config(
        "m",
        {
            "source": "hf",
            "id": "org/m",
            "batch_size": "auto",
            "dtype": "bfloat16",
            "generation_backend": "server",
            "base_url": "http://h/v1",
            "api_key_env": "M_KEY",
            "revision": "abc",
        },
    )
    ref = ModelRef.from_spec(spec, "resources/models/m")
    params = ref.to_params()
    assert ModelRef.from_params(params) == ref
    assert params["directory"] == "resources/models/m" and params["api_key_env"] == "M_KEY"
    assert "revision" not in params  # preparation only
    with pytest.raises(ValueError, match=r"unknown field\(s\) \['model_dir'\]"):
        ModelRef.from_params({**params, "model_dir": "x"})


def test_a_remote_chat_model_generates_and_has_no_local_template(server, tmp_path):
    url, _, _ = server
    (tmp_path / "fingerprint.json").write_text(json.dumps({"name": "remote", "weights_sha256": "ef" * 32}))
    ref = ModelRef("remote", str(tmp_path), source="openai", id="served-name", base_url=url)
    with open_model(ref, cache=tmp_path / "c.sqlite") as lm:
        assert lm.generate([[{"role": "user", "content": "q"}]], GenerationParams(max_new_tokens=4)) == [["q#0"]]
        with pytest.raises(TypeError, match=r"models\.remote \(served-name\) renders its own chat template"):
            lm.choice_logprobs(["x"], [" A", " B"])
        with pytest.raises(NotImplementedError, match="rendered by its endpoint"):
            lm.render_chat([{"role": "user", "content": "q"}])


def test_a_remote_reply_cut_at_its_token_cap_says_so_and_keeps_saying_so_from_the_cache(server, tmp_path):
    url, seen, _ = server
    model = chat_model(url, tmp_path / "c", model="served", fingerprint="f")
    convs = [[{"role": "user", "content": "a long one"}], [{"role": "user", "content": "short"}]]
    params = GenerationParams(max_new_tokens=4)
    first = model.generate_replies(convs, params)
    assert [[(r.text, r.cut) for r in rs] for rs in first] == [[("a long one#0", True)], [("short#0", False)]]
    model.close()
    again = chat_model(url, tmp_path / "c", model="served", fingerprint="f")
    calls = len(seen)
    assert again.generate_replies(convs, params) == first and len(seen) == calls  # from the cache
    assert again.generate(convs, params) == [["a long one#0"], ["short#0"]]
    again.close()


def test_a_token_cap_is_hit_by_a_full_length_reply_without_its_stop_token():
    assert hit_cap([5, 6, 7], 3, [0]) is True
    assert hit_cap([5, 6, 0], 3, [0]) is False  # a server keeps the stop token it stopped at
    assert hit_cap([5, 6], 3, [0]) is False  # the in-process loop leaves it out: ended before the cap
    assert hit_cap([], 0, [0]) is True  # a zero budget can only be cut


@pytest.mark.slow
def test_server_backend_sends_the_rendered_token_ids_and_keeps_its_results_apart(server, embedded_ref, tmp_path):
    url, seen, _ = server
    cache = tmp_path / "cache"
    # a server for the embedded model's directory (the fake reports it as its `root`)
    served = dataclasses.replace(embedded_ref, generation_backend="server", base_url=url)
    conv = [[{"role": "user", "content": "Say hi."}]]
    with open_model(served, cache=cache) as lm:
        lm.generation_backend.served = "served"  # the fake serves another directory: skip its check
        ids = lm._encode(lm.render_chat(conv[0]))
        out = lm.generate(conv, GenerationParams(max_new_tokens=6))
        assert lm._model is None  # generating through a server loads no weights
        # the reply as generate returns it: decoded, its answer read (chat.py), stripped
        expected = [lm._final(lm.render_chat(conv[0]), lm._decode([ids[-2:] + [0]]))]
    (body,) = [b for path, b, _ in seen if path.endswith("/completions")]
    assert body["prompt"] == ids and body["return_token_ids"] is True
    assert out == expected
    # the in-process loop does not take the server's reply: another engine, another cache namespace
    with open_model(embedded_ref, cache=cache) as local:
        assert local.generate(conv, GenerationParams(max_new_tokens=6)) != out
    records = [
        json.loads(line.split("\t", 3)[3]) for f in cache.rglob("*.shard") for line in f.read_text().splitlines()[1:]
    ]
    assert sorted(r["engine"].split(" ")[0] for r in records) == ["in-process", "server"]


@pytest.fixture
def flaky_server(tmp_path):
    """A server that answers each POST from a script of (status, headers) before a 200 (a chat completion
    of "ok"); records the Authorization header of every attempt."""
    script: list[tuple[int, dict[str, str]]] = []
    attempts: list[str | None] = []

    def respond(path, body, headers):
        attempts.append(headers.get("Authorization"))
        status, extra = script.pop(0) if script else (200, {})
        if status != 200:
            return status, extra, {"error": {"message": "busy"}}
        message = {"role": "assistant", "content": "ok"}
        return 200, {}, {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}

    with json_server(respond) as url:
        yield url, script, attempts


# the SDK honours a server's retry-after-ms: the retries of these tests wait milliseconds
SOON = {"retry-after-ms": "5"}
Q = [[{"role": "user", "content": "q"}]]


def test_throttling_and_overload_are_retried_until_an_answer(flaky_server, monkeypatch, caplog):
    url, script, attempts = flaky_server
    monkeypatch.setenv("TEST_SERVING_KEY", "sk-never-logged")
    script.extend([(503, SOON), (429, SOON), (502, SOON)])
    chat = chat_model(url, None, api_key_env="TEST_SERVING_KEY")
    with caplog.at_level("DEBUG"):
        assert chat.generate(Q, GenerationParams(max_new_tokens=4)) == [["ok"]]
    chat.close()
    assert len(attempts) == 4 and set(attempts) == {"Bearer sk-never-logged"}
    assert caplog.text.count("Retrying request in") == 3  # the SDK's own retry lines
    assert "sk-never-logged" not in caplog.text


def test_a_client_error_fails_at_once_and_a_lasting_outage_after_the_last_retry(flaky_server):
    url, script, attempts = flaky_server
    chat = chat_model(url, None)
    script.append((400, {}))
    with pytest.raises(RuntimeError, match=r"BadRequestError.*busy"):
        chat.generate(Q, GenerationParams(max_new_tokens=4))
    assert len(attempts) == 1  # a 400 is not retried
    script.extend([(503, SOON)] * 8)  # the first try and the SDK's 7 retries (api.MAX_RETRIES)
    with pytest.raises(RuntimeError, match=r"InternalServerError"):
        chat.generate([[{"role": "user", "content": "another"}]], GenerationParams(max_new_tokens=4))
    assert len(attempts) == 1 + 8
    chat.close()


def test_a_refused_connection_is_retried_then_named():
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    backend = CompletionsBackend(f"http://127.0.0.1:{port}/v1", "unused", max_retries=1)
    with pytest.raises(RuntimeError, match=r"models\.model: the server at .*APIConnectionError"):
        backend.check()
