"""The whole configuration checked once at workflow start: the schema, then every rule that spans keys.

Called from the Snakefile before any job is planned, so a config mistake stops the run (and the dry run)
with the key that is wrong, instead of surfacing after minutes of model work or as a missing file path.
Every error found is reported at once, one per line, each starting with its dotted key.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from debate_audit.cwpor import roles
from debate_audit.data.io import URL_SCHEMES, url_scheme
from debate_audit.eraudit.audit.brought import audit_errors, trained_datasets
from debate_audit.eraudit.common import grid
from debate_audit.models.spec import ModelSpec
from debate_audit.runtime.runs import name_error as run_name_error

DEVICE = re.compile(r"^(auto|cpu|cuda|cuda:\d+)$")
# Dataset keys that hold a location (local path or http(s) URL): (dataset, key, required).
DATASET_LOCATIONS = [
    ("truthfulqa", "path", False),
    ("quality_h", "pairs", True),
    ("quality_h", "stories", True),
    ("gpqa_h", "pairs", True),
    ("gpqa_h", "contexts", True),
]


class ConfigError(ValueError):
    """The configuration is invalid; the message lists each problem with its key."""


def model_uses(config: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(key, model name) for every config key that names a model of `models:`."""
    yield from _experiment_uses(config)
    # A random stand-in borrows a used model's tokenizer: that model is used too.
    models = config.get("models") or {}
    direct = list(dict.fromkeys(name for _, name in _experiment_uses(config)))
    for name in direct:
        entry = models.get(name)
        if isinstance(entry, dict) and entry.get("source") == "random" and entry.get("tokenizer"):
            yield f"models.{name}.tokenizer", entry["tokenizer"]


def _experiment_uses(config: dict[str, Any]) -> Iterator[tuple[str, str]]:
    cwpor = config.get("cwpor") or {}
    for i, name in enumerate(cwpor.get("models") or []):
        yield f"cwpor.models[{i}]", name
    for role in ("neutral", "persuasive", "judge"):
        if cwpor.get(f"{role}_model"):
            yield f"cwpor.{role}_model", cwpor[f"{role}_model"]
    for i, name in enumerate(cwpor.get("cross_judges") or []):
        yield f"cwpor.cross_judges[{i}]", name
    yield from _part1_uses(config)
    # The paraphrase generators write the pools of every audit, of the trained verifiers or of models you bring.
    if trained_datasets(config) or config.get("audited_models"):
        yield from _paraphrase_uses(config)
    for name, entry in (config.get("audited_models") or {}).items():
        if not isinstance(entry, dict):
            continue
        if isinstance(entry.get("base"), str):
            yield f"audited_models.{name}.base", entry["base"]
        for i, target in enumerate(entry.get("targets") or []):
            yield f"audited_models.{name}.targets[{i}]", target


