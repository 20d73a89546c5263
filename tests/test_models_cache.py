import hashlib
import logging
import multiprocessing
import os
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from debate_audit.models import cache as cache_mod
from debate_audit.models.cache import SHARD_SUFFIX, CacheError, CallCache, cache_key, namespace_dir_name

BASE = dict(
    fingerprint="abc",
    dtype="torch.float32",
    operation="generate",
    prompt="<|im_start|>user\nHi",
    params={"max_new_tokens": 8},
)
NS = "f" * 64  # a weights sha256, as LanguageModel passes it


@pytest.mark.parametrize(
    "field, value",
    [
        ("fingerprint", "abd"),
        ("dtype", "torch.bfloat16"),
        ("operation", "choice_logprobs"),
        ("prompt", "<|im_start|>user\nHi "),
        ("params", {"max_new_tokens": 9}),
    ],
)
def test_key_changes_when_any_component_changes(field, value):
    assert cache_key(**BASE) != cache_key(**{**BASE, field: value})


def test_key_is_stable_and_ignores_param_order():
    # Pinned: the shard redesign must keep every key an earlier cache stored.
    assert cache_key(**BASE) == "74e0f865de6af30f12ab80fbe5784a7664f51e2d193e93d612403c6d64411986"
    a = cache_key(**{**BASE, "params": {"a": 1, "b": 2}})
    b = cache_key(**{**BASE, "params": {"b": 2, "a": 1}})
    assert a == b


def key(name: str) -> str:
    """Real keys are sha256 hex; the shard format relies on that (ASCII, no tabs)."""
    return hashlib.sha256(name.encode()).hexdigest()


def value_of(name: str) -> list:
    # Unicode, tabs and newlines inside values must survive the line format.
    return [f"text of {name}\twith a tab\nand a newline, é ✓", [-0.5, float(len(name))]]


def shards(root, ns=NS):
    return sorted((root / namespace_dir_name(ns)).glob(f"*{SHARD_SUFFIX}"))


def test_values_round_trip_and_hits_misses_are_counted(tmp_path):
    cache = CallCache(tmp_path / "c", namespace=NS)
    cache.put_many("generate", {key("1"): value_of("1"), key("2"): [[-0.5, -1.5]]})
    got = cache.get_many([key("1"), key("2"), key("3"), key("1")])
    assert got == {key("1"): value_of("1"), key("2"): [[-0.5, -1.5]]}
    assert (cache.hits, cache.misses) == (2, 1)
    assert "2 hits, 1 misses of 3 unique calls" in cache.summary()
    cache.close()


def test_no_path_means_no_persistence(tmp_path):
    cache = CallCache(None)
    cache.put_many("generate", {"k": 1})
    assert cache.get_many(["k"]) == {}


def test_a_rerun_reads_earlier_shards_and_writes_only_its_own(tmp_path):
    first = CallCache(tmp_path / "c", namespace=NS)
    first.put_many("generate", {key(str(i)): value_of(str(i)) for i in range(10)})
    first.close()
    rerun = CallCache(tmp_path / "c", namespace=NS)
    found = rerun.get_many([key(str(i)) for i in range(15)])
    assert found == {key(str(i)): value_of(str(i)) for i in range(10)}
    assert rerun.shard_path is None  # a fully cached lookup writes nothing
    rerun.put_many("generate", {key(str(i)): value_of(str(i)) for i in range(10, 15)})
    assert len(shards(tmp_path / "c")) == 2
    assert len(rerun.get_many([key(str(i)) for i in range(15)])) == 15
    # Another model's namespace sees none of it.
    other = CallCache(tmp_path / "c", namespace="org/other-model@main")
    assert other.get_many([key("1")]) == {}
    assert "/" not in namespace_dir_name("org/other-model@main") and ".." not in namespace_dir_name("..")
    assert namespace_dir_name(NS) == NS


# ---------------------------------------------------------------- concurrent processes


def _writer(root: str, prefix: str, n: int, batch: int) -> None:
    cache = CallCache(root, namespace=NS)
    for start in range(0, n, batch):
        cache.put_many(
            "generate", {key(f"{prefix}{i}"): value_of(f"{prefix}{i}") for i in range(start, min(n, start + batch))}
        )
        # Read while the others write: own and foreign shards, partially written tails included.
        names = [f"{p}{i}" for p in "abcd" for i in range(0, n, 7)]
        got = cache.get_many(key(name) for name in names)
        assert all(got[key(name)] == value_of(name) for name in names if key(name) in got)
    cache.close()


