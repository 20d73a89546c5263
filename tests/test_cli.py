"""The `debate-audit` command (cli.py): every subcommand answers --help saying what it writes, and the
workflow subcommands build the Snakemake command line that `make run` and `make inspect` ran before it."""

import subprocess
import sys

import pytest

from debate_audit import cli

SUBCOMMANDS = ("run", "plan", "compare", "inspect", "browse", "pin", "audit")


@pytest.mark.parametrize("argv", [["--help"], *([name, "--help"] for name in SUBCOMMANDS)])
def test_every_subcommand_answers_help(argv):
    for command in ([sys.executable, "-m", "debate_audit"], [str(cli.Path(sys.executable).parent / "debate-audit")]):
        done = subprocess.run([*command, *argv], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        assert "usage:" in done.stdout


def test_the_top_level_help_lists_every_subcommand():
    text = cli.build_parser().format_help()
    assert all(name in text for name in SUBCOMMANDS)


def test_run_builds_the_makefile_command_line():
    cmd = cli.snakemake_command(
        [], configfiles=["config/paper.yaml"], run="trial", cores="all", gpus=4, extra=["-n", "--quiet", "rules"]
    )
    assert cmd[1:] == [
        "-n", "--quiet", "rules",
        "--cores", "all", "--resources", "gpu=4", "--configfile", "config/paper.yaml", "--config", "run=trial",
    ]  # fmt: skip


def test_targets_after_the_separator_stay_targets_not_config_files():
    # --configfile and --config take every word up to the next option: Snakemake's own arguments go first
    cmd = cli.snakemake_command(
        [], configfiles=["a.yaml"], run="r", cores="2", gpus=1, extra=["out/x.parquet", "--forcerun", "rule_a"]
    )
    assert cmd[1:4] == ["out/x.parquet", "--forcerun", "rule_a"]
    assert cmd[cmd.index("--configfile") + 1 :] == ["a.yaml", "--config", "run=r"]


def test_without_gpus_one_model_job_per_gpu_or_else_per_core(monkeypatch):
    monkeypatch.setattr(cli, "local_gpus", lambda: 0)
    monkeypatch.setattr(cli.os, "cpu_count", lambda: 6)
    assert "gpu=6" in cli.snakemake_command([], configfiles=[], run=None, cores="2", gpus=None, extra=[])
    monkeypatch.setattr(cli, "local_gpus", lambda: 8)
    assert "gpu=8" in cli.snakemake_command([], configfiles=[], run=None, cores="2", gpus=None, extra=[])


def test_a_run_name_and_a_config_of_ones_own_clash_before_snakemake_starts():
    with pytest.raises(cli.UsageError, match="add run=trial to that --config"):
        cli.snakemake_command([], configfiles=[], run="trial", cores="1", gpus=1, extra=["--config", "x=1"])
    with pytest.raises(cli.UsageError, match="not a plain name"):
        cli.snakemake_command([], configfiles=[], run="a/b", cores="1", gpus=1, extra=[])


# (id, files written in the working folder, arguments, the one line's text after "debate-audit: error: ")
USER_ERRORS = [
    ("missing config file", {}, ["run", "--configfile", "missing.yaml"], "--configfile missing.yaml: no such file"),
    (
        "unparseable YAML",
        {"bad.yaml": "cwpor: {subset: 3\n"},
        ["run", "--configfile", "bad.yaml"],
        "--configfile bad.yaml: is not valid YAML at line 2",
    ),
    (
        "YAML that is not a mapping",
        {"list.yaml": "- cwpor\n- subset\n"},
        ["run", "--configfile", "list.yaml"],
        "--configfile list.yaml: holds a list, not a mapping",
    ),
    ("bad run name", {}, ["run", "--run", "a/b"], "--run: 'a/b' is not a plain name"),
    (
        "a missing config file among Snakemake's own arguments",
        {"ok.yaml": "run: x\n"},
        ["inspect", "--", "-n", "--configfile", "ok.yaml", "gone.yaml"],
        "--configfile gone.yaml: no such file",
    ),
    ("a missing config file of make plan", {}, ["plan", "--configfile", "gone.yaml"], "--configfile gone.yaml"),
    ("no model job at a time", {}, ["run", "--gpus", "0"], "argument --gpus: 0 must be at least 1"),
]


@pytest.mark.parametrize(("files", "argv", "said"), [c[1:] for c in USER_ERRORS], ids=[c[0] for c in USER_ERRORS])
def test_a_user_error_is_one_line_naming_the_file_or_argument_and_status_2(tmp_path, files, argv, said):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    done = subprocess.run(
        [sys.executable, "-m", "debate_audit", *argv], capture_output=True, text=True, timeout=120, cwd=tmp_path
    )
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.endswith("\n") and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(f"debate-audit: error: {said}"), done.stderr
    assert done.stdout == ""  # nothing ran: its "+ snakemake ..." would be a second line above, a plan here


def test_a_dry_run_through_the_command_plans_the_default_workflow():
    done = subprocess.run(
        [sys.executable, "-m", "debate_audit", "run", "--cores", "1", "--", "-n", "--quiet", "rules"],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cli.Path(__file__).resolve().parents[1],
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "audit_statistics" in done.stdout + done.stderr
