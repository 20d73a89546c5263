"""Kill-and-resume check (issue 12 §4): a CW-POR judge job killed with SIGKILL and resumed must write the
same judgments, bit for bit, as an uninterrupted one.

In a scratch copy of the project (its tracked and untracked-not-ignored files, the prepared embedded model
copied in), with the default config plus an overlay that only makes the run smaller (`--questions`: the
CW-POR question subset, default 10; `--batch-size`: the model's batch size, default 4, so that a call has
several batches and a kill lands inside one; `--verbosity`: one debate cell):

1. snakemake makes the judge's inputs once (questions and the debate responses at that verbosity);
2. run A: the `cwpor_judge` rule with its own fresh cache, uninterrupted;
3. run B: the same rule with another fresh cache, killed with SIGKILL (snakemake and the job, the whole
   process group) once while the judge's reply slots are generated (after the first slot and one batch of
   the second) and once while the answer letters are scored (after the first scoring batch), each time
   resumed with `--unlock` then `--rerun-incomplete`, until it finishes;
4. compares the two judgments tables cell by cell and the two caches entry by entry.

Exit status 0 when no cell and no cache entry differ. Runs only the judge's upstream rules and the judge
(`--allowed-rules`), never `prepare_model`. Takes ~10-20 minutes on 2 idle cores at the defaults.

    .venv/bin/python benchmarks/resume_check.py [--work /tmp/resume_check] [--questions 10]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import signal
import subprocess
import sys
import time
import zlib
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = "smollm2-135m"
RULES = ["prepare_truthfulqa", "cwpor_questions", "cwpor_debate", "cwpor_judge"]


def copy_project(work: Path) -> Path:
    project = work / "project"
    if project.exists():
        shutil.rmtree(project)
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (project / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, project / name)
    # A real copy of the prepared model (not a link): nothing in the scratch run can write into ours.
    shutil.copytree(ROOT / "resources" / "models" / MODEL, project / "resources" / "models" / MODEL, symlinks=False)
    return project


def snakemake(project: Path, overlay: Path, target: str, *extra: str) -> subprocess.Popen:
    exe = Path(sys.executable).with_name("snakemake")
    cmd = [str(exe), "--cores", "1", "--resources", "gpu=1", "--configfile", "config/config.yaml", str(overlay),
           "--allowed-rules", *RULES, "--rerun-incomplete", *extra, target]
    env = dict(os.environ, PYTHONPATH=str(project / "src"))
    return subprocess.Popen(cmd, cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                            start_new_session=True)


def entries(cache: Path) -> dict[str, tuple[str, str]]:
    """key -> (op, value) of every complete record in the call cache directory's shards (models/cache.py's
    format: a header line, then `crc32 hex \t key \t op \t json` lines; a torn tail is skipped)."""
    from debate_audit.models.cache import SHARD_SUFFIX

    found: dict[str, tuple[str, str]] = {}
    for shard in sorted(cache.glob(f"*/*{SHARD_SUFFIX}")):
        data = shard.read_bytes()
        for line in data[: data.rfind(b"\n") + 1].split(b"\n")[1:-1]:
            body = line[9:]
            parts = body.split(b"\t", 2)
            if len(parts) == 3 and line[:8] == b"%08x" % zlib.crc32(body):
                found.setdefault(parts[0].decode(), (parts[1].decode(), parts[2].decode()))
    return found


def counts(cache: Path) -> dict[str, int]:
    return dict(Counter(op for op, _ in entries(cache).values()))


def run_to_end(project: Path, overlay: Path, target: str) -> None:
    proc = snakemake(project, overlay, target)
    if proc.wait() != 0:
        raise SystemExit(f"snakemake {target} failed (exit {proc.returncode}); see {project / 'logs'}")


def run_with_kills(project: Path, overlay: Path, target: str, cache: Path, kills: list[tuple[str, int]]) -> list[str]:
    """Start the rule, SIGKILL it when the cache first holds `count` entries of `op`, resume; per kill point."""
    notes = []
    for op, count in kills:
        proc = snakemake(project, overlay, target)
        while proc.poll() is None and counts(cache).get(op, 0) < count:
            time.sleep(0.2)
        if proc.poll() is not None:
            raise SystemExit(f"the run ended before the kill point ({op} >= {count}); use more --questions")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        notes.append(f"killed at {counts(cache)}")
        subprocess.run([str(Path(sys.executable).with_name("snakemake")), "--unlock", "--configfile",
                        "config/config.yaml", str(overlay)], cwd=project, check=True, capture_output=True)
    run_to_end(project, overlay, target)
    return notes


def same(a: object, b: object) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


def compare_tables(a: Path, b: Path) -> tuple[int, int, list[str]]:
    import polars as pl

    left, right = pl.read_parquet(a), pl.read_parquet(b)
    if left.columns != right.columns or left.height != right.height:
        return -1, 0, [f"shapes differ: {left.shape} vs {right.shape}"]
    differ, examples = 0, []
    for col in left.columns:
        for row, (x, y) in enumerate(zip(left[col].to_list(), right[col].to_list())):
            if not same(x, y):
                differ += 1
                if len(examples) < 5:
                    examples.append(f"{col}[{row}]: {x!r} vs {y!r}")
    return differ, left.height * left.width, examples


def compare_caches(a: Path, b: Path) -> tuple[int, int]:
    left, right = entries(a), entries(b)
    return sum(left.get(k) != v for k, v in right.items()) + len(set(left) ^ set(right)), len(left)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/resume_check"))
    ap.add_argument("--questions", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=4)
    ap.add_argument("--verbosity", type=int, default=30)
    args = ap.parse_args()
    start = time.time()
    args.work.mkdir(parents=True, exist_ok=True)
    project = copy_project(args.work)
    out = f"results/cwpor/{MODEL}/judge-{MODEL}/judgments_v{args.verbosity}.parquet"
    base = (f"cwpor: {{subset: {args.questions}, verbosity: [{args.verbosity}]}}\n"
            f"models: {{{MODEL}: {{batch_size: {args.batch_size}}}}}\n")
    overlays = {}
    for name in ("inputs", "a", "b"):
        overlays[name] = project / f"config/resume_{name}.yaml"
        overlays[name].write_text(base + f"cache: results/cache/{name}\n")
    run_to_end(project, overlays["inputs"], f"results/cwpor/{MODEL}/responses_v{args.verbosity}.parquet")
    t0 = time.time()
    run_to_end(project, overlays["a"], out)
    uninterrupted = time.time() - t0
    (project / out).rename(project / f"{out}.a")
    slots = 3  # template v4's reply slots (Rationale, Final Answer, Confidence): generate calls per question
    kills = [("generate", args.questions + args.batch_size), ("choice_logprobs", args.batch_size)]
    assert slots * args.questions > kills[0][1]
    notes = run_with_kills(project, overlays["b"], out, project / "results/cache/b", kills)
    differ, cells, examples = compare_tables(project / f"{out}.a", project / out)
    cache_differ, cache_entries = compare_caches(project / "results/cache/a", project / "results/cache/b")
    print(f"CW-POR judge v={args.verbosity}, {args.questions} questions, batch size {args.batch_size}, default config "
          f"otherwise; uninterrupted run {uninterrupted:.0f} s")
    for note in notes:
        print(f"  run B {note}; resumed")
    print(f"judgments: {differ} of {cells} cells differ" + "".join(f"\n  {e}" for e in examples))
    print(f"caches: {cache_differ} of {cache_entries} entries differ")
    print(f"total {time.time() - start:.0f} s; scratch copy in {project}")
    return 0 if differ == 0 and cache_differ == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
