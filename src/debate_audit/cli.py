"""`debate-audit`: the workflow's commands, thin over Snakemake and the library (the Makefile calls them too).

    debate-audit run [--configfile F ...] [--run NAME] [-- SNAKEMAKE ARGS]   the workflow
    debate-audit plan [--configfile F ...] [--json]                          cost before a run
    debate-audit compare A B                                                 two runs side by side
    debate-audit inspect [--configfile F ...] [--run NAME]                   inspect_ai eval logs
    debate-audit browse [--configfile F ...] [--run NAME]                    the results browser
    debate-audit pin FILE [--check]                                          pin hub models to commits
    debate-audit audit --base SPEC --target SPEC ... (--pairs F | --dataset D)  audit models you bring

Each subcommand's --help says what it writes. `python -m debate_audit` is the same command.

What it is given is checked before any other program starts: a mistake (a config file that is missing, is no
YAML or holds no mapping, a bad run name, a bad option value) ends in one line, `debate-audit: error: ...`
naming the file or argument, and exit status 2, never in a traceback from deep inside Snakemake.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NoReturn

import yaml

from debate_audit.runtime.gpu_slots import local_gpus
from debate_audit.runtime.runs import name_error, results_dir

# Subcommands that hand their arguments to another program's own parser, as written.
PASSTHROUGH = {
    "plan": "debate_audit.tools.plan",
    "compare": "debate_audit.views.compare",
    "pin": "debate_audit.models.pins",
    "audit": "debate_audit.tools.audit_command",
}
HELP = ("-h", "--help")
SNAKEMAKE_CONFIGFILE = ("--configfile", "--configfiles")  # Snakemake's own option, in `-- SNAKEMAKE ARGS`


class UsageError(ValueError):
    """A mistake in what `debate-audit` was given: main prints it as one line and exits with status 2."""


class Parser(argparse.ArgumentParser):
    """argparse's parser, its errors one line like the command's own (no usage block, status 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"debate-audit: error: {message} (see {self.prog} --help)\n")


def configfile_error(label: str, path: str) -> str | None:
    """Why `path` cannot be a config file, or None: it must exist, be a readable file and hold a YAML mapping.
    `label` names where it was given (`--configfile`). A YAML error is told by line and column, never by the
    text there, which may be a key."""
    file = Path(path)
    if not file.exists():
        return f"{label} {path}: no such file"
    if file.is_dir():
        return f"{label} {path}: is a directory, not a config file"
    try:
        loaded = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as err:
        return f"{label} {path}: cannot be read ({err.strerror})"
    except UnicodeDecodeError:
        return f"{label} {path}: is not UTF-8 text"
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        problem = getattr(err, "problem", None)
        return f"{label} {path}: is not valid YAML{where}" + (f" ({problem})" if problem else "")
    if not isinstance(loaded, dict):
        found = "is empty" if loaded is None else f"holds a {type(loaded).__name__}"
        return f"{label} {path}: {found}, not a mapping of config keys (key: value lines)"
    return None


def option_values(args: Sequence[str], names: Sequence[str]) -> Iterator[str]:
    """The values of options `names` in `args` as argparse and Snakemake read them: `--name A B` (up to the
    next option) and `--name=A`."""
    taking = False
    for arg in args:
        if arg.startswith("-"):
            name, eq, value = arg.partition("=")
            taking = name in names and not eq
            if name in names and eq:
                yield value
        elif taking:
            yield arg


def check_configfiles(files: Sequence[tuple[str, str]]) -> None:
    """Raise UsageError naming the first unusable config file of (label, path) pairs."""
    for label, path in files:
        error = configfile_error(label, path)
        if error:
            raise UsageError(error)


def passthrough_configfiles(command: str, args: Sequence[str]) -> list[tuple[str, str]]:
    """The config files a passthrough subcommand will read, as given: plan's --configfile, pin's FILEs."""
    if any(arg in HELP for arg in args):
        return []
    if command == "plan":
        return [("--configfile", path) for path in option_values(args, ["--configfile"])]
    if command == "pin":
        return [("pin", arg) for arg in args if not arg.startswith("-")]
    return []


def positive_int(text: str) -> int:
    """argparse type of --gpus: at least one model job at a time."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text} must be at least 1")
    return value


def cores(text: str) -> str:
    """argparse type of --cores: 'all' or a positive number, as Snakemake takes it."""
    if text != "all" and not (text.isdigit() and int(text) >= 1):
        raise argparse.ArgumentTypeError(f"{text!r} is neither 'all' nor a number of cores (1 or more)")
    return text


def snakemake_bin() -> str:
    """The `snakemake` of this interpreter's environment (the one that has the package)."""
    beside = Path(sys.executable).parent / "snakemake"
    return str(beside) if beside.exists() else "snakemake"


def default_gpus() -> int:
    """`gpu` resource slots for a local run: the machine's GPUs, else one per core (each model job on a CPU
    runs single-threaded on a core)."""
    return local_gpus() or (os.cpu_count() or 1)


