"""Content ids of the prompts, filters and selection rules a rule's output depends on.

A rule passes `rule_id(name, ...)` as a param: the id is a hash of the prompt texts and of the source code
of the functions that filter, select or compute, so editing any of them reruns exactly the rules that use
it (Snakemake's params trigger) and nothing else, without hand-bumped version strings. The CW-POR side does
the same with its template text (`cwpor.prompts.template_id`).
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Callable
from typing import Any


def _text(part: Any) -> str:
    if callable(part):
        return inspect.getsource(part)
    if isinstance(part, str):
        return part
    return json.dumps(part, sort_keys=True, ensure_ascii=False, default=str)


def rule_id(name: str, *parts: str | Callable | Any) -> str:
    """`name:<12 hex>`: sha256 over the texts / function sources / JSON of `parts`, in order."""
    digest = hashlib.sha256()
    for part in parts:
        text = _text(part).encode("utf-8")
        digest.update(len(text).to_bytes(8, "big"))
        digest.update(text)
    return f"{name}:{digest.hexdigest()[:12]}"
