"""After `make prefetch`, only the downloading rules may reach the hub: every other job runs offline."""

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

from debate_audit.runtime.job import DOWNLOADING_RULES, OFFLINE_ENV, rule_context

REPO = Path(__file__).resolve().parents[1]


def test_the_downloading_rules_are_the_workflows_prepare_rules_and_make_prefetch_runs_them():
    rules = {
        m.group(1) for f in (REPO / "rules").glob("*.smk") for m in re.finditer(r"^rule (\w+):", f.read_text(), re.M)
    }
    # your own pairs are a local file (data/own_pairs.py reads no URL): that prepare rule runs offline too
    assert DOWNLOADING_RULES == {r for r in rules if r.startswith("prepare_")} - {"prepare_own_pairs"}
    makefile = (REPO / "Makefile").read_text()
    prefetch = makefile[makefile.index("\nprefetch:") :].split("\n\n")[0]
    assert all(rule in prefetch for rule in DOWNLOADING_RULES)


def fake_job(rule, tmp_path):
    return SimpleNamespace(
        rule=rule,
        log=[str(tmp_path / f"{rule}.log")],
        params=SimpleNamespace(items=lambda: []),
        wildcards=SimpleNamespace(items=lambda: []),
    )


def test_a_model_job_runs_with_the_hub_offline_and_a_prepare_job_may_download(tmp_path, monkeypatch):
    for key in OFFLINE_ENV:
        monkeypatch.delenv(key, raising=False)
    with rule_context(fake_job("prepare_model", tmp_path)):
        assert not any(key in os.environ for key in OFFLINE_ENV)
    with rule_context(fake_job("verifier_evaluate", tmp_path)):
        assert {key: os.environ.get(key) for key in OFFLINE_ENV} == OFFLINE_ENV
        # a download in such a job fails at once, saying the hub is offline (no cached copy: a fresh cache)
        code = "from huggingface_hub import hf_hub_download; hf_hub_download('gpt2', 'config.json')"
        done = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=60,
            env={**os.environ, "HF_HOME": str(tmp_path / "hf")},
        )
        assert done.returncode != 0 and "offline" in done.stderr.lower(), done.stderr[-2000:]
    assert not any(key in os.environ for key in OFFLINE_ENV)  # and afterwards as it was


def test_gpt_oss_gets_its_harmony_vocabulary_at_prepare_time_and_its_engine_reads_it_from_there(tmp_path, monkeypatch):
    import http.server
    import threading

    from debate_audit.models import serving
    from debate_audit.models.prepare import fetch_harmony_encoding, file_sha256
    from debate_audit.models.serving import VLLMServer

    (tmp_path / "www").mkdir()
    (tmp_path / "www" / "o200k_base.tiktoken").write_bytes(b"IQ== 0\nIg== 1\n")
    handler = lambda *a, **k: http.server.SimpleHTTPRequestHandler(*a, directory=str(tmp_path / "www"), **k)  # noqa: E731
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        model = tmp_path / "gpt-oss-20b"
        model.mkdir()
        record = fetch_harmony_encoding(model, f"http://127.0.0.1:{server.server_port}/o200k_base.tiktoken")
    finally:
        server.shutdown()
    fetched = model / "harmony" / "o200k_base.tiktoken"
    assert fetched.read_bytes() == b"IQ== 0\nIg== 1\n"
    assert record["harmony_encoding"]["sha256"] == file_sha256(fetched)
    monkeypatch.setattr(serving, "vllm_distribution", lambda python: ("vllm", "0.32.0"))
    env = VLLMServer(model, name="gpt-oss-20b", dtype="bfloat16", device="cuda").environment()
    assert env["TIKTOKEN_ENCODINGS_BASE"] == str(fetched.parent.resolve()) and env["HF_HUB_OFFLINE"] == "1"
    other = VLLMServer(tmp_path / "www", name="m", dtype="bfloat16", device="cuda").environment()
    assert "TIKTOKEN_ENCODINGS_BASE" not in other or other["TIKTOKEN_ENCODINGS_BASE"] == os.environ.get(
        "TIKTOKEN_ENCODINGS_BASE"
    )
