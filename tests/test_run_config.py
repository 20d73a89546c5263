"""A run's merged configuration, kept beside its results (issue 27): the writer, then the real Snakemake."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest
import yaml
from helpers import run_snakemake
from smoke_workflow import project_copy

from debate_audit.runtime.provenance import project_version
from debate_audit.runtime.run_config import merge_order, read_run_header, write_run_config

STARTED = datetime(2031, 5, 6, 7, 8, 9, tzinfo=UTC)
CONFIG = {
    "cwpor": {"subset": 3, "verbosity": [30, 60]},
    "models": {"m": {"source": "openai", "api_key_env": "DA_RUN_KEY"}},
}


def test_each_run_gets_its_own_file_and_the_latest_is_results_config(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    first = write_run_config(CONFIG, configfiles=["config/config.yaml"], overlays=[], overrides={}, now=STARTED)
    changed = {**CONFIG, "cwpor": {"subset": 5, "verbosity": [30]}}
    second = write_run_config(changed, configfiles=["config/config.yaml"], overlays=[], overrides={}, now=STARTED)
    assert first == Path("results/runs/2031-05-06T07-08-09Z.yaml")
    assert second == Path("results/runs/2031-05-06T07-08-09Z-2.yaml")  # started within the same second
    assert yaml.safe_load(first.read_text()) == CONFIG
    assert yaml.safe_load(second.read_text()) == changed
    assert Path("results/config.yaml").read_text() == second.read_text()
    assert sorted(p.name for p in Path("results").rglob("*")) == sorted(
        ["runs", "config.yaml", first.name, second.name]
    )


def test_the_header_names_time_files_overrides_and_versions(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    overlay = tmp_path / "config/paper.yaml"
    path = write_run_config(
        CONFIG,
        configfiles=[overlay, "config/config.yaml"],
        overlays=[overlay],
        overrides={"cwpor": {"subset": 3}},
        now=STARTED,
    )
    header = read_run_header(path)
    assert header["started"] == "2031-05-06T07:08:09Z"
    assert header["configfiles"] == ["config/config.yaml", "config/paper.yaml"]  # merge order, relative paths
    assert header["config_overrides"] == {"cwpor": {"subset": 3}}
    assert header["version"] == project_version()
    assert header["snakemake"].split(".")[0] == "9"
    from debate_audit.runtime.provenance import software

    assert header["software"] == software() and header["software"]["packages"]["torch"].startswith("2.")
    assert header["software"]["python"].startswith("3.") and header["software"]["cpu"]


def test_merge_order_puts_the_snakefile_configfile_first_and_overlays_as_given(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    outside = Path("/elsewhere/o.yaml")
    loaded = [tmp_path / "b.yaml", outside, tmp_path / "a.yaml", "config/config.yaml"]
    assert merge_order(loaded, [tmp_path / "b.yaml", outside, tmp_path / "a.yaml"]) == [
        "config/config.yaml",
        "b.yaml",
        "/elsewhere/o.yaml",
        "a.yaml",
    ]
    # `--configfile config/config.yaml overlay.yaml` (as the Makefile's users do): the default is listed once
    assert merge_order([tmp_path / "config/config.yaml", "config/config.yaml"], [tmp_path / "config/config.yaml"]) == [
        "config/config.yaml"
    ]


def test_a_secret_value_that_reached_the_config_is_replaced_by_its_variable(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DA_RUN_KEY", "sk-not-for-files-0123")
    leaked = {**CONFIG, "cache": "results/cache/sk-not-for-files-0123"}
    path = write_run_config(
        leaked, configfiles=[], overlays=[], overrides={"note": "sk-not-for-files-0123"}, now=STARTED
    )
    text = path.read_text()
    assert "sk-not-for-files-0123" not in text
    assert "DA_RUN_KEY" in text and yaml.safe_load(text)["cache"] == "results/cache/<value of $DA_RUN_KEY>"


# ------------------------------------------------------------------------------------ through Snakemake
TARGET = "data/truthfulqa.parquet"  # one cheap job, no model
OVERLAY = {
    "cwpor": {"subset": 3},
    "models": {"served": {"source": "openai", "id": "x", "base_url": "http://h/v1", "api_key_env": "DA_RUN_KEY"}},
}


def snakemake(workdir: Path, *args: str) -> str:
    env = {**os.environ, "DA_RUN_KEY": "sk-not-for-files-0123"}
    return run_snakemake(workdir, "--cores", "1", *args, env=env, timeout=600)


@pytest.mark.slow
def test_a_run_keeps_its_merged_config_and_a_dry_run_or_an_idle_run_writes_none(tmp_path):
    workdir = project_copy(tmp_path)
    (workdir / "overlay.yaml").write_text(yaml.safe_dump(OVERLAY))
    configs = ["--configfile", "config/config.yaml", "overlay.yaml"]
    snakemake(workdir, "-n", TARGET, *configs)
    assert not (workdir / "results").exists()

    snakemake(workdir, TARGET, *configs)
    runs = list((workdir / "results/runs").iterdir())
    assert len(runs) == 1
    latest = workdir / "results/config.yaml"
    assert latest.read_text() == runs[0].read_text()
    saved = yaml.safe_load(latest.read_text())
    assert saved["cwpor"]["subset"] == 3 and saved["cwpor"]["seed"] == 42  # the overlay over the default
    assert saved["models"]["served"]["api_key_env"] == "DA_RUN_KEY"
    assert "sk-not-for-files-0123" not in latest.read_text()
    header = read_run_header(latest)
    assert header["configfiles"] == ["config/config.yaml", "overlay.yaml"]
    assert datetime.fromisoformat(header["started"]) <= datetime.now(UTC)

    # Nothing to do: no rerun, no new record, the latest one untouched.
    before = latest.stat().st_mtime_ns
    again = snakemake(workdir, TARGET, *configs)
    assert "Nothing to be done" in again
    assert len(list((workdir / "results/runs").iterdir())) == 1 and latest.stat().st_mtime_ns == before
    # The saved file alone reproduces the run's configuration: the same params, so nothing to rerun.
    exact = snakemake(workdir, "-n", TARGET, "--configfile", "results/config.yaml")
    assert "Nothing to be done" in exact
    # A changed configuration that reruns the job is a second run with its own record.
    (workdir / "overlay.yaml").write_text(
        yaml.safe_dump({**OVERLAY, "datasets": {"truthfulqa": {"path": "data/demo/../demo/truthfulqa.csv"}}})
    )
    snakemake(workdir, TARGET, *configs)
    assert len(list((workdir / "results/runs").iterdir())) == 2
    assert yaml.safe_load(latest.read_text())["datasets"]["truthfulqa"]["path"] == "data/demo/../demo/truthfulqa.csv"
