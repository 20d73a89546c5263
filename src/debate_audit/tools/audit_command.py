"""`debate-audit audit`: the black-box auditor in one command (docs/black-box.md).

    debate-audit audit --base SPEC --target SPEC [--target SPEC ...] (--pairs FILE | --dataset quality_h|gpqa_h)
                       [--epsilon E] [--search-size M] [--test-size M] [--readout MODE] [--run NAME] [--plan]

A SPEC names a model in one string:

    DIR                 a local directory with safetensors weights (`./out/distilled`, `/models/base`)
    ORG/NAME@REV        a hub model at a revision (`HuggingFaceTB/SmolLM2-135M@<commit>`)
    URL#SERVED[@LABEL]  an OpenAI-compatible server and the name it serves the model under
                        (`http://127.0.0.1:8000/v1#my-distilled`); LABEL, optional, is the endpoint's `revision`:
                        change it when the model behind the name changes, or the call cache answers for the old one
    openai:MODEL        a hosted OpenAI model (`openai:ft:gpt-4.1-mini:my-org::abc123`), its key read from the
                        variable --key-env names (default OPENAI_API_KEY)
    NAME                a model the configuration already defines under `models:` (the embedded `smollm2-135m`)

The command writes the overlay it runs to runs/<run>/audit.yaml: the models (`models:`), the pairs
(`datasets.own`), the audit (`audited_models.<run>`) and the run's name, with the trained part of ER-Audit off
(`verifier.datasets: []`, as config/audit-models-only.yaml). It then runs Snakemake for the audit's outputs
only (no CW-POR, no trained verifier) and prints the verdict read from them (views/audit_verdict.py).
`debate-audit run --configfile runs/<run>/audit.yaml` repeats it. `--plan` prints the cost of those outputs
(tools/plan.py, the machinery of `debate-audit plan`) and stops.

Everything given is checked first and a mistake ends in one line naming it: a SPEC of none of the forms
above, a directory without weights, a pairs file that does not exist, a key variable that is unset, an
endpoint whose `/models` does not answer within 3 seconds (or does not serve the named model; not asked with
--plan, which calls no model), and whatever the configuration check (tools/config_check.py) finds in the
overlay.
"""

from __future__ import annotations

import copy
import json
import os
import re
import shlex
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from debate_audit.cli import Parser, UsageError, check_configfiles, cores, positive_int, snakemake_command
from debate_audit.eraudit.common.brought import NAME, RELEASE_DATASETS, RESERVED_NAMES
from debate_audit.runtime.masking import variable_name_error
from debate_audit.runtime.runs import name_error, results_dir

DEFAULT_CONFIG = "config/config.yaml"
SCHEMA = "config/schema.yaml"
HOSTED = {"openai": "https://api.openai.com/v1"}  # provider -> its API's base URL
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
ENDPOINT_TIMEOUT_S = 3.0
READOUTS = ("chat", "release", "plain", "auto")
HUB_ID = re.compile(r"[A-Za-z0-9][\w.-]*/[\w.-]+")
# The statistics and sweeps of each dataset, then the summary (audit_figures: summary.md and the figures).
AUDIT_FILES = ("summary", "records", "deltas", "sweep_confidence")


@dataclass(frozen=True)
class ModelChoice:
    """What one SPEC became: its name under `models:` and the entry the overlay writes there."""

    spec: str  # as given
    name: str
    entry: dict[str, Any] | None  # None: a model the configuration defines already, used as it is
    endpoint: str | None = None  # the base URL whose /models is asked before anything runs
    served: str | None = None  # the name a server of your own serves it under (checked there)


def _slug(text: str) -> str:
    """`text` as a model or dataset name (letters, digits, '.', '_', '-'; starting with a letter or digit)."""
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-._")
    return slug if slug and NAME.fullmatch(slug) else "model"


