"""`snakemake --lint` with one finding accepted: the rules name no conda environment or container.

The project's software is the environment `make install` builds from constraints.txt (docs/reproducing.md,
"Reproducing an environment"); a conda environment per rule could not be built or tested on the machines
this project is developed on (the conda channels are out of reach), so the rules declare none rather than one
nobody has run. Every other lint fails, and so does a workflow Snakemake cannot parse.

`make lint` runs this file; tests/test_workflow.py calls `other_lints`.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SNAKEMAKE = Path(sys.executable).with_name("snakemake")
ACCEPTED = "Specify a conda environment or container for each rule."


def other_lints(workdir: Path = REPO) -> tuple[list[str], str]:
    """The titles of every lint but the accepted one (with the rule or file it is for), and the whole output.
    A run that fails without printing lints (a parse error) is returned as one finding."""
    run = subprocess.run([str(SNAKEMAKE), "--lint"], cwd=workdir, capture_output=True, text=True, timeout=300)
    output = run.stdout + run.stderr
    found, subject = [], None
    for line in output.splitlines():
        if heading := re.match(r"Lints for (.+):$", line):
            subject = heading[1]
        elif (item := re.match(r" {4}\* (.+?):?$", line)) and item[1] != ACCEPTED:
            found.append(f"{subject}: {item[1]}")
    if run.returncode != 0 and "Lints for" not in output:
        found.append(f"snakemake --lint exited {run.returncode} without lints")
    return found, output


if __name__ == "__main__":
    lints, text = other_lints()
    if lints:
        print(text)
        sys.exit("snakemake --lint: " + "; ".join(lints))
    print(f"snakemake --lint: clean (the accepted finding aside: '{ACCEPTED}', see {Path(__file__).name})")
