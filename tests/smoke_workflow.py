"""The smoke workflow in a scratch copy of the project: shared by the local and the SLURM workflow tests."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
COPY = ["Snakefile", "rules", "workflow", "config", "profiles", "envs", "report", "tests/smoke", "data/demo"]
SMOKE_CONFIG = ["--configfile", "config/config.yaml", "tests/smoke/config.yaml"]


def scratch_copy(workdir: Path, embedded_model_dir: Path, copy_model: bool = False) -> Path:
    """Copy what the workflow needs into `workdir`; link the converted embedded model instead of converting it
    again, or copy it (`copy_model`: a run that must not see, or write into, the shared directory)."""
    for item in COPY:
        src, dst = REPO / item, workdir / item
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
    (workdir / "resources/models").mkdir(parents=True)
    model = workdir / "resources/models" / embedded_model_dir.name
    if copy_model:
        shutil.copytree(embedded_model_dir.resolve(), model)
        # The copy stands for a model prepared before this run. copytree keeps the shared directory's times,
        # and a checkout whose prepare_model script was edited after the model was converted would then
        # (rightly, for Snakemake's code trigger) plan prepare_model again: an accident of the developer's
        # checkout, not of the workflow under test.
        for file in model.iterdir():
            os.utime(file)
    else:
        model.symlink_to(embedded_model_dir)
    return workdir


def copy_of_run(finished: Path, workdir: Path) -> Path:
    """A copy of a finished run's project (its results, checkpoints and Snakemake's records, times kept) at
    `workdir`, its prepared models linked, not copied: a test that changes a setting and reruns builds on the
    session's smoke run instead of running everything again. Only what the change reaches reruns there."""
    models = finished / "resources" / "models"

    def skip_models(folder: str, _names: list[str]) -> list[str]:
        # Snakemake's locks are of a run in `finished` (another worker may be running one there), not the copy's
        return {models.parent: ["models"], finished / ".snakemake": ["locks"]}.get(Path(folder), [])

    shutil.copytree(finished, workdir, symlinks=True, ignore=skip_models)
    (workdir / "resources" / "models").mkdir(parents=True, exist_ok=True)
    for model in models.iterdir():
        (workdir / "resources" / "models" / model.name).symlink_to(model.resolve())
    return workdir


def snakemake(
    workdir: Path,
    *args: str,
    check: bool = True,
    env: dict | None = None,
    local: bool = True,
    overlays: tuple[str, ...] = (),
    timeout: int = 1800,
) -> subprocess.CompletedProcess:
    """Run the smoke workflow (plus config `overlays`) in `workdir`: locally on 2 cores, two single-threaded model jobs at a time (as `make run` here),
    or with `local=False` as `args` say."""
    local_args = ["--cores", "2", "--resources", "gpu=2"] if local else []
    cmd = [str(BIN / "snakemake"), *local_args, *SMOKE_CONFIG, *overlays, *args]
    result = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=timeout, env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} failed:\n{result.stdout[-4000:]}\n{result.stderr[-8000:]}")
    return result


def project_copy(root: Path) -> Path:
    """A scratch copy of the workflow (no model) at <root>/project, with <root>/shared -> ../shared when it
    exists, so overlays that read ../shared/data resolve as they do in a checkout (for dry runs)."""
    workdir = root / "project"
    for item in COPY:
        src, dst = REPO / item, workdir / item
        dst.parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if src.is_dir() else shutil.copy2)(src, dst)
    if (REPO.parent / "shared").is_dir():
        (root / "shared").symlink_to(REPO.parent / "shared")
    return workdir


def job_stats(output: str) -> dict[str, int]:
    """The 'Job stats' table of `snakemake -n` as {rule: count}, without the total ({} when nothing to do)."""
    if "Job stats:" not in output and "Nothing to be done" in output:
        return {}
    counts = {}
    for line in output.split("Job stats:")[1].splitlines()[3:]:
        match = re.fullmatch(r"(\S+)\s+(\d+)", line.strip())
        if not match:
            break
        counts[match[1]] = int(match[2])
    counts.pop("total")
    return counts
