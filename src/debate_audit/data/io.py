"""Opening a local path or URL, gzip or plain, and writing Parquet with its schema checked and the run's
provenance in its key-value metadata (`debate_audit.runtime.provenance.read_provenance` reads it back)."""

from __future__ import annotations

import gzip
import io
import json
import logging
import urllib.request
import zlib
from pathlib import Path
from typing import Any

import polars as pl

from debate_audit.runtime.provenance import PROVENANCE_KEY, provenance_text

log = logging.getLogger(__name__)

URL_SCHEMES = ("http", "https")


class DataError(ValueError):
    """A dataset file is missing or malformed; the message names the file, row and field."""


def url_scheme(location: str) -> str | None:
    """The scheme of a URL ("https"), or None for a local path."""
    head, sep, _ = location.partition("://")
    return head.lower() if sep and head.replace("+", "").replace("-", "").replace(".", "").isalnum() else None


def check_location(location: str | Path) -> None:
    """Fail on a URL the loaders cannot fetch, naming its scheme (instead of a mangled 'file not found')."""
    scheme = url_scheme(str(location))
    if scheme is None or scheme in URL_SCHEMES:
        return
    if scheme == "file":
        raise DataError(
            f"{location}: file:// URLs are not supported; give the local path itself "
            f"({str(location)[len('file://') :]!r})"
        )
    raise DataError(f"{location}: URL scheme {scheme!r} is not supported; use http(s) or a local path")


def read_bytes(location: str | Path) -> bytes:
    location = str(location)
    check_location(location)
    if url_scheme(location) is not None:
        with urllib.request.urlopen(location, timeout=120) as response:  # noqa: S310 (user-configured URL)
            data = response.read()
    else:
        path = Path(location)
        if not path.exists():
            raise DataError(f"{path}: file not found")
        if path.is_dir():
            raise DataError(f"{path}: is a directory, not a file")
        try:
            data = path.read_bytes()
        except OSError as err:
            raise DataError(f"{path}: cannot be read ({err.strerror or err})") from err
    if data[:2] == b"\x1f\x8b":
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as err:
            raise DataError(
                f"{location}: starts like gzip but does not decompress ({err}); a truncated download?"
            ) from err
    elif location.lower().endswith(".gz"):
        # Readable, but a sign of a mislabelled or already-decompressed file: say so.
        log.warning("%s: named .gz but not gzip-compressed; reading it as plain text", location)
    return data


def read_text(location: str | Path, kind: str = "text") -> str:
    """The file as text; binary content fails as 'not a <kind> file' instead of being parsed."""
    return decode_text(read_bytes(location), str(location), kind)


def decode_text(data: bytes, where: str, kind: str = "text") -> str:
    if b"\x00" in data[:65536]:
        raise DataError(f"{where}: not a {kind} file (binary content)")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise DataError(f"{where}: not a {kind} file (not UTF-8 text: {err})") from err


def read_json(location: str | Path, object_pairs_hook: Any = None) -> Any:
    try:
        return json.loads(read_text(location, "JSON"), object_pairs_hook=object_pairs_hook)
    except json.JSONDecodeError as err:
        raise DataError(f"{location}: not valid JSON ({err})") from err


def parse_jsonl(text: str, where: str) -> list[tuple[int, Any]]:
    """(1-based line number, record) of every non-blank line of a JSON lines text."""
    rows = []
    for number, line in enumerate(io.StringIO(text), start=1):
        if not line.strip():
            continue
        try:
            rows.append((number, json.loads(line)))
        except json.JSONDecodeError as err:
            raise DataError(f"{where}: line {number} is not valid JSON ({err})") from err
    return rows


def read_jsonl_lines(location: str | Path) -> list[tuple[int, Any]]:
    return parse_jsonl(read_text(location, "JSON lines"), str(location))


def read_jsonl(location: str | Path) -> list[Any]:
    return [record for _, record in read_jsonl_lines(location)]


def check_schema(frame: pl.DataFrame, schema: dict[str, pl.DataType], where: str) -> pl.DataFrame:
    """Select the schema's columns in order, cast, and fail naming any missing column."""
    missing = [c for c in schema if c not in frame.columns]
    if missing:
        raise DataError(f"{where}: missing column(s) {missing}")
    return frame.select([pl.col(c).cast(t) for c, t in schema.items()])


def write_parquet(frame: pl.DataFrame, schema: dict[str, pl.DataType], out: str | Path, where: str = "") -> None:
    frame = check_schema(frame, schema, where or str(out))
    out = Path(out)
    if out.is_dir():
        raise DataError(f"{out}: a directory is where this output file should be; move it aside and rerun")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        frame.write_parquet(out, metadata={PROVENANCE_KEY: provenance_text()})
    except OSError as err:
        raise DataError(f"{out}: cannot write this output ({err.strerror or err})") from err


def read_parquet(path: str | Path) -> pl.DataFrame:
    """A Parquet input, failing with its path (a directory, an unreadable or a corrupt file)."""
    path = Path(path)
    if path.is_dir():
        raise DataError(f"{path}: is a directory, not a Parquet file; move it aside and rerun")
    try:
        return pl.read_parquet(path)
    except (OSError, pl.exceptions.ComputeError) as err:
        raise DataError(f"{path}: cannot be read as Parquet ({err}); delete it so the workflow rebuilds it") from err


REJECTED_SCHEMA = {
    "file": pl.Utf8,  # the source file (path or URL) the record came from
    "row": pl.Int64,  # 0-based index of the record in its source file
    "key": pl.Utf8,  # a human-readable identifier (title, question) of the record
    "reason": pl.Utf8,  # why the record is not in the main output
}


def write_rejected(rows: list[dict], out: str | Path) -> None:
    frame = pl.DataFrame(rows, schema=REJECTED_SCHEMA) if rows else pl.DataFrame(schema=REJECTED_SCHEMA)
    write_parquet(frame, REJECTED_SCHEMA, out)


def no_valid_rows(where: str, rejected_count: int, rejected_out: str | Path) -> DataError:
    """The error for a dataset of which nothing is usable: later stages must not run on nothing."""
    return DataError(f"{where}: no valid rows ({rejected_count} rejected, each with its reason in {rejected_out})")