def snakemake_command(
    targets: Sequence[str],
    *,
    configfiles: Sequence[str],
    run: str | None,
    cores: str,
    gpus: int | None,
    extra: Sequence[str],
) -> list[str]:
    """The Snakemake command line of `run`, `inspect` and `browse`."""
    if run is not None and (error := name_error(run)):
        raise UsageError(f"--run: {error.removeprefix('run: ')}")
    if run is not None and any(arg in ("--config", "-C") for arg in extra):
        raise UsageError(
            "--run and a --config of your own: Snakemake keeps only the last --config; "
            f"add run={run} to that --config instead"
        )
    # Snakemake's own arguments (targets among them) before ours: --configfile and --config take every word
    # up to the next option, so a target after them would be read as a config file.
    cmd = [snakemake_bin(), *targets, *extra, "--cores", cores, "--resources", f"gpu={gpus or default_gpus()}"]
    if configfiles:
        cmd += ["--configfile", *configfiles]
    if run is not None:
        cmd += ["--config", f"run={run}"]
    return cmd


def _workflow_parser(sub, name: str, help_text: str, description: str) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=help_text, description=description)
    parser.add_argument(
        "--configfile",
        nargs="+",
        default=[],
        metavar="FILE",
        help="config overlays on config/config.yaml, in order (e.g. config/paper.yaml)",
    )
    parser.add_argument("--run", metavar="NAME", help="a named run: its files go under runs/NAME/ (config `run`)")
    parser.add_argument("--cores", default="all", type=cores, help="cores Snakemake may use (default: all)")
    parser.add_argument(
        "--gpus",
        type=positive_int,
        help="model jobs at once (Snakemake's gpu resource; default: the machine's GPUs, else its cores)",
    )
    parser.add_argument("snakemake_args", nargs="*", metavar="-- SNAKEMAKE ARGS", help="passed to Snakemake as written")
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="debate-audit",
        description="How LLM judges and verifiers get misled: CW-POR persuasion debates and ER-Audit verifier "
        "audits, as one Snakemake workflow.",
        epilog="Run from the repository's folder (the workflow's Snakefile and config/ are there).",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _workflow_parser(
        sub,
        "run",
        "run the workflow (default: config/config.yaml, offline, on this machine)",
        "Run the whole workflow: writes results/ (Parquet, figures, tables, the audit summary, the browser at "
        "results/browse/index.html, the merged config at results/config.yaml), logs/ (one log per job) and "
        "benchmarks/rules/; a named run (--run NAME) writes them under runs/NAME/. Prepared models go to "
        "resources/models/, the call cache to results/cache (config `cache`).",
    )
    sub.add_parser(
        "plan",
        help="jobs, model calls, tokens, GPU-hours and memory of a config, before a run",
        description="Print the cost plan of a configuration (default: config/config.yaml + config/paper.yaml): "
        "per rule its jobs, calls, tokens and GPU-hours; per verifier its fine-tuning memory; per API model its "
        "calls and cost. Writes nothing. Arguments: see `debate-audit plan --help`.",
        add_help=False,
    )
    sub.add_parser(
        "compare",
        help="two runs' headline figures side by side, with paired tests",
        description="Compare two finished runs (names, or `default` for results/): writes "
        "results/compare/<A>_vs_<B>/ (summary.md and Parquet tables). Arguments: see `debate-audit compare --help`.",
        add_help=False,
    )
    _workflow_parser(
        sub,
        "inspect",
        "the finished run's experiments as inspect_ai eval logs",
        "Write the finished run's judgments, readouts and audit as inspect_ai eval logs under results/inspect/ "
        "(then `inspect view --log-dir results/inspect`). Calls no model.",
    )
    _workflow_parser(
        sub,
        "browse",
        "(re)build the results browser and print where it is",
        "Build results/browse/index.html from the finished run's outputs (calls no model) and print its path: "
        "one static page with every CW-POR debate and every audited hidden question.",
    )
    sub.add_parser(
        "pin",
        help="pin a config file's hub models to the commits their branches point to now",
        description="Rewrite the `revision:` lines of a config file's hub models (needs the hub). "
        "Arguments: see `debate-audit pin --help`.",
        add_help=False,
    )
    sub.add_parser(
        "audit",
        help="audit models you did not train against their base, in one command (docs/black-box.md)",
        description="Write the audit's overlay to runs/<run>/audit.yaml, run its jobs only and print the verdict. "
        "Arguments: see `debate-audit audit --help`.",
        add_help=False,
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        return _dispatch(argv)
    except UsageError as err:
        print(f"debate-audit: error: {err}", file=sys.stderr)
        return 2


def _dispatch(argv: list[str]) -> int:
    if argv and argv[0] in PASSTHROUGH:
        import importlib

        check_configfiles(passthrough_configfiles(argv[0], argv[1:]))
        module = importlib.import_module(PASSTHROUGH[argv[0]])
        sys.argv = [f"debate-audit {argv[0]}", *argv[1:]]
        result = module.main(argv[1:])
        return int(result or 0)
    args = build_parser().parse_args(argv)
    targets = {"run": [], "inspect": ["inspect_logs"], "browse": ["browse"]}[args.command]
    given = [("--configfile", path) for path in args.configfile]
    check_configfiles(given + [("--configfile", p) for p in option_values(args.snakemake_args, SNAKEMAKE_CONFIGFILE)])
    cmd = snakemake_command(
        targets,
        configfiles=args.configfile,
        run=args.run,
        cores=args.cores,
        gpus=args.gpus,
        extra=args.snakemake_args,
    )
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    status = subprocess.run(cmd).returncode
    if status == 0 and args.command == "browse":
        print(results_dir(args.run or "") / "browse" / "index.html")
    return status


if __name__ == "__main__":
    sys.exit(main())