def parse_spec(text: str, *, defined: Mapping[str, Any], key_env: str | None = None) -> ModelChoice:
    """The model a SPEC names (the forms in this module's docstring); ValueError saying why it names none.
    `defined`: the configuration's `models:`; `key_env`: --key-env, if given."""
    text = text.strip()
    if not text:
        raise ValueError("is empty")
    if "://" in text:
        return _endpoint_spec(text, key_env)
    if text.startswith("openai:"):
        model = text.removeprefix("openai:")
        if not model:
            raise ValueError("names no model after 'openai:' (openai:MODEL, e.g. openai:gpt-4.1-mini)")
        entry = {
            "source": "openai",
            "provider": "openai",
            "id": model,
            "base_url": HOSTED["openai"],
            "api_key_env": key_env or DEFAULT_KEY_ENV,
        }
        return ModelChoice(text, _slug(model), entry, endpoint=HOSTED["openai"])
    if text in defined:
        return ModelChoice(text, text, None)
    path = Path(text).expanduser()
    if path.exists() or text.startswith(("/", "./", "../", "~")):
        return ModelChoice(text, _slug(path.resolve().name), {"source": "local", "path": _local_dir(path)})
    repo, at, revision = text.partition("@")
    if HUB_ID.fullmatch(repo) and at and revision:
        return ModelChoice(text, _slug(repo.split("/")[1]), {"source": "hf", "id": repo, "revision": revision})
    if HUB_ID.fullmatch(repo) and not at:
        raise ValueError(
            f"is no directory here, and as a hub id it needs a revision: {text}@REV (a commit, so that the "
            "audit can be repeated)"
        )
    raise ValueError(
        "is none of: a directory, ORG/NAME@REV, URL#SERVED-NAME, openai:MODEL, a model under models: "
        f"({', '.join(sorted(defined)) or 'none defined'})"
    )


def _endpoint_spec(text: str, key_env: str | None) -> ModelChoice:
    url, hash_, served = text.partition("#")
    if not re.fullmatch(r"https?://[^/\s#]+(/\S*)?", url):
        raise ValueError("is no http(s) URL of an OpenAI-compatible server (http://host:port/v1#served-name)")
    served, at, label = served.partition("@")
    if not hash_ or not served:
        raise ValueError(
            "names no served model: write the name the server serves it under after '#' "
            f"({url}#served-name; the server's /models lists them)"
        )
    if at and not label:
        raise ValueError(f"has an empty label after '@' ({url}#{served}@LABEL, or leave '@' out)")
    entry: dict[str, Any] = {"source": "openai", "id": served, "base_url": url.rstrip("/")}
    if label:
        entry["revision"] = label
    if key_env:
        entry["api_key_env"] = key_env
    return ModelChoice(text, _slug(served), entry, endpoint=entry["base_url"], served=served)


def _local_dir(path: Path) -> str:
    """The directory of a local SPEC as the overlay writes it; ValueError where it cannot be a model."""
    if not path.exists():
        raise ValueError("no such directory")
    if not path.is_dir():
        raise ValueError("is not a directory (a model is a directory with safetensors weights)")
    if (path / "adapter_config.json").exists():
        raise ValueError(
            "is a LoRA adapter, not a model: merge it into its base first (docs/black-box.md, 'Which models')"
        )
    if not any(path.glob("*.safetensors")):
        raise ValueError("holds no *.safetensors weights (only safetensors are loaded)")
    return str(path)


def name_models(base: ModelChoice, targets: Sequence[ModelChoice], defined: Mapping[str, Any]) -> list[ModelChoice]:
    """The base and the targets with distinct names: none a name the configuration already gives another
    model, nor one of the workflow's verifiers; a model named twice (a target that is the base: the
    false-alarm control) is defined again under a second name."""
    taken = set(defined) | set(RESERVED_NAMES)
    named = []
    used: set[str] = set()
    for choice in (base, *targets):
        if choice.entry is None and choice.name not in used:
            used.add(choice.name)
            named.append(choice)
            continue
        entry = copy.deepcopy(choice.entry if choice.entry is not None else dict(defined[choice.name]))
        name, n = choice.name, 1
        while name in taken or name in used:
            n += 1
            name = f"{choice.name}-{n}"
        used.add(name)
        named.append(ModelChoice(choice.spec, name, entry, choice.endpoint, choice.served))
    return named