def _part1_uses(config: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """The models of ER-Audit part 1 (debates, verifiers): none when `verifier.datasets` is empty."""
    if not trained_datasets(config):
        return
    if (config.get("debate") or {}).get("debater"):
        yield "debate.debater", config["debate"]["debater"]
    if (config.get("debate") or {}).get("selector"):
        yield "debate.selector", config["debate"]["selector"]
    verifier = config.get("verifier") or {}
    if verifier.get("base_model"):
        yield "verifier.base_model", verifier["base_model"]
    # base_model, when set, replaces base_models (eraudit/grid.base_models): the list is then unused.
    for i, name in enumerate([] if verifier.get("base_model") else verifier.get("base_models") or []):
        yield f"verifier.base_models[{i}]", name
    # The adjudication teacher is used only when adjudications are the L_lm target.
    if verifier.get("lm_target") == "adjudication" and (verifier.get("adjudication") or {}).get("teacher"):
        yield "verifier.adjudication.teacher", verifier["adjudication"]["teacher"]


def _paraphrase_uses(config: dict[str, Any]) -> Iterator[tuple[str, str]]:
    paraphrase = config.get("paraphrase") or {}
    if (paraphrase.get("search") or {}).get("generator"):
        yield "paraphrase.search.generator", paraphrase["search"]["generator"]
    for gen, entry in ((paraphrase.get("test") or {}).get("generators") or {}).items():
        if isinstance(entry, dict) and entry.get("model"):
            yield f"paraphrase.test.generators.{gen}.model", entry["model"]


def used_models(config: dict[str, Any]) -> list[str]:
    """The models some experiment uses, in order of first use: only these are prepared."""
    return list(dict.fromkeys(name for _, name in model_uses(config)))


def _schema_errors(config: dict[str, Any], schema_path: str | Path) -> list[str]:
    import jsonschema
    import yaml

    schema = yaml.safe_load(Path(schema_path).read_text())
    validator = jsonschema.Draft202012Validator(schema)
    errors = []
    for err in sorted(validator.iter_errors(config), key=lambda e: list(map(str, e.absolute_path))):
        key = ".".join(str(p) for p in err.absolute_path) or "(top level)"
        message = err.message
        if err.context:  # anyOf / oneOf: say what each alternative wanted
            message += " (" + "; ".join(sorted({c.message for c in err.context})) + ")"
        errors.append(f"{key}: {message}")
    return errors


def _model_errors(name: str, entry: dict[str, Any]) -> list[str]:
    key = f"models.{name}"
    errors = []
    try:
        ModelSpec.from_config(name, entry)
    except (TypeError, ValueError) as err:
        errors.append(str(err) if str(err).startswith(key) else f"{key}: {err}")
    device = entry.get("device", "auto")
    if not isinstance(device, str) or not DEVICE.match(device):
        errors.append(f"{key}.device: {device!r} is not a device; use auto, cpu, cuda or cuda:N")
    batch = entry.get("batch_size", 8)
    if batch != "auto" and (isinstance(batch, bool) or not isinstance(batch, int) or batch < 1):
        errors.append(f"{key}.batch_size: {batch!r} must be a positive integer or 'auto'")
    if entry.get("source") == "openai":
        for needed, what in (
            ("base_url", "the server's URL"),
            ("api_key_env", "the name of the variable holding its key"),
        ):
            if not entry.get(needed):
                errors.append(f"{key}.{needed}: source 'openai' needs {what}")
    if entry.get("base_url"):
        scheme = url_scheme(entry["base_url"])
        if scheme not in URL_SCHEMES:
            errors.append(
                f"{key}.base_url: {entry['base_url']!r} needs an http:// or https:// URL"
                + (f", not scheme {scheme!r}" if scheme else "")
            )
    if entry.get("source") == "local" and entry.get("path") and not Path(entry["path"]).is_dir():
        errors.append(f"{key}.path: {entry['path']}: no such directory")
    elif (
        entry.get("source") == "local" and entry.get("path") and (Path(entry["path"]) / "adapter_config.json").exists()
    ):
        errors.append(
            f"{key}.path: {entry['path']} holds a LoRA adapter (adapter_config.json), not a model: merge it into "
            "its base first (peft: PeftModel.from_pretrained(base, path).merge_and_unload().save_pretrained(out, "
            "safe_serialization=True), and the tokenizer beside it) and give the merged directory"
        )
    return errors


def stale_local_warnings(specs: Iterable[ModelSpec], prepared: Callable[[str], Path]) -> list[str]:
    """A warning per used `source: local` model whose directory holds a file newer than its prepared copy
    (`prepared(name)`: resources/models/<name>): prepare_model copies the directory once, so weights written
    into it again (a model retrained elsewhere in place) would be audited as the old ones."""
    warnings = []
    for spec in specs:
        stamp = prepared(spec.name) / "fingerprint.json"
        if spec.source != "local" or not spec.path or not stamp.exists() or not Path(spec.path).is_dir():
            continue
        newer = sorted(
            f.name for f in Path(spec.path).iterdir() if f.is_file() and f.stat().st_mtime > stamp.stat().st_mtime
        )
        if newer:
            warnings.append(
                f"models.{spec.name}.path: {', '.join(newer[:3])}{' ...' if len(newer) > 3 else ''} in {spec.path} "
                f"changed after the model was prepared into {stamp.parent}: that copy is what runs; delete "
                f"{stamp.parent} to prepare the model again"
            )
    return warnings


def location_error(key: str, location: str) -> str | None:
    """Why a dataset location cannot be read, or None: a URL scheme we cannot fetch, a missing file."""
    scheme = url_scheme(location)
    if scheme == "file":
        return f"{key}: {location}: file:// URLs are not supported; give the local path ({location[len('file://') :]})"
    if scheme is not None and scheme not in URL_SCHEMES:
        return f"{key}: {location}: URL scheme {scheme!r} is not supported; use http(s) or a local path"
    if scheme is None:
        path = Path(location)
        if not path.exists():
            return f"{key}: {location}: file not found"
        if path.is_dir():
            return f"{key}: {location}: is a directory, not a file"
    return None


def _dataset_errors(datasets: dict[str, Any]) -> list[str]:
    errors = []
    tqa = datasets.get("truthfulqa") or {}
    if (tqa.get("path") is None) == (tqa.get("hf_id") is None):
        errors.append(
            "datasets.truthfulqa: give exactly one of 'path' (CSV, local or URL) or 'hf_id' "
            "(an overlay that sets one sets the other to null)"
        )
    for name, entry in (datasets.get("own") or {}).items():
        location = entry.get("pairs") if isinstance(entry, dict) else None
        error = location_error(f"datasets.own.{name}.pairs", location) if isinstance(location, str) else None
        if error:
            errors.append(error)
    for dataset, key, required in DATASET_LOCATIONS:
        location = (datasets.get(dataset) or {}).get(key)
        if location is None:
            if required:
                errors.append(f"datasets.{dataset}.{key}: required (a local path or an http(s) URL), not null")
            continue
        error = location_error(f"datasets.{dataset}.{key}", location)
        if error:
            errors.append(error)
    return errors


def _transcript_errors(config: dict[str, Any]) -> list[str]:
    """debate.transcripts.source release: every verifier dataset needs readable release files per mode."""
    transcripts = (config.get("debate") or {}).get("transcripts") or {}
    if transcripts.get("source") != "release":
        return []
    release = transcripts.get("release") or {}
    errors = []
    for dataset in (config.get("verifier") or {}).get("datasets") or []:
        if dataset not in release:
            errors.append(
                f"debate.transcripts.release.{dataset}: source 'release' needs the release's transcript "
                f"files of every verifier dataset (honest and adversarial), or drop {dataset} from "
                "verifier.datasets"
            )
            continue
        for mode in ("honest", "adversarial"):
            for i, location in enumerate(release[dataset].get(mode) or []):
                error = location_error(f"debate.transcripts.release.{dataset}.{mode}[{i}]", location)
                if error:
                    errors.append(error)
    return errors


def _audit_errors(audit: dict[str, Any]) -> list[str]:
    errors = []
    eps, pct = audit.get("epsilon"), audit.get("epsilon_percentile")
    if (eps is None) == (pct is None):
        errors.append(
            "audit.epsilon / audit.epsilon_percentile: set exactly one (the other null); "
            f"now epsilon={eps!r}, epsilon_percentile={pct!r}"
        )
    if isinstance(eps, int | float) and eps < 0:
        errors.append(f"audit.epsilon: {eps} must be >= 0 (Delta > epsilon is a counterexample)")
    return errors


def config_errors(config: dict[str, Any], schema_path: str | Path | None = None) -> list[str]:
    """Every problem of the configuration, each naming its key; empty when it is valid."""
    errors = _schema_errors(config, schema_path) if schema_path else []
    try:
        cross = _cross_key_errors(config)
    except (AttributeError, KeyError, TypeError):
        if not errors:  # a shape the schema let through: a bug here, not a config mistake
            raise
        cross = []
    # Where both name the same key, the cross-key message is the clearer one.
    explained = {e.split(": ")[0] for e in cross}
    errors = [e for e in errors if e.split(": ")[0] not in explained] + cross
    return list(dict.fromkeys(errors))


def price_errors(config: dict[str, Any]) -> list[str]:
    """`prices` (make plan's API costs) names models under `models:` only: a price is keyed by the model's
    name, and a misspelt one would price nothing."""
    models = config.get("models") or {}
    return [
        f"prices.{name}: no model {name!r} under models: (a price is keyed by the model's name there; "
        f"models: {sorted(models)})"
        for name in config.get("prices") or {}
        if name not in models
    ]


def _cross_key_errors(config: dict[str, Any]) -> list[str]:
    # a run's name becomes a folder (runs/<run>/): a path, or make compare's name for the unnamed run, is refused
    run_error = run_name_error(config.get("run"))
    errors = [run_error] if run_error else []
    models = config.get("models") or {}
    for key, name in model_uses(config):
        if name not in models:
            errors.append(f"{key}: model {name!r} is not defined under 'models:' (defined: {sorted(models)})")
    errors += price_errors(config)
    # Unused models are never prepared or loaded; only the schema applies to them.
    for name in used_models(config):
        if isinstance(models.get(name), dict):
            errors.extend(_model_errors(name, models[name]))
    errors.extend(_dataset_errors(config.get("datasets") or {}))
    errors.extend(_transcript_errors(config))
    verifier = config.get("verifier") or {}
    if (
        isinstance(verifier, dict)
        and trained_datasets(config)
        and not verifier.get("base_model")
        and not verifier.get("base_models")
    ):
        errors.append(
            "verifier.base_models: name at least one verifier architecture (a model from 'models:'), "
            "or set verifier.base_model"
        )
    errors.extend(audit_errors(config))
    lora = (verifier.get("lora") or {}).get("enabled") if isinstance(verifier, dict) else None
    if isinstance(lora, list):
        architectures = grid.base_models(verifier)
        errors.extend(
            f"verifier.lora.enabled[{i}]: {name!r} is not a verifier architecture "
            f"(verifier.base_models: {architectures})"
            for i, name in enumerate(lora)
            if name not in architectures
        )
    if isinstance(config.get("debate"), dict) and isinstance(verifier, dict):
        errors.extend(_sweep_errors(config["debate"], verifier))
    if (
        isinstance(verifier, dict)
        and (verifier.get("org_training") or {}).get("qh_items") == "train"
        and verifier.get("qh_readout") != "bare"
    ):
        errors.append(
            "verifier.org_training.qh_items: train trains L_qh on pairs without a transcript, so it needs "
            f"verifier.qh_readout: bare (got {verifier.get('qh_readout')!r})"
        )
    if isinstance(config.get("audit"), dict):
        errors.extend(_audit_errors(config["audit"]))
    if isinstance(config.get("cwpor"), dict):
        errors.extend(_cwpor_errors(config["cwpor"]))
    if isinstance(config.get("paraphrase"), dict):
        errors.extend(_provider_pool_errors(config["paraphrase"], models))
    return errors


# The pool settings a provider model's request may also set: the request's value is the one sent
# (models/api.py), so a pool that says another would record settings its replies were not drawn with.
SENT_BY_REQUEST = ("temperature", "top_p")


def _provider_pool_errors(paraphrase: dict[str, Any], models: dict[str, Any]) -> list[str]:
    """A pool drawn by a provider model states the temperature and top_p its model's request sends."""
    pools = []  # (key prefix, model, the pool's settings: a test generator's own keys over test's defaults)
    search = paraphrase.get("search") or {}
    pools.append(("paraphrase.search", search.get("generator"), search))
    test = paraphrase.get("test") or {}
    defaults = {k: v for k, v in test.items() if k != "generators"}
    for gen, entry in (test.get("generators") or {}).items():
        if isinstance(entry, dict):
            key = f"paraphrase.test.generators.{gen}"
            pools.append((key, entry.get("model"), {**defaults, **entry}))
    errors = []
    for key, name, settings in pools:
        entry = models.get(name) if isinstance(name, str) else None
        if not isinstance(entry, dict) or not entry.get("provider") or not isinstance(entry.get("request"), dict):
            continue
        for setting in SENT_BY_REQUEST:
            sent, stated = entry["request"].get(setting), settings.get(setting)
            if sent is not None and stated != sent:
                errors.append(
                    f"{key}.{setting}: {stated!r}, but models.{name}.request.{setting} sends {sent!r} "
                    f"(a provider model is sent its request, not the pool's settings); set it to {sent!r}"
                )
    return errors


def _sweep_errors(debate: dict[str, Any], verifier: dict[str, Any]) -> list[str]:
    """The ablations' reach names verifier architectures and datasets of this run; a stated word limit names
    one of its lengths."""
    errors = []
    known = {"architectures": grid.base_models(verifier), "datasets": list(verifier.get("datasets") or [])}
    for key, entry in (
        ("debate.length_sweep", debate.get("length_sweep")),
        ("verifier.qh_sweep", verifier.get("qh_sweep")),
    ):
        for field, allowed in known.items():
            for i, name in enumerate((entry or {}).get(field) or []):
                if name not in allowed:
                    errors.append(f"{key}.{field}[{i}]: {name!r} is not one of this run's {field} {allowed}")
    lengths = grid.lengths(debate) if "word_limit" in debate else []
    for length in debate.get("prompt_word_limits") or {}:
        if length not in lengths:
            errors.append(f"debate.prompt_word_limits.{length}: {length!r} is not one of the debate lengths {lengths}")
    return errors


def _cwpor_errors(cwpor: dict[str, Any]) -> list[str]:
    """Cross-judging compares model families: every debater and judge then needs one in cwpor.families."""
    if not cwpor.get("cross_judges"):
        return []
    families = cwpor.get("families") or {}
    debaters = list(cwpor.get("models") or [])
    judges = [name for m in debaters for name in roles.judges(cwpor, m)]
    return [
        f"cwpor.families.{name}: no family for {name!r}, a debater or judge of cwpor.cross_judges "
        "(the cross-judge contrast compares families; e.g. llama, qwen, mistral)"
        for name in dict.fromkeys(debaters + judges)
        if name not in families
    ]


def check_config(config: dict[str, Any], schema_path: str | Path | None = None) -> None:
    errors = config_errors(config, schema_path)
    if errors:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(errors))


