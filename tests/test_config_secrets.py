"""A key pasted into the config never leaves it (issue 54): `api_key_env` that is no variable name is refused at
start-up naming the key, never the value, and the run's recorded config masks values under key-like names."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml
from smoke_workflow import BIN, project_copy

from debate_audit.runtime.masking import MASK, masked, variable_name_error
from debate_audit.runtime.provenance import rule_provenance
from debate_audit.runtime.run_config import write_run_config
from debate_audit.tools.config_check import config_errors

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "config/schema.yaml"
BASE = yaml.safe_load((REPO / "config/config.yaml").read_text())
FAKE_KEY = "sk-test-DO-NOT-LEAK-1234567890"
SERVED = {"source": "openai", "id": "served", "base_url": "http://localhost:8000/v1"}


def with_model(api_key_env: object, *, used: bool = True) -> dict:
    """The default config plus an openai-source model `served` whose api_key_env is `api_key_env`; `used`:
    it is CW-POR's judge (with a template a chat endpoint can answer), else it is defined and unused."""
    config = copy.deepcopy(BASE)
    config["models"]["served"] = {**SERVED, "api_key_env": api_key_env}
    if used:
        config["cwpor"]["judge_model"] = "served"
        config["cwpor"]["judge_template"] = "paper"
    return config


# ------------------------------------------------------------------------------------ the start-up check
@pytest.mark.parametrize(
    "value",
    [FAKE_KEY, "sk-ant-api03-abcdefghijklmnop", "hf_AbCdEfGhIjKlMnOpQrStUvWxYz012345", "my key", "1PASSWORD", 12345],
    ids=["openai key", "anthropic key", "hf token (a valid name in shape)", "space", "leading digit", "a number"],
)
@pytest.mark.parametrize("used", [True, False], ids=["used", "unused"])
def test_an_api_key_env_that_is_no_variable_name_is_refused_naming_the_key_not_the_value(monkeypatch, value, used):
    monkeypatch.chdir(REPO)  # dataset paths are relative to the project
    errors = config_errors(with_model(value, used=used), SCHEMA)
    assert [e for e in errors if e.startswith("models.served.api_key_env: ")], errors
    assert not any(str(value) in e for e in errors), errors


@pytest.mark.parametrize("value", ["OPENAI_API_KEY", "K", "_private_key2", ""])
def test_a_variable_name_or_none_passes(monkeypatch, value):
    monkeypatch.chdir(REPO)
    assert config_errors(with_model(value), SCHEMA) == []


def test_variable_name_error_never_quotes_the_value():
    for value in (FAKE_KEY, "hf_abc", "a-b"):
        reason = variable_name_error(value)
        assert reason and value not in reason
    assert variable_name_error("HF_TOKEN") is None


def test_a_key_like_setting_on_the_command_line_is_refused_naming_the_key_not_the_value(monkeypatch):
    monkeypatch.chdir(REPO)
    config = with_model("OPENAI_API_KEY")
    overrides = {"models": {"served": {"request": {"metadata": {"api_key": FAKE_KEY}}}}, "hub": [{"hf_token": "x1"}]}
    errors = config_errors(config, SCHEMA, overrides)
    assert [e.split(":")[0] for e in errors] == [
        "--config models.served.request.metadata.api_key",
        "--config hub[0].hf_token",
    ]
    assert not any(FAKE_KEY in e or "x1" in e for e in errors), errors
    ordinary = {"cwpor": {"subset": 2}, "debate": {"gcg": {"init_token": " x"}}, "models": {"m": {"api_key": None}}}
    assert config_errors(config, SCHEMA, ordinary) == []


# ------------------------------------------------------------------------------------ the recorded config
def test_values_under_key_like_names_are_masked_and_settings_that_end_in_token_kept():
    config = {
        "models": {
            "served": {
                **SERVED,
                "api_key_env": "OPENAI_API_KEY",
                "request": {"api_key": "k1", "extra_headers": {"Authorization": "Bearer k2", "X-Trace": "t"}},
            },
            "pasted": {**SERVED, "api_key_env": FAKE_KEY},
            "hub": {"source": "hf", "id": "x", "init": {"hf_token": "k3", "bos_token_id": 1}},
        },
        "debate": {"gcg": {"init_token": " x"}},
        "password": None,
    }
    shown = masked(config)
    served = shown["models"]["served"]
    assert served["api_key_env"] == "OPENAI_API_KEY" and served["base_url"] == SERVED["base_url"]
    assert served["request"] == {"api_key": MASK, "extra_headers": {"Authorization": MASK, "X-Trace": "t"}}
    assert shown["models"]["pasted"]["api_key_env"] == MASK
    assert shown["models"]["hub"]["init"] == {"hf_token": MASK, "bos_token_id": 1}
    assert shown["debate"]["gcg"]["init_token"] == " x"
    assert shown["password"] is None  # nothing there to hide


def test_the_run_config_file_masks_a_key_given_in_the_config_or_in_an_override(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    config = {"models": {"pasted": {**SERVED, "api_key_env": FAKE_KEY, "request": {"api_key": FAKE_KEY + "b"}}}}
    path = write_run_config(config, configfiles=[], overlays=[], overrides={"token": FAKE_KEY + "c"})
    text = path.read_text()
    assert FAKE_KEY not in text
    assert yaml.safe_load(text)["models"]["pasted"]["api_key_env"] == MASK


def test_an_outputs_provenance_masks_a_key_like_setting_among_the_rules_params():
    params = {"judge": {"name": "served", "request": {"prompt_cache_key": FAKE_KEY, "temperature": 0.0}}}
    with rule_provenance("cwpor_judge", params) as record:
        assert record["params"]["judge"]["request"] == {"prompt_cache_key": MASK, "temperature": 0.0}
        assert FAKE_KEY not in json.dumps(record)


# ------------------------------------------------------------------------------------ through Snakemake
@pytest.mark.slow
def test_a_dry_run_with_a_key_as_api_key_env_is_refused_and_the_key_is_written_nowhere(tmp_path):
    workdir = project_copy(tmp_path)
    overlay = {
        "models": {"served": {**SERVED, "api_key_env": FAKE_KEY}},
        "cwpor": {"judge_model": "served", "judge_template": "paper"},
    }
    (workdir / "overlay.yaml").write_text(yaml.safe_dump(overlay))
    done = subprocess.run(
        [str(BIN / "snakemake"), "-n", "--cores", "1", "--configfile", "config/config.yaml", "overlay.yaml"],
        cwd=workdir,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )
    said = done.stdout + done.stderr
    assert done.returncode != 0
    assert "models.served.api_key_env" in said, said[-3000:]
    assert FAKE_KEY not in said
    written = [
        path
        for path in tmp_path.rglob("*")
        if path.is_file() and not path.is_symlink() and path != workdir / "overlay.yaml"
        and FAKE_KEY.encode() in path.read_bytes()
    ]  # fmt: skip
    assert written == []