def _reader(root: str, n: int, deadline: float) -> None:
    names = [f"{p}{i}" for p in "abcd" for i in range(n)]
    cache = CallCache(root, namespace=NS)
    seen = 0
    while time.time() < deadline:
        got = cache.get_many(key(name) for name in names)
        for name in names:
            if key(name) in got:
                assert got[key(name)] == value_of(name), name
        seen = len(got)
        if seen == len(names):
            break
    assert seen == len(names), f"reader saw {seen} of {len(names)}"
    assert cache.shard_path is None  # a reader never creates a shard


def test_concurrent_writers_and_readers_lose_nothing_and_read_only_correct_values(tmp_path):
    root, n = str(tmp_path / "c"), 400
    CallCache(root, namespace=NS).close()
    ctx = multiprocessing.get_context("fork")
    deadline = time.time() + 120
    procs = [ctx.Process(target=_writer, args=(root, p, n, 13)) for p in "abcd"]
    procs += [ctx.Process(target=_reader, args=(root, n, deadline)) for _ in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(timeout=180)
    assert [p.exitcode for p in procs] == [0] * 6
    assert len(shards(tmp_path / "c")) == 4  # one shard per writing process, none per reader
    names = [f"{p}{i}" for p in "abcd" for i in range(n)]
    found = CallCache(root, namespace=NS).get_many(key(name) for name in names)
    assert found == {key(name): value_of(name) for name in names}


WRITER = """
import hashlib, sys
from debate_audit.models.cache import CallCache
cache = CallCache(sys.argv[1], namespace="f" * 64)
n, batch = int(sys.argv[2]), int(sys.argv[3])
for start in range(0, n, batch):
    # Big batches (about 1 MB each): the kill lands while a batch is being encoded, written or fsync'd.
    # (A regular-file write is not cut short by SIGKILL; a torn record, as a node crash or a network
    # filesystem can leave, is test_a_record_still_being_written_is_read_once_complete.)
    cache.put_many("generate", {hashlib.sha256(f"k{i}".encode()).hexdigest(): ["x" * 5000, i]
                                for i in range(start, start + batch)})
    print(start + batch, flush=True)
"""


def test_a_job_killed_mid_write_keeps_earlier_batches_and_a_rerun_fills_the_rest(tmp_path, caplog):
    root, n, batch = tmp_path / "c", 20000, 200
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root), str(n), str(batch)], stdout=subprocess.PIPE, text=True
    )
    done = int([proc.stdout.readline() for _ in range(5)][-1])
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    [shard] = shards(root)
    torn = not shard.read_bytes().endswith(b"\n")
    print(f"\nkilled after {done} reported keys; shard {shard.stat().st_size} bytes, last record torn: {torn}")
    keys = [key(f"k{i}") for i in range(n)]
    cache = CallCache(root, namespace=NS)
    with caplog.at_level(logging.WARNING):
        found = cache.get_many(keys)
    assert not caplog.records  # a torn last batch is not corruption
    assert all(key(f"k{i}") in found for i in range(done))  # every reported batch survived
    assert all(found[key(f"k{i}")] == ["x" * 5000, i] for i in range(n) if key(f"k{i}") in found)
    assert done <= len(found) < n
    missing = [k for k in keys if k not in found]
    cache.put_many("generate", {k: ["redone"] for k in missing})  # the rerun computes only what is missing
    assert len(CallCache(root, namespace=NS).get_many(keys)) == n
    assert len(shards(root)) == 2


def test_a_record_still_being_written_is_read_once_complete(tmp_path):
    writer = CallCache(tmp_path / "c", namespace=NS)
    writer.put_many("generate", {key("a"): value_of("a")})
    record = cache_mod._encode_record(key("b"), "generate", value_of("b"))
    reader = CallCache(tmp_path / "c", namespace=NS)
    with open(writer.shard_path, "ab") as f:  # what another host sees of a batch half-way through
        f.write(record[:30])
    assert reader.get_many([key("a"), key("b")]) == {key("a"): value_of("a")}
    with open(writer.shard_path, "ab") as f:
        f.write(record[30:])
    assert reader.get_many([key("b")]) == {key("b"): value_of("b")}


