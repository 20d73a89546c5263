"""What a rule's output depends on in the library, as one hash a rule can carry in its params.

Snakemake's `code` rerun trigger sees a rule's script, not the library modules the script imports, so an
edited prompt or function body inside `debate_audit` would leave stale outputs behind. `code_fingerprint`
follows the script's imports through the package (statically, by reading the sources) and hashes every
module it reaches; the rules put it in `params`, so the params trigger reruns exactly the rules whose
code changed, and their descendants. Importing from a package whose `__init__` resolves names lazily
(`from debate_audit.models import X`) counts as depending on the whole package.
"""

from __future__ import annotations

import ast
import functools
import hashlib
from pathlib import Path

PACKAGE = "debate_audit"
ROOT = Path(__file__).resolve().parent


def _lazy(init: Path) -> bool:
    """A package `__init__` with a module-level `__getattr__` may hand out any of its submodules' names."""
    tree = ast.parse(init.read_text(), filename=str(init))
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
        return sorted(base.rglob("*.py")) if _lazy(init) else [init]
    if base.with_suffix(".py").exists():
        return [base.with_suffix(".py")]
    return []


def _module_name(path: Path, root: Path) -> str:
    rel = path.relative_to(root).with_suffix("")
    parts = [PACKAGE, *rel.parts]
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path, root: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    here = _module_name(path, root) if path.is_relative_to(root) else ""
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
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
    return {n for n in names if n.split(".")[0] == PACKAGE}


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
