"""Opening a local path or URL, gzip or plain, and writing Parquet with its schema checked."""

from __future__ import annotations

import gzip
import io
import json
import urllib.request
from pathlib import Path
from typing import Any

import polars as pl


class DataError(ValueError):
    """A dataset file is missing or malformed; the message names the file, row and field."""


def read_bytes(location: str | Path) -> bytes:
    location = str(location)
    if location.startswith(("http://", "https://")):
        with urllib.request.urlopen(location, timeout=120) as response:  # noqa: S310 (user-configured URL)
            data = response.read()
    else:
        path = Path(location)
        if not path.exists():
            raise DataError(f"{path}: file not found")
        data = path.read_bytes()
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data


def read_text(location: str | Path) -> str:
    return read_bytes(location).decode("utf-8-sig")


def read_json(location: str | Path) -> Any:
    try:
        return json.loads(read_text(location))
    except json.JSONDecodeError as err:
        raise DataError(f"{location}: not valid JSON ({err})") from err


def read_jsonl(location: str | Path) -> list[dict]:
    rows = []
    for number, line in enumerate(io.StringIO(read_text(location)), start=1):
        if not line.strip():
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError as err:
            raise DataError(f"{location}: line {number} is not valid JSON ({err})") from err
    return rows


def check_schema(frame: pl.DataFrame, schema: dict[str, pl.DataType], where: str) -> pl.DataFrame:
    """Select the schema's columns in order, cast, and fail naming any missing column."""
    missing = [c for c in schema if c not in frame.columns]
    if missing:
        raise DataError(f"{where}: missing column(s) {missing}")
    return frame.select([pl.col(c).cast(t) for c, t in schema.items()])


def write_parquet(frame: pl.DataFrame, schema: dict[str, pl.DataType], out: str | Path, where: str = "") -> None:
    frame = check_schema(frame, schema, where or str(out))
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(out)


REJECTED_SCHEMA = {
    "row": pl.Int64,  # 0-based index of the record in its source file
    "key": pl.Utf8,  # a human-readable identifier (title, question) of the record
    "reason": pl.Utf8,  # why the record is not in the main output
}


def write_rejected(rows: list[dict], out: str | Path) -> None:
    frame = pl.DataFrame(rows, schema=REJECTED_SCHEMA) if rows else pl.DataFrame(schema=REJECTED_SCHEMA)
    write_parquet(frame, REJECTED_SCHEMA, out)