# ---------------------------------------------------------------- damage and errors


def test_a_corrupt_record_is_skipped_named_in_the_log_and_recomputed(tmp_path, caplog):
    cache = CallCache(tmp_path / "c", namespace=NS)
    cache.put_many("generate", {key(str(i)): value_of(str(i)) for i in range(5)})
    cache.close()
    [shard] = shards(tmp_path / "c")
    data = bytearray(shard.read_bytes())
    where = data.index(b"text of 2")
    data[where] ^= 0x20  # one flipped bit inside record "2"
    shard.write_bytes(bytes(data))
    (shard.parent / f"stray{SHARD_SUFFIX}").write_bytes(b"\x00\x00\x00 not a shard\n")
    with caplog.at_level(logging.WARNING):
        found = CallCache(tmp_path / "c", namespace=NS).get_many(key(str(i)) for i in range(5))
    assert found == {key(str(i)): value_of(str(i)) for i in (0, 1, 3, 4)}
    text = caplog.text
    assert str(shard) in text and "1 unreadable record" in text and "move the shard aside" in text
    assert f"stray{SHARD_SUFFIX}" in text and "not a cache shard" in text


def test_an_uncreatable_cache_directory_names_the_path(tmp_path):
    blocker = tmp_path / "results"
    blocker.write_text("a file where the cache directory should go")
    with pytest.raises(CacheError, match=f"cache directory {blocker}/cache/.*cannot be created"):
        CallCache(blocker / "cache", namespace=NS)


