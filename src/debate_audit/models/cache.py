"""Content-hash cache of model calls, persisted as results arrive.

SQLite in WAL mode: each batch commits on its own, so a killed job keeps every finished batch, and two
Snakemake jobs can write the same file at once (writers queue on the database lock).
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any


def cache_key(fingerprint: str, dtype: str, operation: str, prompt: str, params: dict[str, Any]) -> str:
    """sha256 over everything the result depends on; `prompt` is the fully rendered text."""
    payload = json.dumps(
        {"model": fingerprint, "dtype": dtype, "op": operation, "prompt": prompt, "params": params},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


class CallCache:
    def __init__(self, path: str | Path | None):
        self.path = Path(path) if path is not None else None
        self.hits = 0
        self.misses = 0
        self._conn: sqlite3.Connection | None = None
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=600, isolation_level=None)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS calls (key TEXT PRIMARY KEY, op TEXT, value TEXT, created REAL)"
            )

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        keys = list(dict.fromkeys(keys))
        found: dict[str, Any] = {}
        if self._conn is not None:
            for start in range(0, len(keys), 500):
                chunk = keys[start : start + 500]
                marks = ",".join("?" * len(chunk))
                for key, value in self._conn.execute(f"SELECT key, value FROM calls WHERE key IN ({marks})", chunk):
                    found[key] = json.loads(value)
        self.hits += len(found)
        self.misses += len(keys) - len(found)
        return found

    def put_many(self, op: str, items: dict[str, Any]) -> None:
        if self._conn is None or not items:
            return
        now = time.time()
        rows = [(key, op, json.dumps(value), now) for key, value in items.items()]
        with self._conn:  # one transaction per batch
            self._conn.execute("BEGIN IMMEDIATE")
            self._conn.executemany("INSERT OR REPLACE INTO calls VALUES (?, ?, ?, ?)", rows)

    def summary(self) -> str:
        total = self.hits + self.misses
        return f"cache {self.path}: {self.hits} hits, {self.misses} misses of {total} unique calls"

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
