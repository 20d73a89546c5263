"""Named runs: where the files that depend on a run's configuration go.

Config key `run` unset (null): the paths as they always were (results/, logs/, benchmarks/rules/, data/,
resources/verifiers/). Set to NAME: the same paths under runs/NAME/, so two configurations keep their
results side by side. What does not depend on the configuration stays shared by every run: the prepared
models (resources/models/<name>, keyed by their spec) and the model-call cache (config key `cache`, keyed by
call). rules/paths.smk builds every path from `run_root`; `make compare` (compare.py) reads a run's
results through `results_dir`.
"""

from __future__ import annotations

import re
from pathlib import Path

RUNS = "runs"
NAME = re.compile(r"[A-Za-z0-9._-]+")
# What `make compare` (compare.py) calls the unnamed run; so no named run may take it.
DEFAULT = "default"


def name_error(name: object) -> str | None:
    """Why `name` cannot name a run (config key `run`), or None."""
    if name is None:
        return None
    # YAML, and Snakemake's --config, read run=7 as a number
    if isinstance(name, int | float) and not isinstance(name, bool):
        return f"run: {name!r} is a number, not a name: quote it in YAML (run: '{name}'), or use a letter in it"
    if not isinstance(name, str) or not NAME.fullmatch(name):
        return f"run: {name!r} is not a plain name (letters, digits, '.', '_', '-'), or leave it null"
    if set(name) == {"."}:  # runs/.. is the project folder, whose results/ is the unnamed run's
        return f"run: {name!r} is a path, not a name"
    if name == DEFAULT:
        return f"run: {DEFAULT!r} is how make compare names the unnamed run (results/); leave run null for it"
    return None


def run_root(name: str | None) -> str:
    """The prefix of a run's paths: "" for the unnamed run, else "runs/<name>/"."""
    error = name_error(name)
    if error:
        raise ValueError(error)
    return f"{RUNS}/{name}/" if name else ""


def results_dir(name: str) -> Path:
    """The results folder of run `name`, the unnamed run's as `default` (or "")."""
    return Path(run_root(None if name in (DEFAULT, "") else name)) / "results"
