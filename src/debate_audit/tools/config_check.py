"""The whole configuration checked once at workflow start: the schema, then every rule that spans keys.

Called from the Snakefile before any job is planned, so a config mistake stops the run (and the dry run)
with the key that is wrong, instead of surfacing after minutes of model work or as a missing file path.
Every error found is reported at once, one per line, each starting with its dotted key.
"""

from __future__ import annotations

import difflib
import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from debate_audit.cwpor import roles
from debate_audit.data.io import URL_SCHEMES, url_scheme
from debate_audit.eraudit.common import grid
from debate_audit.eraudit.common.brought import audit_errors, trained_datasets
from debate_audit.eraudit.common.readout import ENDPOINT_READOUTS, READOUT_MODES
from debate_audit.eraudit.common.verifiers import AUDIT_TARGETS
from debate_audit.models.spec import ModelSpec, no_logprobs
from debate_audit.runtime.masking import command_line_errors, secret_errors
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


def scoring_uses(config: dict[str, Any]) -> Iterator[tuple[str, str]]:
    """(key, model name) for every config key whose model scores answers with log-probabilities, which an
    endpoint without them cannot (a CW-POR judge can: it then has no LLC, cwpor/judge.py): the selector, the
    verifier architectures, and the base and targets of every audit of models you bring."""
    debate = config.get("debate") or {}
    if debate.get("selector"):
        yield "debate.selector", debate["selector"]
    for key, name in _experiment_uses(config):
        if key.startswith(("verifier.base_model", "verifier.base_models", "audited_models.")):
            yield key, name


def readout_key(config: dict[str, Any], key: str) -> str:
    """The key that sets the readout of the model a scoring key (`scoring_uses`) names: an audit of models you
    bring its own `readout` where it sets one, else `verifier.readout`."""
    if key.startswith("audited_models."):
        audit = key.split(".")[1]
        entry = (config.get("audited_models") or {}).get(audit)
        if isinstance(entry, dict) and entry.get("readout") is not None:
            return f"audited_models.{audit}.readout"
    return "verifier.readout"


def used_models(config: dict[str, Any]) -> list[str]:
    """The models some experiment uses, in order of first use: only these are prepared."""
    return list(dict.fromkeys(name for _, name in model_uses(config)))


