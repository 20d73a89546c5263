"""The name rule of the start-up check: a key or value naming a model, an architecture, a dataset, a generator's
model or an audit target names one the config defines, or the check fails naming the key and the closest
defined name, before any job is planned."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from debate_audit.tools.config_check import config_errors, name_uses

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "config/schema.yaml"
DEFAULT = yaml.safe_load((REPO / "config/config.yaml").read_text())
ARCH = "smollm2-135m"


def changed(section: str, **values) -> dict:
    config = copy.deepcopy(DEFAULT)
    config[section].update(values)
    return config


# (id, config, the errors it must give, one per name mistake, with a suggestion where a defined name is close)
MISTAKES = [
    (
        "processes keyed by a misspelt architecture",
        changed("verifier", distributed={"processes": {"smollm2-135n": 2}, "cpu_offload": False}),
        "verifier.distributed.processes.smollm2-135n: verifier architecture 'smollm2-135n' is not defined under "
        f"verifier.base_models (defined: ['{ARCH}']); did you mean '{ARCH}'?",
    ),
    (
        "CPU offload keyed by a misspelt architecture",
        changed("verifier", distributed={"processes": 1, "cpu_offload": {"SmolLM2-135m": True}}),
        "verifier.distributed.cpu_offload.SmolLM2-135m: verifier architecture 'SmolLM2-135m' is not defined under "
        f"verifier.base_models (defined: ['{ARCH}']); did you mean '{ARCH}'?",
    ),
    (
        "a family for a misspelt model",
        changed("cwpor", families={"smolm2-135m": "smollm"}),
        "cwpor.families.smolm2-135m: model 'smolm2-135m' is not defined under 'models:' "
        f"(defined: ['{ARCH}']); did you mean '{ARCH}'?",
    ),
    (
        "a cross-judge that is no model",
        changed("cwpor", cross_judges=["smollm2-136m"], families={ARCH: "smollm", "smollm2-136m": "smollm"}),
        [
            f"cwpor.cross_judges[0]: model 'smollm2-136m' is not defined under 'models:' (defined: ['{ARCH}']); "
            f"did you mean '{ARCH}'?",
            # its family is keyed by the same name, which names no model either
            f"cwpor.families.smollm2-136m: model 'smollm2-136m' is not defined under 'models:' (defined: ['{ARCH}']); "
            f"did you mean '{ARCH}'?",
        ],
    ),
    (
        "a test generator's misspelt model",
        changed(
            "paraphrase",
            test={**DEFAULT["paraphrase"]["test"], "generators": {"gen-a": {"model": "smollm2-135"}}},
        ),
        "paraphrase.test.generators.gen-a.model: model 'smollm2-135' is not defined under 'models:' "
        f"(defined: ['{ARCH}']); did you mean '{ARCH}'?",
    ),
    (
        "an unused teacher that is no model",
        changed("verifier", lm_target="argument", adjudication={"max_new_tokens": 80, "teacher": "gpt-oss-20"}),
        f"verifier.adjudication.teacher: model 'gpt-oss-20' is not defined under 'models:' (defined: ['{ARCH}'])",
    ),
    (
        "a misspelt audit target",
        changed("audit", targets=["honest", "adb"]),
        "audit.targets[1]: audit target 'adb' is not defined under the audit's targets "
        "(defined: ['honest', 'adv', 'org', 'copy']); did you mean 'adv'?",
    ),
    (
        "release split files of a misspelt dataset",
        changed(
            "debate",
            split={"source": "seeded", "overlap": "exclude", "release": {"gpqa-h": {"normal": "split.json"}}},
        ),
        "debate.split.release.gpqa-h: dataset 'gpqa-h' is not defined under 'datasets:' "
        "(defined: ['quality_h', 'gpqa_h']); did you mean 'gpqa_h'?",
    ),
    (
        "the price of a misspelt model",
        {**DEFAULT, "prices": {"smollm2_135m": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}},
        f"prices.smollm2_135m: model 'smollm2_135m' is not defined under 'models:' (defined: ['{ARCH}']); "
        f"did you mean '{ARCH}'?",
    ),
]


@pytest.mark.parametrize(("config", "error"), [c[1:] for c in MISTAKES], ids=[c[0] for c in MISTAKES])
def test_a_name_that_names_nothing_fails_naming_the_key_and_the_closest_name(monkeypatch, config, error):
    monkeypatch.chdir(REPO)  # dataset paths are relative to the project
    assert config_errors(config, SCHEMA) == (error if isinstance(error, list) else [error])


def test_the_default_and_its_names_pass(monkeypatch):
    monkeypatch.chdir(REPO)
    assert config_errors(DEFAULT, SCHEMA) == []
    kinds = {kind for _, _, kind in name_uses(DEFAULT)}
    assert kinds == {"model", "dataset", "target"}  # the default names models, datasets and targets


def test_a_map_keyed_by_each_architecture_passes_and_one_wrong_key_of_two_is_named(monkeypatch):
    monkeypatch.chdir(REPO)
    models = {**DEFAULT["models"], "other": DEFAULT["models"][ARCH]}
    config = {**changed("verifier", base_models=[ARCH, "other"]), "models": models}
    config["verifier"]["distributed"] = {"processes": {ARCH: 2, "other": 1}, "cpu_offload": {"other": True}}
    assert config_errors(config, SCHEMA) == []
    config["verifier"]["distributed"]["processes"] = {ARCH: 2, "othre": 1}
    errors = config_errors(config, SCHEMA)
    assert len(errors) == 1 and errors[0].startswith("verifier.distributed.processes.othre:")
    assert errors[0].endswith("did you mean 'other'?")
