"""Determinism and kill-and-resume check (issue 12 §4, issue 27): the default CW-POR judge, at every word
limit, must write the same judgments, bit for bit, however its jobs are scheduled and however often they are
killed and resumed.

In a scratch copy of the project (its tracked and untracked-not-ignored files, the prepared embedded model
copied in), with the default config plus an overlay that can only make the run smaller (`--questions`: the
CW-POR question subset, default the default config's 20; `--verbosity`: the word limits, default the default
config's; `--batch-size`: the model's batch size, default the default config's 16):

1. snakemake makes the judge's inputs once (questions and the debate responses at every word limit);
2. four runs of every `cwpor_judge` job, each with its own fresh call cache:
   - `side-by-side-1` and `side-by-side-2`: all word limits at once (`--cores 2 --resources gpu=2`), so which
     prompts share a batch depends on job timing (the word limits' judge prompts share cache keys);
   - `sequential`: one job at a time (`--cores 1`);
   - `killed`: one job at a time, killed with SIGKILL (snakemake and the job, the whole process group) once
     while the judge's reply slots are generated and once while the answer letters are scored, each time
     resumed with `--unlock` then `--rerun-incomplete`, until it finishes;
3. compares every run's judgments tables with the sequential run's cell by cell, and the caches entry by
   entry.

Exit status 0 when no cell and no cache entry differ. Runs only the judge's upstream rules and the judge
(`--allowed-rules`), never `prepare_model`. Takes ~30-60 minutes on 2 idle cores at the defaults; `--questions
10 --verbosity 30 --batch-size 4` is the earlier, smaller check (~10-20 minutes).

    .venv/bin/python benchmarks/resume_check.py [--work /tmp/resume_check] [--questions 20]
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
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, check=True, capture_output=True
        )
        .stdout.decode()
        .split("\0")
    )
    for name in filter(None, files):
        src = ROOT / name
        if src.is_file():
            (project / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, project / name)
    # A real copy of the prepared model (not a link): nothing in the scratch run can write into ours.
    shutil.copytree(ROOT / "resources" / "models" / MODEL, project / "resources" / "models" / MODEL, symlinks=False)
    return project


def snakemake(project: Path, overlay: Path, targets: list[str], cores: int = 1) -> subprocess.Popen:
    exe = Path(sys.executable).with_name("snakemake")
    cmd = [
        str(exe),
        "--cores",
        str(cores),
        "--resources",
        f"gpu={cores}",
        "--configfile",
        "config/config.yaml",
        str(overlay),
        "--allowed-rules",
        *RULES,
        "--rerun-incomplete",
        *targets,
    ]
    env = dict(os.environ, PYTHONPATH=str(project / "src"))
    return subprocess.Popen(
        cmd, cwd=project, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT, start_new_session=True
    )


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


def run_to_end(project: Path, overlay: Path, targets: list[str], cores: int = 1) -> None:
    proc = snakemake(project, overlay, targets, cores)
    if proc.wait() != 0:
        raise SystemExit(f"snakemake {targets} failed (exit {proc.returncode}); see {project / 'logs'}")


def run_with_kills(
    project: Path, overlay: Path, targets: list[str], cache: Path, kills: list[tuple[str, int]]
) -> list[str]:
    """Start the rules, SIGKILL them when the cache first holds `count` entries of `op`, resume; per kill point."""
    notes = []
    for op, count in kills:
        proc = snakemake(project, overlay, targets)
        while proc.poll() is None and counts(cache).get(op, 0) < count:
            time.sleep(0.2)
        if proc.poll() is not None:
            raise SystemExit(f"the run ended before the kill point ({op} >= {count}); use more --questions")
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        notes.append(f"killed at {counts(cache)}")
        subprocess.run(
            [
                str(Path(sys.executable).with_name("snakemake")),
                "--unlock",
                "--configfile",
                "config/config.yaml",
                str(overlay),
            ],
            cwd=project,
            check=True,
            capture_output=True,
        )
    run_to_end(project, overlay, targets)
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
    import yaml

    defaults = yaml.safe_load((ROOT / "config" / "config.yaml").read_text())
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", type=Path, default=Path("/tmp/resume_check"))
    ap.add_argument("--questions", type=int, default=defaults["cwpor"]["subset"])
    ap.add_argument("--batch-size", type=int, default=defaults["models"][MODEL]["batch_size"])
    ap.add_argument("--verbosity", type=int, nargs="+", default=defaults["cwpor"]["verbosity"])
    args = ap.parse_args()
    start = time.time()
    args.work.mkdir(parents=True, exist_ok=True)
    project = copy_project(args.work)
    tables = [f"results/cwpor/{MODEL}/judge-{MODEL}/judgments_v{v}.parquet" for v in args.verbosity]
    responses = [f"results/cwpor/{MODEL}/responses_v{v}.parquet" for v in args.verbosity]
    base = (
        f"cwpor: {{subset: {args.questions}, verbosity: {list(args.verbosity)}}}\n"
        f"models: {{{MODEL}: {{batch_size: {args.batch_size}}}}}\n"
    )
    runs = {"side-by-side-1": 2, "side-by-side-2": 2, "sequential": 1, "killed": 1}  # name -> cores
    overlays = {}
    for name in ("inputs", *runs):
        overlays[name] = project / f"config/resume_{name}.yaml"
        overlays[name].write_text(base + f"cache: results/cache/{name}\n")
    run_to_end(project, overlays["inputs"], responses)
    slots = 3  # template v4's reply slots (Rationale, Final Answer, Confidence): generate calls per question
    kills = [("generate", args.questions + args.batch_size), ("choice_logprobs", args.batch_size)]
    assert slots * args.questions > kills[0][1]
    seconds, notes = {}, []
    for name, cores in runs.items():
        t0 = time.time()
        if name == "killed":
            notes = run_with_kills(project, overlays[name], tables, project / f"results/cache/{name}", kills)
        else:
            run_to_end(project, overlays[name], tables, cores)
        seconds[name] = time.time() - t0
        for table in tables:
            (project / table).rename(project / f"{table}.{name}")
    print(
        f"CW-POR judge at v = {args.verbosity}, {args.questions} questions, batch size {args.batch_size}, default "
        f"config otherwise"
    )
    failed = False
    for name in runs:
        print(
            f"run {name} ({runs[name]} core(s), {seconds[name]:.0f} s)"
            + "".join(f"\n  {note}; resumed" for note in (notes if name == "killed" else []))
        )
        if name == "sequential":
            continue
        for table in tables:
            differ, cells, examples = compare_tables(project / f"{table}.sequential", project / f"{table}.{name}")
            failed |= differ != 0
            print(
                f"  {Path(table).name}: {differ} of {cells} cells differ from the sequential run"
                + "".join(f"\n    {e}" for e in examples)
            )
        cache_differ, cache_entries = compare_caches(
            project / "results/cache/sequential", project / f"results/cache/{name}"
        )
        failed |= cache_differ != 0
        print(f"  cache: {cache_differ} of {cache_entries} entries differ")
    print(f"total {time.time() - start:.0f} s; scratch copy in {project}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
