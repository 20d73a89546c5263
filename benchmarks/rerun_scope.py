"""Rerun scope: what Snakemake reruns after a change to one stage's parameters, and how fast a no-op is.

    .venv/bin/python benchmarks/rerun_scope.py        # in a checkout where the default run has finished

For each change below, a dry run (`snakemake -n --configfile config/config.yaml <overlay>`) lists the jobs it would run; the table
shows them per rule next to the rules the change should reach (that stage and its descendants). The
no-op rows time `snakemake -n` and a real `snakemake` on the finished run (nothing to do). Cache misses
of a real rerun are in the rerun rule's log (`LanguageModel.close` logs hits and misses).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, table  # noqa: E402

SNAKEMAKE = str(Path(sys.executable).with_name("snakemake"))

# (what changes, YAML overlay on config/config.yaml, rules expected to rerun)
AUDIT_AFTER = {"audit_statistics", "audit_sweeps", "audit_figures", "audit_runtime", "all"}
CHANGES = [
    ("audit eta (statistics only)", "audit: {eta: 0.1}", AUDIT_AFTER),
    (
        "judge template (CW-POR judge and after)",
        "cwpor: {judge_template: v3}",
        {"cwpor_judge", "cwpor_metrics", "cwpor_tables", "cwpor_figures", "all"},
    ),
    (
        "test pool size (paraphrase test pools and after)",
        "paraphrase: {test: {size: 5}}",
        {"paraphrase_test", "audit_scores"} | AUDIT_AFTER,
    ),
    (
        "verifier learning rate (fine-tuning and after)",
        "verifier: {learning_rate: 2.0e-4}",
        {"verifier_finetune", "verifier_loss_figure", "verifier_evaluate", "verifier_table1", "audit_scores"}
        | AUDIT_AFTER,
    ),
]


def dry_run(extra: list[str]) -> tuple[float, dict[str, int]]:
    start = time.perf_counter()
    out = subprocess.run([SNAKEMAKE, "-n", "--quiet", "rules", *extra], cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if out.returncode:
        raise SystemExit(f"snakemake -n {' '.join(extra)} failed:\n{out.stderr[-2000:]}")
    jobs = {}
    for line in (out.stdout + out.stderr).splitlines():
        match = re.match(r"^(\w+)\s+(\d+)$", line.strip())
        if match and match.group(1) != "total":
            jobs[match.group(1)] = int(match.group(2))
    return elapsed, jobs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out")
    args = parser.parse_args()
    rows = []
    t, jobs = dry_run([])
    rows.append(["no-op: snakemake -n", f"{t:.1f} s", ", ".join(f"{k} {v}" for k, v in jobs.items()) or "nothing", "-"])
    start = time.perf_counter()
    real = subprocess.run(
        [SNAKEMAKE, "--cores", "all", "--resources", "gpu=1"], cwd=ROOT, capture_output=True, text=True
    )
    rows.append(
        [
            "no-op: snakemake (real run)",
            f"{time.perf_counter() - start:.1f} s",
            "nothing" if "Nothing to be done" in real.stdout + real.stderr else "JOBS RAN",
            "-",
        ]
    )
    overlay = Path(tempfile.mkdtemp()) / "change.yaml"
    for name, override, expected in CHANGES:
        overlay.write_text(override + "\n")
        t, jobs = dry_run(["--configfile", "config/config.yaml", str(overlay)])
        outside = sorted(set(jobs) - expected)
        rows.append(
            [
                name,
                f"{t:.1f} s",
                ", ".join(f"{k} {v}" for k, v in sorted(jobs.items())),
                "yes" if not outside else f"NO: also {outside}",
            ]
        )
    text = table(["change", "time", "jobs (dry run, per rule)", "only that stage and after"], rows)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")


if __name__ == "__main__":
    main()
