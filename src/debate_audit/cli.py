"""`debate-audit`: the workflow's commands, thin over Snakemake and the library (the Makefile calls them too).

    debate-audit run [--configfile F ...] [--run NAME] [-- SNAKEMAKE ARGS]   the workflow
    debate-audit plan [--configfile F ...] [--json]                          cost before a run
    debate-audit compare A B                                                 two runs side by side
    debate-audit inspect [--configfile F ...] [--run NAME]                   inspect_ai eval logs
    debate-audit browse [--configfile F ...] [--run NAME]                    the results browser
    debate-audit pin FILE [--check]                                          pin hub models to commits

Each subcommand's --help says what it writes. `python -m debate_audit` is the same command.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

from debate_audit.runtime.gpu_slots import local_gpus
from debate_audit.runtime.runs import name_error, results_dir

# Subcommands that hand their arguments to another program's own parser, as written.
PASSTHROUGH = {
    "plan": "debate_audit.tools.plan",
    "compare": "debate_audit.views.compare",
    "pin": "debate_audit.models.pins",
}


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
        raise SystemExit(f"debate-audit: error: --run: {error}")
    if run is not None and any(arg in ("--config", "-C") for arg in extra):
        raise SystemExit(
            "debate-audit: error: --run and a --config of your own: Snakemake keeps only the last --config; "
            f"add run={run} to that --config instead"
        )
    cmd = [snakemake_bin(), *targets, "--cores", cores, "--resources", f"gpu={gpus or default_gpus()}"]
    if configfiles:
        cmd += ["--configfile", *configfiles]
    if run is not None:
        cmd += ["--config", f"run={run}"]
    return cmd + list(extra)


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
    parser.add_argument("--cores", default="all", help="cores Snakemake may use (default: all)")
    parser.add_argument(
        "--gpus",
        type=int,
        help="model jobs at once (Snakemake's gpu resource; default: the machine's GPUs, else its cores)",
    )
    parser.add_argument("snakemake_args", nargs="*", metavar="-- SNAKEMAKE ARGS", help="passed to Snakemake as written")
    return parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
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
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in PASSTHROUGH:
        import importlib

        module = importlib.import_module(PASSTHROUGH[argv[0]])
        sys.argv = [f"debate-audit {argv[0]}", *argv[1:]]
        result = module.main(argv[1:])
        return int(result or 0)
    args = build_parser().parse_args(argv)
    targets = {"run": [], "inspect": ["inspect_logs"], "browse": ["browse"]}[args.command]
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
