"""Your own dataset: a pairs file with the QuALITY-H / GPQA-H fields and each pair's context inline ->
data/<name>.parquet (config `datasets.own`), audited with models you bring (`audited_models`).

One JSON object per pair, in a JSON array (as the release's pairs files) or one per line (JSON lines), plain
or gzip-compressed:

    {"story_title": str, "context": str,
     "Q_Y": {"question": str, "Y_true": str, "Y_false": str},
     "Q_H": {"question": str, "H_true": str, "H_false": str},
     "domain": str or null}              # optional

Every field is type-checked per row: a row that is not an object, a line that is not JSON, a missing,
non-string or empty field goes to the rejected-rows file naming the field and its value, as do the
release loader's pair checks (a question whose true and false answers are one text, Q_H equal to Q_Y, the
same item as an earlier row). Fields the schema does not know are left out and named in the log. A pair's
`pair_id` is its 0-based row (every non-blank line of a JSON lines file is a row), so fixing a rejected row
keeps the others' ids. There is no train/eval split: no verifier of this workflow trained on these pairs.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import Any

import polars as pl

from .io import DataError, read_text, write_parquet, write_rejected
from .pairs import FIELDS, PAIRS_SCHEMA, item_key, pair_defect, same_item

log = logging.getLogger(__name__)

# The row's own fields beside the release's (FIELDS: Q_Y / Q_H); `domain` may be null or absent.
TEXT_FIELDS = ("story_title", "context")
KNOWN_FIELDS = {*TEXT_FIELDS, "domain", *(group for group, _ in FIELDS.values())}
SHOWN = 80  # characters of a bad value quoted in its reason


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    kind = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}.get(
        type(value), "number"
    )
    return f"{text if len(text) <= SHOWN else text[:SHOWN] + '...'} ({kind})"


def _text(value: Any, field: str) -> tuple[str | None, str | None]:
    """(the stripped text, None) or (None, why `value` of `field` is not a non-empty string)."""
    if not isinstance(value, str):
        return None, f"field {field!r}: expected a non-empty string, got {_shown(value)}"
    if not value.strip():
        return None, f"field {field!r}: empty string"
    return value.strip(), None


def check_row(item: Any) -> tuple[dict | None, str | None]:
    """(the pair with the output's field names, None) or (None, the first field that is wrong and why)."""
    if not isinstance(item, dict):
        return None, f"not a JSON object: {_shown(item)}"
    record: dict[str, Any] = {}
    for field in TEXT_FIELDS:
        if field not in item:
            return None, f"field {field!r} is missing"
        record[field], why = _text(item[field], field)
        if why:
            return None, why
    for ours, (group, key) in FIELDS.items():
        name = f"{group}.{key}"
        if group not in item:
            return None, f"field {group!r} is missing"
        if not isinstance(item[group], dict):
            return None, f"field {group!r}: expected an object, got {_shown(item[group])}"
        if key not in item[group]:
            return None, f"field {name!r} is missing"
        record[ours], why = _text(item[group][key], name)
        if why:
            return None, why
    domain = item.get("domain")
    if domain is not None and not isinstance(domain, str):
        return None, f"field 'domain': expected a string or null, got {_shown(domain)}"
    record["domain"] = (domain.strip() or None) if isinstance(domain, str) else None
    return record, None


def read_rows(location: str | Path) -> list[tuple[Any, str | None]]:
    """(parsed row, None) or (None, why the row is no JSON) per row of a JSON array or JSON lines file."""
    text = read_text(location, "JSON")
    if text.lstrip().startswith("{") and len([line for line in text.splitlines() if line.strip()]) > 1:
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None
        if isinstance(whole, dict):
            raise DataError(
                f"{location}: one JSON object over several lines; a pairs file is a JSON array of pairs or "
                "one pair per line (JSON lines)"
            )
    if text.lstrip().startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            raise DataError(f"{location}: not valid JSON ({err})") from err
        return [(item, None) for item in data]
    rows: list[tuple[Any, str | None]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append((json.loads(line), None))
        except json.JSONDecodeError as err:
            rows.append((None, f"line {number} is not valid JSON ({err.msg} at column {err.colno})"))
    return rows


def prepare_own_pairs(pairs: str | Path, dataset: str, out: str | Path, rejected: str | Path) -> pl.DataFrame:
    """Check every row of `pairs`, write the kept ones (PAIRS_SCHEMA, `dataset` its name under
    `datasets.own`) to `out` and the others with their reasons to `rejected`."""
    where = str(pairs)
    rows = read_rows(pairs)
    if not rows:
        raise DataError(f"{where}: no pairs (an empty array or file)")
    unknown = Counter(
        field for item, _ in rows if isinstance(item, dict) for field in item if field not in KNOWN_FIELDS
    )
    for field, count in sorted(unknown.items()):
        log.warning("%s: field %r of %d row(s) is not a pair field; left out", dataset, field, count)
    kept, bad = [], []
    items: dict[tuple[str, str, str], dict] = {}
    for row, (item, why) in enumerate(rows):
        record = None
        if why is None:
            record, why = check_row(item)
        if record is not None:
            why = pair_defect(record)
        if why is None and item_key(record, record["context"]) in items:
            why = same_item(items[item_key(record, record["context"])])
        if why is not None:
            title = item.get("story_title") if isinstance(item, dict) else None
            bad.append({"file": where, "row": row, "key": title if isinstance(title, str) else "", "reason": why})
            continue
        kept.append({"pair_id": row, "dataset": dataset, **record})
        items[item_key(record, record["context"])] = kept[-1]
    write_rejected(bad, rejected)
    for r in bad:
        log.warning("%s: row %d %r rejected: %s", dataset, r["row"], r["key"], r["reason"])
    if not kept:
        raise DataError(f"{where}: no valid rows ({len(bad)} rejected, each with its reason in {rejected})")
    frame = pl.DataFrame(kept, schema=PAIRS_SCHEMA)
    write_parquet(frame, PAIRS_SCHEMA, out)
    log.info("%s: %d pairs kept, %d rejected (%s)", dataset, frame.height, len(bad), where)
    return frame
