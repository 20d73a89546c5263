"""Content-hash cache of model calls, safe on a shared (network) filesystem, persisted batch by batch.

Layout: the configured `cache` path is a directory. Each writing process appends to its own shard,
`<cache>/<namespace>/<host>.<pid>.<time>.<random>.shard`, created with O_EXCL on its first write, and
never opens any other file for writing. The namespace is the model fingerprint, so a lookup reads only the
shards of its own model; it reads them all, read-only, and never writes, locks or repairs them. No two
processes, on one host or many, ever write the same file, so nothing depends on file locking, which
network filesystems (NFS, Lustre without flock) do not provide reliably.

Why append-only text shards and not one SQLite file per job: SQLite's WAL mode needs shared memory and
does not work over a network filesystem at all, and its rollback-journal mode is unsafe for exactly the
case that matters here: a job killed mid-transaction leaves a hot journal, and the next reader must either
write the shard (roll it back, from another host, while it cannot know whether the writer is dead) or fail
on it. An append-only file has no journal and no in-place update: whatever a reader sees is a prefix of
what the writer appended, possibly ending in a partial record.

Shard format: a header line, then one line per call, written one whole batch per `write` and fsync'd
(so other nodes see it, and a killed job loses at most the batch it was computing):

    debate-audit call cache shard v1\t<json: namespace, host, pid, created>\n
    <crc32 hex>\t<key>\t<op>\t<json value>\n        crc32 over everything after the first tab

A reader keeps an index key -> (shard, offset, length) and, on every lookup, reads only the bytes appended
since its last look. A last line without its newline is a record still being written (or the tail of a
killed job): left for the next look. A complete line whose checksum fails is a torn or corrupt record: it
is skipped with a warning naming the shard and the byte offset, and that call is recomputed. Skipping, not
stopping, is deliberate: a cached value is only a saved computation, and the run's numbers are the same
without it, whereas a hard error would stop every job of that model over one bad record (a network
filesystem can also briefly show an unflushed region of a live shard as NUL bytes). A file that is not a
shard at all (wrong header) is skipped the same way, named in the log.

Hard errors (`CacheError`, naming the path and what to do) remain for what prevents the cache from working:
a cache directory that cannot be created or written, the `cache` path being an old single-file SQLite
cache, and a corrupt legacy SQLite file.

Legacy: the earlier cache was one SQLite file (`results/cache/model_calls.sqlite`). Moved into the cache
directory (`<cache>/*.sqlite`), such a file is read as a read-only legacy shard for every model (opened
immutable: no lock, no journal, never written); new results go to new shards.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import secrets
import socket
import sqlite3
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

MAGIC = b"debate-audit call cache shard v1"
SHARD_SUFFIX = ".shard"
DEFAULT_NAMESPACE = "shared"
_SQL_CHUNK = 500


class CacheError(RuntimeError):
    """The cache cannot be used; the message names the path and what to do."""


def cache_key(fingerprint: str, dtype: str, operation: str, prompt: str, params: dict[str, Any]) -> str:
    """sha256 over everything the result depends on; `prompt` is the fully rendered text."""
    payload = json.dumps(
        {"model": fingerprint, "dtype": dtype, "op": operation, "prompt": prompt, "params": params},
        sort_keys=True,
        ensure_ascii=False,
    )
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()


def namespace_dir_name(namespace: str) -> str:
    """A safe directory name for a namespace (a weights sha256 passes unchanged; an API model name like
    `org/model@rev` is cleaned and suffixed with a hash of the original). Two namespaces sharing a directory
    would only make lookups read more shards: keys are full hashes, so results never mix."""
    safe = re.sub(r"[^A-Za-z0-9_-]+", "_", namespace).strip("_")[:64]
    if safe != namespace:
        safe = f"{safe or 'ns'}-{hashlib.sha256(namespace.encode('utf-8')).hexdigest()[:8]}"
    return safe


def _encode_record(key: str, op: str, value: Any) -> bytes:
    body = b"\t".join((key.encode("ascii"), op.encode("utf-8"), json.dumps(value, ensure_ascii=False).encode("utf-8")))
    return b"%08x\t%s\n" % (zlib.crc32(body), body)


@dataclass
class _Shard:
    path: Path
    consumed: int = 0  # bytes indexed so far: always the end of a complete line
    skip: bool = False  # not a shard (bad header): ignored from then on
    bad_records: int = 0


@dataclass
class _Index:
    shards: list[_Shard] = field(default_factory=list)
    by_path: dict[Path, int] = field(default_factory=dict)
    where: dict[str, tuple[int, int, int]] = field(default_factory=dict)  # key -> (shard, offset, length)


class CallCache:
    """`get_many` / `put_many` over a directory of shards; `path=None` caches nothing.

    `namespace`: the model fingerprint (weights sha256, or an API model's name and revision); shards of
    one namespace live in one subdirectory, and a lookup reads only those (and legacy `*.sqlite` files).
    """

    def __init__(self, path: str | Path | None, namespace: str | None = None):
        self.path = Path(path) if path is not None else None
        self.namespace = namespace or DEFAULT_NAMESPACE
        self.hits = 0
        self.misses = 0
        self.shard_path: Path | None = None  # this instance's own shard, created on the first put_many
        self._fd: int | None = None
        self._index = _Index()
        self._legacy: dict[Path, sqlite3.Connection] = {}
        if self.path is None:
            return
        self.dir = self.path / namespace_dir_name(self.namespace)
        if self.path.is_file():
            raise CacheError(self._old_file_message(self.path))
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise CacheError(
                f"cache directory {self.dir} cannot be created ({err.strerror or err}); "
                f"check the config key `cache` ({self.path}) and that the directory is writable"
            ) from err
        # Fail before any model work, not after the first batch: root passes os.access anyway, and
        # put_many reports a failed create with the same advice.
        if not os.access(self.dir, os.W_OK | os.X_OK):
            raise CacheError(self._unwritable_message(PermissionError("permission denied")))
        old = self.path.with_name(self.path.name + ".sqlite")
        if old.is_file():
            log.warning(
                "cache: %s (an old single-file cache) is not read; move it into %s/ to reuse its results",
                old,
                self.path,
            )

    # ------------------------------------------------------------------ messages
    @staticmethod
    def _old_file_message(path: Path) -> str:
        with open(path, "rb") as f:
            is_sqlite = f.read(16) == b"SQLite format 3\x00"
        what = "a single-file SQLite cache of an earlier version" if is_sqlite else "a file, not a directory"
        return (
            f"cache {path} is {what}; the cache is now a directory of per-job shards (config key `cache`, "
            f"e.g. results/cache/model_calls). To reuse its results: mkdir -p DIR && mv {path} DIR/ "
            f"(read as a read-only legacy shard), then set `cache: DIR`; or move it aside and the run recomputes"
        )

    def _unwritable_message(self, err: OSError) -> str:
        return (
            f"cache directory {self.dir} is not writable ({err.strerror or err}): unable to create this job's "
            f"shard. Fix its permissions, or point the config key `cache` elsewhere (or move {self.path} aside); "
            f"the run then recomputes what is not cached"
        )

    # ------------------------------------------------------------------ reading
    def _refresh(self) -> None:
        """Index the bytes appended to every shard of the namespace since the last look."""
        try:
            names = sorted(p for p in self.dir.iterdir() if p.name.endswith(SHARD_SUFFIX))
        except OSError as err:
            raise CacheError(
                f"cache directory {self.dir} cannot be listed ({err.strerror or err}); check its permissions"
            ) from err
        index = self._index
        for path in names:
            if path not in index.by_path:
                index.by_path[path] = len(index.shards)
                index.shards.append(_Shard(path))
        for number, shard in enumerate(index.shards):
            if not shard.skip:
                self._scan(number, shard)
        for path in sorted(self.path.glob("*.sqlite")):
            if path not in self._legacy:
                self._legacy[path] = self._open_legacy(path)

    def _scan(self, number: int, shard: _Shard) -> None:
        try:
            with open(shard.path, "rb") as f:
                f.seek(shard.consumed)
                data = f.read()
        except FileNotFoundError:  # moved aside while we run: its entries read as misses
            return
        except OSError as err:
            log.warning("cache shard %s unreadable (%s); skipped, its calls are recomputed", shard.path, err)
            return
        end = data.rfind(b"\n") + 1  # anything after is a record still being written
        if end == 0:
            return
        start = 0
        if shard.consumed == 0:
            first = data.index(b"\n")
            if not data.startswith(MAGIC):
                shard.skip = True
                log.warning(
                    "cache: %s is not a cache shard (bad header); skipped. Move it out of %s", shard.path, self.dir
                )
                return
            start = first + 1
        base, where, bad_at = shard.consumed, self._index.where, []
        while start < end:
            stop = data.index(b"\n", start)
            line = data[start:stop]
            body = line[9:]
            parts = body.split(b"\t", 2)
            if len(line) < 10 or line[8:9] != b"\t" or len(parts) != 3 or line[:8] != b"%08x" % zlib.crc32(body):
                bad_at.append(base + start)
            else:
                key = parts[0].decode("ascii")
                if key not in where:  # the first shard (in name order) to hold a key serves it
                    offset = start + 9 + len(parts[0]) + len(parts[1]) + 2
                    where[key] = (number, base + offset, stop - offset)
            start = stop + 1
        shard.consumed = base + end
        if bad_at:
            shard.bad_records += len(bad_at)
            log.warning(
                "cache shard %s: %d unreadable record(s) (torn or corrupt; first at byte %d) skipped, their calls "
                "are recomputed. If this repeats, move the shard aside.",
                shard.path,
                len(bad_at),
                bad_at[0],
            )

    def _open_legacy(self, path: Path) -> sqlite3.Connection:
        try:
            # immutable: no locks, no -wal/-shm, no journal rollback; the file is never written.
            conn = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro&immutable=1", uri=True)
            conn.execute("SELECT key, value FROM calls LIMIT 1").fetchall()
        except sqlite3.DatabaseError as err:
            raise CacheError(self._legacy_message(path, err)) from err
        log.info("cache: reading legacy single-file cache %s (read-only)", path)
        return conn

    @staticmethod
    def _legacy_message(path: Path, err: Exception) -> str:
        return f"legacy cache file {path} cannot be read ({err}); move it aside (e.g. mv {path} {path}.bad) and rerun: the run recomputes its calls"

    def get_many(self, keys: Iterable[str]) -> dict[str, Any]:
        keys = list(dict.fromkeys(keys))
        found: dict[str, Any] = {}
        if self.path is not None and keys:
            self._refresh()
            self._read_shards(keys, found)
            rest = [k for k in keys if k not in found]
            for path, conn in self._legacy.items():
                self._read_legacy(path, conn, rest, found)
                rest = [k for k in rest if k not in found]
        self.hits += len(found)
        self.misses += len(keys) - len(found)
        return found

    def _read_shards(self, keys: list[str], found: dict[str, Any]) -> None:
        by_shard: dict[int, list[tuple[str, int, int]]] = {}
        where = self._index.where
        for key in keys:
            spot = where.get(key)
            if spot is not None:
                by_shard.setdefault(spot[0], []).append((key, spot[1], spot[2]))
        for number, wanted in by_shard.items():
            shard = self._index.shards[number]
            try:
                with open(shard.path, "rb") as f:
                    for key, offset, length in sorted(wanted, key=lambda w: w[1]):
                        f.seek(offset)
                        found[key] = json.loads(f.read(length))
            except (OSError, ValueError) as err:  # moved aside or rewritten under us: recompute those
                log.warning("cache shard %s changed while reading (%s); its calls are recomputed", shard.path, err)
                for key, _, _ in wanted:
                    found.pop(key, None)
                    where.pop(key, None)

    def _read_legacy(self, path: Path, conn: sqlite3.Connection, keys: list[str], found: dict[str, Any]) -> None:
        try:
            for start in range(0, len(keys), _SQL_CHUNK):
                chunk = keys[start : start + _SQL_CHUNK]
                marks = ",".join("?" * len(chunk))
                for key, value in conn.execute(f"SELECT key, value FROM calls WHERE key IN ({marks})", chunk):
                    found[key] = json.loads(value)
        except sqlite3.DatabaseError as err:
            raise CacheError(self._legacy_message(path, err)) from err

    # ------------------------------------------------------------------ writing
    def _open_shard(self) -> int:
        host = re.sub(r"[^A-Za-z0-9_-]+", "_", socket.gethostname())[:40] or "host"
        header = (
            MAGIC
            + b"\t"
            + json.dumps(
                {"namespace": self.namespace, "host": socket.gethostname(), "pid": os.getpid(), "created": time.time()}
            ).encode("utf-8")
            + b"\n"
        )
        for _ in range(10):
            path = self.dir / f"{host}.{os.getpid()}.{time.time_ns()}.{secrets.token_hex(4)}{SHARD_SUFFIX}"
            try:
                # O_EXCL: this file is new and ours alone; a name clash picks another name, never shares.
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_APPEND, 0o644)
            except FileExistsError:
                continue
            except OSError as err:
                raise CacheError(self._unwritable_message(err)) from err
            self._write(fd, header)
            self.shard_path = path
            return fd
        raise CacheError(f"cache directory {self.dir}: could not pick a new shard name")

    def _write(self, fd: int, data: bytes) -> None:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)  # the batch is on the file server before the next one is computed
        except OSError as err:
            raise CacheError(
                f"cache shard {self.shard_path or self.dir}: write failed ({err.strerror or err}); "
                f"free space or fix permissions under {self.path}, then rerun (finished batches are kept)"
            ) from err

    def put_many(self, op: str, items: dict[str, Any]) -> None:
        """Append one batch: one write and one fsync, so a kill loses at most the batch being computed."""
        if self.path is None or not items:
            return
        if self._fd is None:
            self._fd = self._open_shard()
        self._write(self._fd, b"".join(_encode_record(key, op, value) for key, value in items.items()))

    def summary(self) -> str:
        total = self.hits + self.misses
        text = f"cache {self.path}: {self.hits} hits, {self.misses} misses of {total} unique calls"
        if self.path is not None:
            shards = sum(not s.skip for s in self._index.shards)
            text += f" ({shards} shards and {len(self._legacy)} legacy files read in {self.dir}"
            text += f"; new results in {self.shard_path})" if self.shard_path else "; nothing new written)"
        return text

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        for conn in self._legacy.values():
            conn.close()
        self._legacy.clear()