def pairs_name(path: str, taken: Sequence[str]) -> str:
    """The `datasets.own` name of a pairs file: its stem, apart from the workflow's datasets."""
    stem = re.sub(r"(\.jsonl|\.json)?(\.gz)?$", "", Path(path).name)
    name, n = _slug(stem), 1
    while name in taken:
        n += 1
        name = f"{_slug(stem)}-{n}"
    return name


def build_overlay(
    *,
    run: str,
    models: Sequence[ModelChoice],
    pairs: Sequence[str],
    datasets: Sequence[str],
    epsilon: float | None = None,
    readout: str | None = None,
    search_size: int | None = None,
    test_size: int | None = None,
) -> dict[str, Any]:
    """The overlay of one audit: models[0] the base, the rest its targets; the trained part of ER-Audit off."""
    own: dict[str, dict[str, str]] = {}
    for path in pairs:
        own[pairs_name(path, [*RELEASE_DATASETS, "truthfulqa", *own])] = {"pairs": path}
    audit: dict[str, Any] = {
        "base": models[0].name,
        "targets": [m.name for m in models[1:]],
        "datasets": [*own, *datasets],
    }
    if readout is not None:
        audit["readout"] = readout
    if epsilon is not None:
        audit["epsilon"] = epsilon
    overlay: dict[str, Any] = {"run": run}
    new_models = {m.name: m.entry for m in models if m.entry is not None}
    if new_models:
        overlay["models"] = new_models
    if own:
        overlay["datasets"] = {"own": own}
    overlay["verifier"] = {"datasets": []}  # no debates, fine-tuning, Table 1 or trained audit
    pools = {pool: {"size": size} for pool, size in (("search", search_size), ("test", test_size)) if size is not None}
    if pools:
        overlay["paraphrase"] = pools
    overlay["audited_models"] = {run: audit}
    return overlay


