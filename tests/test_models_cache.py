import signal
import subprocess
import sys

import pytest

from debate_audit.models.cache import CallCache, cache_key

BASE = dict(fingerprint="abc", dtype="torch.float32", operation="generate", prompt="<|im_start|>user\nHi", params={"max_new_tokens": 8})


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
    assert cache_key(**BASE) == cache_key(**BASE)
    a = cache_key(**{**BASE, "params": {"a": 1, "b": 2}})
    b = cache_key(**{**BASE, "params": {"b": 2, "a": 1}})
    assert a == b


def test_values_round_trip_and_hits_misses_are_counted(tmp_path):
    cache = CallCache(tmp_path / "c.sqlite")
    cache.put_many("generate", {"k1": ["text"], "k2": [[-0.5, -1.5]]})
    got = cache.get_many(["k1", "k2", "k3"])
    assert got == {"k1": ["text"], "k2": [[-0.5, -1.5]]}
    assert (cache.hits, cache.misses) == (2, 1)


def test_no_path_means_no_persistence(tmp_path):
    cache = CallCache(None)
    cache.put_many("generate", {"k": 1})
    assert cache.get_many(["k"]) == {}


WRITER = """
import sys, time
from debate_audit.models.cache import CallCache
cache = CallCache(sys.argv[1])
prefix, n, pause = sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
for i in range(n):
    cache.put_many("generate", {f"{prefix}{i}": [f"value {i}"]})
    print(i, flush=True)
    time.sleep(pause)
"""


def test_batches_written_before_a_kill_survive_it(tmp_path):
    db = tmp_path / "c.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(db), "k", "1000", "0.01"], stdout=subprocess.PIPE, text=True)
    done = [proc.stdout.readline() for _ in range(20)]
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert len(done) == 20
    cache = CallCache(db)
    found = cache.get_many([f"k{i}" for i in range(1000)])
    # Every batch reported as written is there; the kill left the file readable.
    assert all(f"k{i}" in found for i in range(20))
    assert 20 <= len(found) < 1000
    # A rerun computes only what is missing.
    missing = [f"k{i}" for i in range(1000) if f"k{i}" not in found]
    cache.put_many("generate", {k: ["redone"] for k in missing})
    assert len(cache.get_many([f"k{i}" for i in range(1000)])) == 1000


def test_two_processes_writing_at_once_lose_nothing(tmp_path):
    db = tmp_path / "c.sqlite"
    CallCache(db).close()
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(db), prefix, "200", "0"], stdout=subprocess.DEVNULL)
        for prefix in ("a", "b")
    ]
    assert [p.wait(timeout=120) for p in procs] == [0, 0]
    found = CallCache(db).get_many([f"{p}{i}" for p in "ab" for i in range(200)])
    assert len(found) == 400
    assert found["a7"] == ["value 7"] and found["b199"] == ["value 199"]