def test_an_unwritable_cache_directory_names_the_path_and_the_fix(tmp_path, monkeypatch):
    cache = CallCache(tmp_path / "c", namespace=NS)
    real_open = os.open

    def refuse(path, flags, *args):
        if flags & os.O_CREAT:
            raise PermissionError(13, "Permission denied", str(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refuse)
    with pytest.raises(CacheError) as err:
        cache.put_many("generate", {key("a"): 1})
    message = str(err.value)
    assert str(tmp_path / "c") in message and "not writable" in message and "recomputes" in message


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through directory permissions")
def test_a_read_only_cache_directory_fails_at_start(tmp_path):
    (tmp_path / "c" / NS).mkdir(parents=True)
    (tmp_path / "c" / NS).chmod(0o500)
    try:
        with pytest.raises(CacheError, match="not writable"):
            CallCache(tmp_path / "c", namespace=NS)
    finally:
        (tmp_path / "c" / NS).chmod(0o700)


def _old_sqlite(path, rows):
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("CREATE TABLE calls (key TEXT PRIMARY KEY, op TEXT, value TEXT, created REAL)")
    conn.executemany("INSERT INTO calls VALUES (?, 'generate', ?, 0)", rows)
    conn.commit()
    conn.close()


def test_an_old_single_file_cache_as_the_cache_path_says_how_to_migrate(tmp_path):
    old = tmp_path / "model_calls.sqlite"
    _old_sqlite(old, [(key("a"), '["old"]')])
    with pytest.raises(CacheError, match=f"cache {old} is a single-file SQLite cache.*mv {old} DIR/"):
        CallCache(old, namespace=NS)


def test_an_old_sqlite_moved_into_the_directory_is_read_and_never_written(tmp_path):
    (tmp_path / "c").mkdir()
    old = tmp_path / "c" / "model_calls.sqlite"
    _old_sqlite(old, [(key(str(i)), f'["old {i}"]') for i in range(600)])
    before = old.read_bytes()
    cache = CallCache(tmp_path / "c", namespace=NS)
    found = cache.get_many([key(str(i)) for i in range(700)])
    assert len(found) == 600 and found[key("599")] == ["old 599"]
    cache.put_many("generate", {key(str(i)): ["new"] for i in range(600, 700)})
    assert len(cache.get_many([key(str(i)) for i in range(700)])) == 700
    cache.close()
    assert old.read_bytes() == before and sorted(p.name for p in old.parent.iterdir()) == sorted(
        ["model_calls.sqlite", NS]
    )


def test_a_malformed_legacy_database_names_the_path_and_the_fix(tmp_path):
    (tmp_path / "c").mkdir()
    old = tmp_path / "c" / "model_calls.sqlite"
    _old_sqlite(old, [(key(str(i)), '["' + "v" * 2000 + '"]') for i in range(200)])
    data = bytearray(old.read_bytes())
    data[4096 * 3 : 4096 * 40] = os.urandom(4096 * 37)  # overwrite b-tree pages, keep the header
    old.write_bytes(bytes(data))
    with pytest.raises(CacheError) as err:
        CallCache(tmp_path / "c", namespace=NS).get_many([key(str(i)) for i in range(200)])
    message = str(err.value)
    assert str(old) in message and "move it aside" in message and "recomputes" in message
    print(f"\nmalformed legacy file: {message}")


# ---------------------------------------------------------------- one writer per file


def test_two_instances_never_open_the_same_file_for_writing(tmp_path, monkeypatch):
    writes, reads = [], []
    real_os_open, real_open = os.open, open

    def spy_os_open(path, flags, *args):
        if flags & (os.O_WRONLY | os.O_RDWR):
            writes.append((str(path), flags))
        return real_os_open(path, flags, *args)

    def spy_open(path, mode="r", *args, **kwargs):
        reads.append((str(path), mode))
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(os, "open", spy_os_open)
    monkeypatch.setattr(cache_mod, "open", spy_open, raising=False)
    a, b = CallCache(tmp_path / "c", namespace=NS), CallCache(tmp_path / "c", namespace=NS)
    for i in range(3):
        a.put_many("generate", {key(f"a{i}"): i})
        b.put_many("generate", {key(f"b{i}"): i})
        assert len(a.get_many([key(f"b{i}")])) == len(b.get_many([key(f"a{i}")])) == 1
    assert (
        sorted({p for p, _ in writes}) == sorted([str(a.shard_path), str(b.shard_path)])
        and a.shard_path != b.shard_path
    )
    assert len(writes) == 2 and all(flags & os.O_EXCL and flags & os.O_APPEND for _, flags in writes)
    assert reads and all(mode == "rb" for _, mode in reads)
    assert key("a0").encode() in a.shard_path.read_bytes() and key("a0").encode() not in b.shard_path.read_bytes()


# ---------------------------------------------------------------- lookup speed (printed, not asserted)


def test_lookup_over_many_shards_stays_fast(tmp_path):
    root, n_shards, per_shard = tmp_path / "c", 50, 1000
    t0 = time.perf_counter()
    for s in range(n_shards):
        w = CallCache(root, namespace=NS)
        for start in range(0, per_shard, 100):  # batches of 100, as a job writes them
            w.put_many("choice_logprobs", {key(f"{s}.{i}"): [[-0.1 * i, -2.5]] for i in range(start, start + 100)})
        w.close()
    t_write = time.perf_counter() - t0
    wanted = [key(f"{s}.{i}") for s in range(0, n_shards, 5) for i in range(0, per_shard, 20)]  # 500 keys
    reader = CallCache(root, namespace=NS)
    t0 = time.perf_counter()
    first = reader.get_many(wanted)
    t_cold = time.perf_counter() - t0
    t0 = time.perf_counter()
    again = reader.get_many(wanted)
    t_warm = time.perf_counter() - t0
    assert len(first) == len(again) == 500 and first == again
    print(
        f"\n{n_shards} shards x {per_shard} entries: write {t_write:.2f} s (fsync per batch); get_many of 500 keys: "
        f"first (indexes all shards) {t_cold * 1e3:.1f} ms, next {t_warm * 1e3:.1f} ms"
    )


def test_an_old_cache_file_next_to_the_new_directory_is_named_not_silently_ignored(tmp_path, caplog):
    _old_sqlite(tmp_path / "model_calls.sqlite", [(key("a"), '["old"]')])
    with caplog.at_level(logging.WARNING):
        cache = CallCache(tmp_path / "model_calls", namespace=NS)
    assert cache.get_many([key("a")]) == {}
    assert f"{tmp_path / 'model_calls.sqlite'} (an old single-file cache) is not read" in caplog.text
    (tmp_path / "not_a_dir").write_text("x")
    with pytest.raises(CacheError, match="is a file, not a directory"):
        CallCache(tmp_path / "not_a_dir", namespace=NS)