def dataset_source(config: dict[str, Any], dataset: str, key: str) -> dict[str, str] | None:
    """What a prepared dataset depends on: its resolved location and, for a local file, the content hash.

    Used as a rule param, so a changed location or an edited file reruns the prepare rule, and an old
    data/<dataset>.parquet is never reused for a source that is no longer configured.
    """
    return location_source((config["datasets"].get(dataset) or {}).get(key))


def location_source(location: str | None) -> dict[str, str] | None:
    """A dataset location as dataset_source gives it (also for `datasets.own.<name>.pairs`)."""
    if location is None:
        return None
    if url_scheme(location) is not None:
        return {"location": location}
    path = Path(location).resolve()
    try:
        shown = str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        shown = str(path)
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return {"location": shown, "sha256": digest.hexdigest()}


def output_path_errors(patterns: list[tuple[re.Pattern, bool]], roots: list[str | Path]) -> list[str]:
    """Existing paths where a rule's output should be but cannot be used: a directory where a file is
    expected, a link to nothing, a file this user cannot read or write. Snakemake would take a directory
    for a finished output and let the next stage fail on it; this names the path before any job runs.

    patterns: (regex of an output path pattern, whether that output is a directory()).
    """
    import os

    errors = []
    for root in dict.fromkeys(str(r) for r in roots):
        if not os.path.isdir(root):
            continue
        for folder, dirs, files in os.walk(root):
            for name in dirs + files:
                path = os.path.join(folder, name)
                matches = [is_dir for regex, is_dir in patterns if regex.fullmatch(path)]
                if not matches:
                    continue
                if os.path.islink(path) and not os.path.exists(path):
                    errors.append(f"{path}: a link to a missing file where an output should be; remove it and rerun")
                elif os.path.isdir(path) and not any(matches):
                    errors.append(f"{path}: a directory where an output file should be; move it aside and rerun")
                elif os.path.isfile(path) and not os.access(path, os.R_OK | os.W_OK):
                    errors.append(
                        f"{path}: an output this user cannot read or overwrite; fix its permissions "
                        f"or move it aside and rerun"
                    )
    return errors


def check_output_paths(patterns: list[tuple[re.Pattern, bool]], roots: list[str | Path]) -> None:
    errors = output_path_errors(patterns, roots)
    if errors:
        raise ConfigError("unusable output paths:\n  " + "\n  ".join(errors))
