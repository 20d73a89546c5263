"""The merged configuration of a workflow run, kept beside its results so that a reader can rerun it.

The Snakefile's `onstart:` handler calls `write_run_config` once per run. Snakemake calls that handler only
when jobs are about to run: never in a dry run, never when there is nothing to be done, never inside the
jobs a cluster executor submits (they run with `--no-hooks`), so a run record means outputs were (re)made
under it. Each run gets `results/runs/<UTC start time>.yaml`, and `results/config.yaml` is a copy of the
latest one. Neither is any rule's input or output: writing them reruns nothing.

Each file is itself a config file: the configuration as the rules saw it (every overlay merged, `--config`
applied, the schema's defaults filled in), so `snakemake --configfile results/config.yaml` reruns with
exactly it. A header of `# <key>: <JSON>` comment lines (`read_run_header`) records when the run started,
the config files merged (in order) and `--config` values, the project and Snakemake versions, and the software
and hardware of the machine that started it (`provenance.software`). API keys
are never in a config (only the names of their variables); a secret value that reached one anyway is
replaced by its variable's name, as in every provenance record, and a value under a key-like name (`api_key`,
`hf_token`, ...) or an `api_key_env` that is no variable name is replaced by `<masked>` (masking.py): the
file then no longer reproduces those settings, which must be given again from where they are kept.
"""

from __future__ import annotations

import itertools
import json
import os
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

import yaml

from debate_audit.runtime.masking import masked
from debate_audit.runtime.provenance import project_version, software, without_secrets

RUNS = "runs"  # under the results folder: one file per run
LATEST = "config.yaml"  # under the results folder: the latest run's file
HEADER_KEYS = ("started", "configfiles", "config_overrides", "version", "snakemake", "software")


def _shown(path: str | Path) -> str:
    """A config file's path relative to the working directory when it is inside it, else absolute."""
    absolute = Path(path).absolute()
    return str(absolute.relative_to(Path.cwd())) if absolute.is_relative_to(Path.cwd()) else str(absolute)


def merge_order(configfiles: Sequence[str | Path], overlays: Sequence[str | Path]) -> list[str]:
    """The files in the order Snakemake merges them: the Snakefile's `configfile:` first, then the
    `--configfile` overlays as given (Snakemake lists the overlays first; a later file wins a key)."""
    given = [_shown(f) for f in overlays]
    return [f for f in map(_shown, configfiles) if f not in given] + given


def run_config_text(config: Mapping[str, Any], header: Mapping[str, Any]) -> str:
    lines = ["# The merged configuration of one debate-audit run, usable as it is: snakemake --configfile <this file>"]
    lines += [f"# {key}: {json.dumps(header[key], sort_keys=True)}" for key in HEADER_KEYS]
    return "\n".join(lines) + "\n" + yaml.safe_dump(dict(config), sort_keys=False, allow_unicode=True, width=120)


def read_run_header(path: str | Path) -> dict[str, Any]:
    """The `# <key>: <JSON>` header of a run config file as a dict."""
    header = {}
    for line in Path(path).read_text().splitlines():
        if not line.startswith("#"):
            break
        key, sep, value = line[1:].strip().partition(": ")
        if sep and key in HEADER_KEYS:
            header[key] = json.loads(value)
    return header


def write_run_config(
    config: Mapping[str, Any],
    *,
    configfiles: Sequence[str | Path],
    overlays: Sequence[str | Path],
    overrides: Mapping[str, Any],
    results: str | Path = "results",
    now: datetime | None = None,
) -> Path:
    """Write the run's file under `<results>/runs/` and copy it to `<results>/config.yaml`; return the former.

    `configfiles`: every config file Snakemake loaded (`workflow.configfiles`), `overlays` the `--configfile`
    ones among them, `overrides` the `--config` values.
    """
    started = (now or datetime.now(UTC)).astimezone(UTC)
    header = {
        "started": started.isoformat(timespec="seconds").replace("+00:00", "Z"),
        "configfiles": merge_order(configfiles, overlays),
        "config_overrides": masked(without_secrets(dict(overrides))),
        "version": project_version(),
        "snakemake": metadata.version("snakemake"),
        "software": software(),
    }
    text = run_config_text(masked(without_secrets(dict(config))), header)
    runs = Path(results) / RUNS
    runs.mkdir(parents=True, exist_ok=True)
    stamp = started.strftime("%Y-%m-%dT%H-%M-%SZ")
    for n in itertools.count(1):
        path = runs / (f"{stamp}.yaml" if n == 1 else f"{stamp}-{n}.yaml")  # -2: a second run in that second
        try:
            with path.open("x") as handle:
                handle.write(text)
            break
        except FileExistsError:
            continue
    latest = Path(results) / LATEST
    partial = latest.with_name(f".{latest.name}.{os.getpid()}.partial")
    partial.write_text(text)
    os.replace(partial, latest)  # a reader never sees half a file
    return path