def merged_config(configfiles: Sequence[str | Path], overlay: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The configuration Snakemake would see: the files deep-merged in order, then `overlay`."""
    from snakemake.utils import update_config

    config: dict[str, Any] = {}
    for path in configfiles:
        update_config(config, yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {})
    if overlay is not None:
        update_config(config, copy.deepcopy(dict(overlay)))
    return config


def audit_targets(overlay: Mapping[str, Any]) -> list[str]:
    """The Snakemake targets of the overlay's audit: its statistics and sweeps per dataset and the audit's
    summary with its figures (rules/audited_models.smk, rules/audit.smk audit_figures)."""
    run = overlay["run"]
    audit_out = results_dir(run) / "er_audit" / "audit"
    (audit,) = overlay["audited_models"].values()
    cells = [audit_out / "models" / run / dataset for dataset in audit["datasets"]]
    return [str(cell / f"{stem}.parquet") for cell in cells for stem in AUDIT_FILES] + [str(audit_out / "summary.md")]


def endpoint_error(url: str, served: str | None, *, timeout: float = ENDPOINT_TIMEOUT_S) -> str | None:
    """Why the endpoint at `url` cannot be audited now, or None: its `/models` must answer within `timeout`
    seconds (any HTTP status: a hosted API answers 401 without a key, which is sent only with requests) and,
    for a server of your own (`served`), list the served model."""
    request = urllib.request.Request(f"{url.rstrip('/')}/models", headers={"Accept": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:  # noqa: S310 (http(s) only: parse_spec)
            body = response.read(1_000_000)
    except urllib.error.HTTPError:
        return None
    except (urllib.error.URLError, TimeoutError, OSError) as err:
        reason = getattr(err, "reason", err)
        return f"{url}/models did not answer within {timeout:g} s ({reason})"
    if served is None:
        return None
    try:
        ids = [m["id"] for m in json.loads(body)["data"]]
    except (ValueError, KeyError, TypeError):
        return None  # not the OpenAI list format: the first request will say more
    if served not in ids:
        return f"{url} serves {', '.join(ids) or 'no model'}, not {served}"
    return None


def build_parser() -> Parser:
    parser = Parser(
        prog="debate-audit audit",
        description="Audit models you did not train against their base in one command: writes the overlay to "
        "runs/<run>/audit.yaml, runs the audit's jobs only (results under runs/<run>/results/er_audit/audit/) "
        "and prints the verdict. SPEC: a local directory, ORG/NAME@REV (hub), URL#SERVED-NAME[@LABEL] (an "
        "OpenAI-compatible server), openai:MODEL (hosted; key from --key-env), or a model under models: of the "
        "config (e.g. smollm2-135m). Repeat it with `debate-audit run --configfile runs/<run>/audit.yaml`.",
    )
    parser.add_argument("--base", required=True, metavar="SPEC", help="the model before adaptation")
    parser.add_argument(
        "--target", required=True, action="append", metavar="SPEC", help="an adapted model (repeat for several)"
    )
    parser.add_argument("--pairs", action="append", default=[], metavar="FILE", help="your pairs (datasets.own)")
    parser.add_argument(
        "--dataset", action="append", default=[], choices=RELEASE_DATASETS, help="a release's pairs (the config's)"
    )
    parser.add_argument("--epsilon", type=_non_negative, help="the counterexample threshold (default: audit.epsilon)")
    parser.add_argument("--search-size", type=positive_int, metavar="M", help="Stage-1 paraphrases per q_h")
    parser.add_argument("--test-size", type=positive_int, metavar="M", help="Stage-2 paraphrases per q_h and generator")
    parser.add_argument("--readout", choices=READOUTS, help="how both models are read (default: verifier.readout)")
    parser.add_argument("--run", default="audit", metavar="NAME", help="the run and audit name (default: audit)")
    parser.add_argument(
        "--key-env",
        metavar="NAME",
        help=f"the variable holding a hosted model's key (default {DEFAULT_KEY_ENV}); also sent to a server",
    )
    parser.add_argument(
        "--configfile",
        nargs="+",
        default=[],
        metavar="FILE",
        help="overlays under the audit's (e.g. config/paper.yaml)",
    )
    parser.add_argument("--plan", action="store_true", help="print the audit's cost (jobs, calls, tokens) and stop")
    parser.add_argument("--cores", default="all", type=cores, help="cores Snakemake may use (default: all)")
    parser.add_argument("--gpus", type=positive_int, help="model jobs at once (default: as `debate-audit run`)")
    return parser


def _non_negative(text: str) -> float:
    import argparse

    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"{text} must be 0 or more")
    return value


@dataclass(frozen=True)
class Prepared:
    """A checked audit: its overlay, where it is written and the config files it runs on."""

    overlay: dict[str, Any]
    path: Path
    configfiles: list[str]  # the overlays under the audit's, as given
    models: list[ModelChoice]


def prepare(args: Any, *, check_endpoints: bool, reach: Callable[[str, str | None], str | None] = endpoint_error):
    """Check everything `args` gives and build the overlay (written by `write_overlay`); UsageError naming
    the first mistake."""
    if not Path(DEFAULT_CONFIG).is_file():
        raise UsageError(f"no {DEFAULT_CONFIG} here: run it from the repository's folder")
    if error := name_error(args.run):
        raise UsageError(f"--run: {error.removeprefix('run: ')}")
    if not args.pairs and not args.dataset:
        raise UsageError("no pairs to audit on: give --pairs FILE or --dataset quality_h|gpqa_h")
    if args.key_env is not None and (reason := variable_name_error(args.key_env)):
        raise UsageError(f"--key-env {reason}")  # never the value: it may be the key itself
    check_configfiles([("--configfile", path) for path in args.configfile])
    for path in args.pairs:
        if "://" not in path and not Path(path).is_file():
            raise UsageError(f"--pairs {path}: no such file")
    defined = merged_config([DEFAULT_CONFIG, *args.configfile]).get("models") or {}
    choices = []
    for option, spec in [("--base", args.base), *(("--target", t) for t in args.target)]:
        try:
            choices.append(parse_spec(spec, defined=defined, key_env=args.key_env))
        except ValueError as err:
            raise UsageError(f"{option} {spec}: {err}") from None
    models = name_models(choices[0], choices[1:], defined)
    overlay = build_overlay(
        run=args.run,
        models=models,
        pairs=args.pairs,
        datasets=list(dict.fromkeys(args.dataset)),
        epsilon=args.epsilon,
        readout=args.readout,
        search_size=args.search_size,
        test_size=args.test_size,
    )
    from debate_audit.tools.config_check import config_errors

    errors = config_errors(merged_config([DEFAULT_CONFIG, *args.configfile], overlay), SCHEMA)
    if errors:
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        raise UsageError(f"the audit's configuration: {errors[0]}{more}")
    options = ["--base", *(["--target"] * len(args.target))]
    for option, model in zip(options, models, strict=True):
        if not check_endpoints or model.endpoint is None:
            continue
        key_env = (model.entry or {}).get("api_key_env")
        if (model.entry or {}).get("provider") and key_env and not os.environ.get(key_env):
            raise UsageError(f"{option} {model.spec}: its key's variable {key_env} is not set in this shell")
        if error := reach(model.endpoint, model.served):
            raise UsageError(f"{option} {model.spec}: {error}")
    path = results_dir(args.run).parent / "audit.yaml"
    return Prepared(overlay, path, list(args.configfile), models)


def write_overlay(prepared: Prepared, argv: Sequence[str]) -> None:
    """runs/<run>/audit.yaml, with the command that wrote it and the one that repeats it."""
    repeat = shlex.join(["debate-audit", "run", "--configfile", *prepared.configfiles, str(prepared.path)])
    header = (
        f"# The audit of `debate-audit audit {shlex.join(argv)}` (src/debate_audit/tools/audit_command.py).\n"
        f"# Repeat it: {repeat}\n"
    )
    prepared.path.parent.mkdir(parents=True, exist_ok=True)
    prepared.path.write_text(header + yaml.safe_dump(prepared.overlay, sort_keys=False), encoding="utf-8")


def audit_jobs(configfiles: Sequence[str], targets: Sequence[str]) -> dict[str, int]:
    """Jobs per rule of the audit from nothing (`snakemake -n --forceall` on its targets)."""
    from debate_audit.tools.plan_counts import dry_run_jobs

    return dry_run_jobs(configfiles, targets=targets)


def print_plan(prepared: Prepared) -> None:
    from debate_audit.tools.plan import build_plan, load_config
    from debate_audit.tools.plan_report import render

    configfiles = [DEFAULT_CONFIG, *prepared.configfiles, str(prepared.path)]
    config = load_config(configfiles)
    jobs = audit_jobs(configfiles, audit_targets(prepared.overlay))
    shared = Path("../shared/data")
    plan = build_plan(config, jobs, shared if shared.is_dir() else None, rules=set(jobs))
    print(f"Cost plan of the audit in {prepared.path} (its jobs only, from nothing; no model is loaded)\n")
    print(render(plan))


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = build_parser().parse_args(argv)
    prepared = prepare(args, check_endpoints=not args.plan)
    write_overlay(prepared, argv)
    print(f"The audit's overlay: {prepared.path}", file=sys.stderr)
    if args.plan:
        print_plan(prepared)
        return 0
    cmd = snakemake_command(
        audit_targets(prepared.overlay),
        configfiles=[*prepared.configfiles, str(prepared.path)],
        run=None,  # the overlay names the run
        cores=args.cores,
        gpus=args.gpus,
        extra=[],
    )
    print("+ " + " ".join(cmd), file=sys.stderr, flush=True)
    status = subprocess.run(cmd).returncode
    if status != 0:
        return status
    from debate_audit.views.audit_verdict import render_verdict

    config = merged_config([DEFAULT_CONFIG, *prepared.configfiles, prepared.path])
    repeat = shlex.join([*prepared.configfiles, str(prepared.path)])
    print(render_verdict(config, prepared.overlay["run"], repeat=repeat))
    return 0


if __name__ == "__main__":
    sys.exit(main())
