"""Type and value checks of the fields a loader reads, worded the same way in every loader.

A row whose field is wrong goes to the stage's rejected rows with the reason these functions return (the
field's name and its value); a field that no record of a file has is the file's shape, not a row's mistake,
and stops the rule naming the file and the field (`require_somewhere`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .io import DataError

MISSING = object()  # a field the record does not have (None is a value: JSON null)


def shown(value: Any, limit: int = 60) -> str:
    """A value as a reason shows it: its type and a shortened repr."""
    text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(value).__name__} {text}" if value is not None else "null"


def lookup(record: Any, path: Sequence[str]) -> Any:
    """The value at `path` (keys of nested objects), MISSING where an object or the key is absent."""
    value = record
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return MISSING
        value = value[key]
    return value


def text_error(name: str, value: Any, *, empty_ok: bool = False) -> str | None:
    """Why `value` is not a (non-empty) text, naming field `name`; None when it is one."""
    if value is MISSING:
        return f"field {name!r} is missing"
    if not isinstance(value, str):
        return f"field {name!r} is {shown(value)}, not text"
    if not empty_ok and not value.strip():
        return f"field {name!r} is empty"
    return None


def text_list_error(name: str, value: Any) -> str | None:
    """Why `value` is not a list of non-empty texts, naming field `name` (and the item)."""
    if value is MISSING:
        return f"field {name!r} is missing"
    if not isinstance(value, list):
        return f"field {name!r} is {shown(value)}, not a list of texts"
    for i, item in enumerate(value):
        error = text_error(f"{name}[{i}]", item)
        if error:
            return error
    return None


def int_error(name: str, value: Any, *, minimum: int | None = 0) -> str | None:
    """Why `value` is not an integer (>= minimum), naming field `name`. A JSON true is no index."""
    if value is MISSING:
        return f"field {name!r} is missing"
    if isinstance(value, bool) or not isinstance(value, int):
        return f"field {name!r} is {shown(value)}, not an integer"
    if minimum is not None and value < minimum:
        return f"field {name!r} is {value}, below {minimum}"
    return None


def choice_error(name: str, value: Any, allowed: Iterable[str]) -> str | None:
    """Why `value` is not one of `allowed`, naming field `name`: every other value is refused, none read
    as the remaining case."""
    allowed = list(allowed)
    if value is MISSING:
        return f"field {name!r} is missing"
    if not isinstance(value, str) or value not in allowed:
        return f"field {name!r} is {shown(value)}, not one of {allowed}"
    return None


def first_error(*errors: str | None) -> str | None:
    return next((e for e in errors if e), None)


def require_somewhere(records: Sequence[Any], fields: dict[str, Callable[[Any], Any]], where: str, kind: str) -> None:
    """Stop naming the file and the field when no record has a field every record needs: a file of another
    shape (another dataset, a renamed key), not a file with a few bad rows. `fields`: name -> getter
    returning MISSING where a record has no such field."""
    if not records:
        return
    for name, get in fields.items():
        if all(get(record) is MISSING for record in records):
            raise DataError(f"{where}: no record has field {name!r}: not a {kind} file ({len(records)} records)")
