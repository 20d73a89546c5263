"""Pin the hub models of a config file to commits: every `source: hf` model whose `revision` is a branch or
tag (or absent: the default branch) gets the commit that revision points to now, written into the file.

    python -m debate_audit.models.pins config/paper.yaml          # rewrite its revisions, print what changed
    python -m debate_audit.models.pins --check config/paper.yaml  # list the unpinned ones; exit 1 if any

Only the `revision:` lines change (comments and layout stay; the branch name is kept in a comment), so the
edit reads as a diff. A paper run on an unpinned model warns at start-up (`unpinned_warnings`): two runs
months apart could otherwise audit different weights under one config. The hub is reached through
huggingface_hub (HF_ENDPOINT, HF_TOKEN for gated models).
"""

from __future__ import annotations

import argparse
import datetime
import re
import sys
from collections.abc import Callable, Iterable
from pathlib import Path

import yaml

from .spec import ModelSpec

COMMIT = re.compile(r"[0-9a-f]{40}")


def is_pinned(revision: str | None) -> bool:
    return revision is not None and COMMIT.fullmatch(revision) is not None


def unpinned(models: dict) -> dict[str, str | None]:
    """name -> revision of the `source: hf` entries of a `models:` mapping that are not pinned to a commit."""
    return {
        name: (entry or {}).get("revision")
        for name, entry in models.items()
        if (entry or {}).get("source") == "hf" and not is_pinned((entry or {}).get("revision"))
    }


def unpinned_warnings(specs: Iterable[ModelSpec]) -> list[str]:
    """A warning per used hub model whose revision is a branch or tag, not a commit."""
    return [
        f"models.{spec.name}: revision {spec.revision or 'main'!r} of {spec.id} is a branch or tag, not a "
        "commit: a later run can download other weights (its fingerprint.json records the commit it got). "
        "Pin it: python -m debate_audit.models.pins <config file>"
        for spec in specs
        if spec.source == "hf" and not is_pinned(spec.revision)
    ]


def hub_commit(repo_id: str, revision: str | None) -> str:
    """The commit `revision` (None: the default branch) of a hub model points to now."""
    from huggingface_hub import HfApi

    return HfApi().repo_info(repo_id, revision=revision).sha


def pin_file(path: str | Path, resolve: Callable[[str, str | None], str] = hub_commit) -> dict[str, tuple]:
    """Rewrite the unpinned hub revisions of the config file at `path`; returns name -> (old, commit)."""
    path = Path(path)
    text = path.read_text()
    models = (yaml.safe_load(text) or {}).get("models") or {}
    todo = unpinned(models)
    if not todo:
        return {}
    pins = {name: (revision, resolve(models[name]["id"], revision)) for name, revision in todo.items()}
    path.write_text(_rewrite(text, pins))
    return pins


def _rewrite(text: str, pins: dict[str, tuple]) -> str:
    """Set `revision:` of each pinned model in the block-style `models:` section of a YAML text. A comment on
    the line stays; a line without one gets the branch and the date it pointed to the commit."""
    out, section, model, indent, done = [], False, None, None, set()
    today = datetime.date.today().isoformat()
    for line in text.splitlines(keepends=True):
        content = line.split("#", 1)[0].rstrip()
        depth = len(line) - len(line.lstrip(" "))
        if content.strip():
            if depth == 0:
                section, model, indent = content.startswith("models:"), None, None
            elif section and indent in (None, depth) and content.endswith(":"):
                indent, model = depth, content.strip()[:-1].strip("'\"")
                out.append(line)
                continue
        if section and model in pins and model not in done:
            old, commit = pins[model]
            match = re.match(r"^(\s*)revision:[^#\n]*(#[^\n]*)?(\n?)$", line)
            if match:
                comment = match.group(2) or f"# {old} on {today}"
                out.append(f"{match.group(1)}revision: {commit}  {comment.strip()}{match.group(3)}")
                done.add(model)
                continue
            if old is None and re.match(r"^\s*id:", line):
                out.append(line if line.endswith("\n") else line + "\n")
                out.append(f"{' ' * depth}revision: {commit}  # default branch on {today}\n")
                done.add(model)
                continue
        out.append(line)
    missing = sorted(set(pins) - done)
    if missing:
        raise ValueError(
            f"models {missing}: no block-style `revision:` or `id:` line to pin (flow-style entries "
            "such as {source: hf, id: ...} are not rewritten; write them as blocks)"
        )
    return "".join(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="config files whose hub models to pin (e.g. config/paper.yaml)")
    parser.add_argument("--check", action="store_true", help="only list unpinned models; exit 1 if there are any")
    args = parser.parse_args(argv)
    found = False
    for file in args.files:
        models = (yaml.safe_load(Path(file).read_text()) or {}).get("models") or {}
        if args.check:
            for name, revision in unpinned(models).items():
                found = True
                print(f"{file}: models.{name} ({models[name].get('id')}) at {revision or 'the default branch'}")
            continue
        for name, (old, commit) in pin_file(file).items():
            print(f"{file}: models.{name}: {old or 'default branch'} -> {commit}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