def _schema_errors(config: dict[str, Any], schema_path: str | Path) -> list[str]:
    import jsonschema
    import yaml

    # libyaml's loader when PyYAML has it: the schema is read at every workflow start, 10x faster than in Python
    schema = yaml.load(Path(schema_path).read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
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
        if not entry.get("base_url"):
            errors.append(f"{key}.base_url: source 'openai' needs the server's URL")
        # a hosted provider always takes a key; a server of your own (a local vLLM) may take none
        if entry.get("provider") and not entry.get("api_key_env"):
            errors.append(
                f"{key}.api_key_env: a provider model ({entry['provider']}) needs the name of the variable "
                "holding its key"
            )
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


def _gcg_errors(debate: dict[str, Any], verifier: dict[str, Any], models: dict[str, Any]) -> list[str]:
    """debate.gcg is white-box (gradients through the selector's local weights) and acts on generated
    candidates: an API selector, or the release's imported transcripts, cannot take it."""
    if not (debate.get("gcg") or {}).get("enabled"):
        return []
    errors = []
    selector = debate.get("selector") or (grid.base_models(verifier) or [None])[0]
    entry = models.get(selector) if isinstance(selector, str) else None
    if isinstance(entry, dict) and entry.get("source") == "openai":
        key = "debate.selector" if debate.get("selector") else "verifier.base_models[0]"
        errors.append(
            f"debate.gcg.enabled: GCG needs the selector's weights and gradients, but {key} is {selector!r}, "
            "an endpoint (source openai); set debate.gcg.enabled: false or select with a local model"
        )
    if ((debate.get("transcripts") or {}).get("source") or "generate") == "release":
        errors.append(
            "debate.gcg.enabled: debate.transcripts.source is release (the release's selected transcripts, "
            "its GCG already applied): nothing is generated to optimise; set debate.gcg.enabled: false"
        )
    return errors


def _template_errors(cwpor: dict[str, Any]) -> list[str]:
    """CW-POR's prompt templates are named by version (cwpor/prompts.py): an unknown name fails here."""
    from debate_audit.cwpor import prompts

    errors = []
    for kind, lookup in (
        ("debate", prompts.debate_template),
        ("judge", prompts.judge_template),
        ("rebuttal", prompts.rebuttal_template),
    ):
        version = cwpor.get(f"{kind}_template")
        if version is None:
            continue
        try:
            lookup(version)
        except ValueError as error:
            errors.append(str(error))
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


def _characteristic_errors(audit: dict[str, Any]) -> list[str]:
    """The operating characteristic reads certification at a level: its own, or the audit's tau."""
    characteristic = audit.get("operating_characteristic") or {}
    if characteristic.get("certify_tau") is None and audit.get("tau") is None:
        return [
            "audit.operating_characteristic.certify_tau: null while audit.tau is null: set the level at which the "
            "operating characteristic reads P(certify) (config/paper.yaml: 0.9)"
        ]
    return []


def _dotted(error: str) -> str:
    """An error's key with list items written key.1 (the schema's way), so both messages on a key match."""
    return re.sub(r"\[(\d+)\]", r".\1", error.split(": ")[0])


def config_errors(
    config: dict[str, Any], schema_path: str | Path | None = None, overrides: Mapping[str, Any] | None = None
) -> list[str]:
    """Every problem of the configuration, each naming its key; empty when it is valid. `overrides`: the
    `--config` values merged into `config` (Snakemake's `workflow.config_settings.config`)."""
    # First and apart: a key pasted into the config is refused even where the rest fails in ways that stop
    # the other checks, and none of these messages shows it.
    secrets = command_line_errors(overrides or {}) + secret_errors(config)
    errors = _schema_errors(config, schema_path) if schema_path else []
    try:
        cross = _cross_key_errors(config)
    except (AttributeError, KeyError, TypeError):
        if not errors and not secrets:  # a shape the schema let through: a bug here, not a config mistake
            raise
        cross = []
    # Where both name the same key, the cross-key message is the clearer one (the schema writes a list item
    # as key.1, this module as key[1]); the schema's would quote a secret's value.
    explained = {_dotted(e) for e in cross + secrets}
    errors = [e for e in errors if _dotted(e) not in explained] + cross
    return list(dict.fromkeys(secrets + errors))


# ------------------------------------------------------------------- names: one rule for every key that names
# A map keyed by a model or an architecture takes a misspelt key for "not set" and plans with its default, and a
# list of names takes a misspelt one for another name: every key or value of the config that names something the
# config defines is checked here, against what it defines, naming the key and the closest valid name.
PAIR_DATASETS = ("quality_h", "gpqa_h")  # the ER-Audit datasets (pairs + contexts) under `datasets:`


@dataclass(frozen=True)
class Names:
    what: str  # what such a name names: "model", "verifier architecture", ...
    where: str  # where the config defines them
    names: tuple[str, ...]


def defined_names(config: dict[str, Any]) -> dict[str, Names]:
    """kind -> the names of that kind this configuration defines."""
    models = config.get("models") if isinstance(config.get("models"), dict) else {}
    verifier = config.get("verifier") if isinstance(config.get("verifier"), dict) else {}
    debate = config.get("debate") if isinstance(config.get("debate"), dict) else {}
    datasets = config.get("datasets") if isinstance(config.get("datasets"), dict) else {}
    try:
        lengths = grid.lengths(debate) if "word_limit" in debate or "transcripts" in debate else []
    except (TypeError, ValueError):  # a word_limit the schema refuses, with its own message
        lengths = []
    return {
        "model": Names("model", "'models:'", tuple(sorted(models))),
        "architecture": Names("verifier architecture", "verifier.base_models", tuple(grid.base_models(verifier))),
        "dataset": Names("dataset", "'datasets:'", tuple(d for d in PAIR_DATASETS if d in datasets)),
        "run dataset": Names("dataset", "verifier.datasets", tuple(verifier.get("datasets") or [])),
        "target": Names("audit target", "the audit's targets", AUDIT_TARGETS),
        "length": Names("debate length", "debate.word_limit", tuple(lengths)),
    }


def _items(value: Any) -> list[tuple[int, Any]]:
    return list(enumerate(value)) if isinstance(value, list) else []


def _keys(value: Any) -> list[Any]:
    return list(value) if isinstance(value, dict) else []


def name_uses(config: dict[str, Any]) -> Iterator[tuple[str, Any, str]]:
    """(key, name, kind) for every config key or value that names a model, an architecture, a dataset, an
    audit target or a debate length."""
    for key, name in model_uses(config):
        yield key, name, "model"
    section = {k: (config.get(k) if isinstance(config.get(k), dict) else {}) for k in ("cwpor", "debate", "verifier")}
    cwpor, debate, verifier = section["cwpor"], section["debate"], section["verifier"]
    for name in _keys(cwpor.get("families")):
        yield f"cwpor.families.{name}", name, "model"
    # model_uses names the teacher only where adjudications are the L_lm target; a misspelt one is wrong anyway
    adjudication = verifier.get("adjudication") if isinstance(verifier.get("adjudication"), dict) else {}
    if adjudication.get("teacher"):
        yield "verifier.adjudication.teacher", adjudication["teacher"], "model"
    for name in _keys(config.get("prices")):
        yield f"prices.{name}", name, "model"
    lora = (verifier.get("lora") or {}).get("enabled") if isinstance(verifier.get("lora"), dict) else None
    for i, name in _items(lora):
        yield f"verifier.lora.enabled[{i}]", name, "architecture"
    distributed = verifier.get("distributed") if isinstance(verifier.get("distributed"), dict) else {}
    for setting in ("processes", "cpu_offload"):
        for name in _keys(distributed.get(setting)):
            yield f"verifier.distributed.{setting}.{name}", name, "architecture"
    for key, entry in (
        ("debate.length_sweep", debate.get("length_sweep")),
        ("verifier.qh_sweep", verifier.get("qh_sweep")),
    ):
        entry = entry if isinstance(entry, dict) else {}
        for field, kind in (("architectures", "architecture"), ("datasets", "run dataset")):
            for i, name in _items(entry.get(field)):
                yield f"{key}.{field}[{i}]", name, kind
    for i, name in _items(verifier.get("datasets")):
        yield f"verifier.datasets[{i}]", name, "dataset"
    for part in ("split", "transcripts"):
        release = (debate.get(part) or {}).get("release") if isinstance(debate.get(part), dict) else None
        for name in _keys(release):
            yield f"debate.{part}.release.{name}", name, "dataset"
    audit = config.get("audit") if isinstance(config.get("audit"), dict) else {}
    for i, name in _items(audit.get("targets")):
        yield f"audit.targets[{i}]", name, "target"
    for name in _keys(debate.get("prompt_word_limits")):
        yield f"debate.prompt_word_limits.{name}", name, "length"


def name_error(key: str, name: Any, names: Names) -> str | None:
    """Why `name` at `key` names nothing this config defines (with the closest valid name), or None."""
    if isinstance(name, str) and name in names.names:
        return None
    close = difflib.get_close_matches(str(name), names.names, n=1) if names.names else []
    hint = f"; did you mean {close[0]!r}?" if close else ""
    return f"{key}: {names.what} {name!r} is not defined under {names.where} (defined: {list(names.names)}){hint}"


def name_errors(config: dict[str, Any], prefix: str = "") -> list[str]:
    """The name rule: every name of `name_uses` (those under `prefix` when given) is one the config defines."""
    defined = defined_names(config)
    errors = (name_error(key, name, defined[kind]) for key, name, kind in name_uses(config) if key.startswith(prefix))
    return list(dict.fromkeys(e for e in errors if e))


def price_errors(config: dict[str, Any]) -> list[str]:
    """`prices` (make plan's API costs) names models under `models:` only: a price is keyed by the model's
    name, and a misspelt one would price nothing (the name rule, for make plan alone)."""
    return name_errors(config, "prices.")


def _cross_key_errors(config: dict[str, Any]) -> list[str]:
    # a run's name becomes a folder (runs/<run>/): a path, or make compare's name for the unnamed run, is refused
    run_error = run_name_error(config.get("run"))
    errors = [run_error] if run_error else []
    models = config.get("models") or {}
    errors += name_errors(config)
    # Unused models are never prepared or loaded; only the schema applies to them.
    for name in used_models(config):
        if isinstance(models.get(name), dict):
            errors.extend(_model_errors(name, models[name]))
    errors.extend(_dataset_errors(config.get("datasets") or {}))
    errors.extend(_transcript_errors(config))
    errors.extend(_template_errors(config.get("cwpor") or {}))
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
    if (
        isinstance(verifier, dict)
        and (verifier.get("org_training") or {}).get("qh_items") == "train"
        and verifier.get("qh_readout") != "bare"
    ):
        errors.append(
            "verifier.org_training.qh_items: train trains L_qh on pairs without a transcript, so it needs "
            f"verifier.qh_readout: bare (got {verifier.get('qh_readout')!r})"
        )
    if isinstance(config.get("debate"), dict) and isinstance(verifier, dict):
        errors.extend(_gcg_errors(config["debate"], verifier, models))
    if isinstance(config.get("audit"), dict):
        errors.extend(_audit_errors(config["audit"]))
        errors.extend(_characteristic_errors(config["audit"]))
    errors.extend(_scoring_errors(config, models))
    errors.extend(_endpoint_readout_errors(config, models))
    if isinstance(config.get("cwpor"), dict):
        errors.extend(_cwpor_errors(config["cwpor"]))
        errors.extend(_endpoint_judge_errors(config["cwpor"], models))
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


def _spec(name: str, models: dict[str, Any]) -> ModelSpec | None:
    entry = models.get(name)
    try:
        return ModelSpec.from_config(name, entry) if isinstance(entry, dict) else None
    except (TypeError, ValueError):  # reported by _model_errors, naming its key
        return None


def _scoring_errors(config: dict[str, Any], models: dict[str, Any]) -> list[str]:
    """A model that scores answers needs log-probabilities: an endpoint without them is refused here,
    before any model work, naming the key that uses it and the key that rules them out."""
    errors = []
    for key, name in scoring_uses(config):
        spec = _spec(name, models)
        reason = no_logprobs(spec) if spec is not None else None
        if reason:
            errors.append(f"{key}: model {name!r} cannot score answers, which needs log-probabilities: {reason}")
    return errors


def _endpoint_readout_errors(config: dict[str, Any], models: dict[str, Any]) -> list[str]:
    """A verifier behind a chat endpoint reads a conversation (eraudit/common/readout.py, ENDPOINT_READOUTS):
    `auto` is chat for it, and `plain` (a raw prompt ending at "Answer:") cannot be sent."""
    errors = []
    for key, name in scoring_uses(config):
        if (models.get(name) or {}).get("source") != "openai":
            continue
        mode_key = readout_key(config, key)
        section, _, field = mode_key.rpartition(".")
        holder: Any = config
        for part in section.split("."):
            holder = holder.get(part) if isinstance(holder, dict) else None
        mode = holder.get(field) if isinstance(holder, dict) else None
        if mode in READOUT_MODES and mode not in ENDPOINT_READOUTS:
            errors.append(
                f"{mode_key}: {mode!r} is a raw prompt, which {key} ({name!r}, source openai: its endpoint renders "
                "a conversation) cannot be sent; use chat, release or auto (auto reads chat for an endpoint)"
            )
    return errors


def _endpoint_judge_errors(cwpor: dict[str, Any], models: dict[str, Any]) -> list[str]:
    """A judge behind a chat endpoint cannot continue a prefilled reply: the template must ask for one free
    reply (no `reply_labels`)."""
    from debate_audit.cwpor.prompts import JUDGE_TEMPLATES

    template = JUDGE_TEMPLATES.get(cwpor.get("judge_template"))
    if template is None or not template.reply_labels:
        return []
    judges = [name for m in cwpor.get("models") or [] for name in roles.judges(cwpor, m)]
    endpoints = [n for n in dict.fromkeys(judges) if (models.get(n) or {}).get("source") == "openai"]
    if not endpoints:
        return []
    return [
        f"cwpor.judge_template: {cwpor['judge_template']!r} prefills the judge's reply slot by slot, which a chat "
        f"endpoint cannot continue (judge(s) {endpoints}, source openai); use a template with one free reply "
        "(paper, v1)"
    ]


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


def check_config(
    config: dict[str, Any], schema_path: str | Path | None = None, overrides: Mapping[str, Any] | None = None
) -> None:
    errors = config_errors(config, schema_path, overrides)
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
