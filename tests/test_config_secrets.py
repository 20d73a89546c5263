"""A key pasted into the config never leaves it (issue 54): `api_key_env` that is no variable name, or a key-like
setting given with --config, is refused at start-up naming the key, never the value; the run's recorded config,
its logs, the outputs' provenance and Snakemake's records mask values under key-like names; and a real run with
a fake key in every place a user could put one writes none of them anywhere."""

from __future__ import annotations

import copy
import json
import os
import subprocess
from pathlib import Path

import polars as pl
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


# ------------------------------------------------------------------------------------ a real run
# One fake key per place a user could put one, each its own text so that a leak names its way in.
ENV_KEY = "sk-env-KEY-DO-NOT-LEAK-0001"  # in the variable api_key_env names: the right place
REQUEST_KEY = "sk-request-KEY-DO-NOT-LEAK-0002"  # models.served.request.metadata.api_key, in a config file
CACHE_KEY = "sk-cachekey-DO-NOT-LEAK-0003"  # models.served.request.prompt_cache_key, a key-like request setting
COMMAND_LINE_KEY = "sk-cli-KEY-DO-NOT-LEAK-0004"  # --config models.served.request.metadata.session_token
HF_KEY = "hf_EnvTokenDoNotLeak0005abcdefghij"  # HF_TOKEN in the environment, which no step here needs
KEY_VARIABLE = "DA_TEST_SERVED_KEY"
JUDGE_REPLY = "Rationale: the first answer is right.\nFinal Answer: Answer A\nConfidence: 4"
JUDGED = "results/cwpor/smollm2-135m/judge-served/judgments_v20.parquet"


def chat_completion(body: dict) -> dict:
    """An OpenAI chat completion answering the judge: its reply, or for a scoring request one token with
    both letters among its top log-probabilities."""
    choice: dict = {"index": 0, "message": {"role": "assistant", "content": JUDGE_REPLY}, "finish_reason": "stop"}
    if body.get("logprobs"):
        tops = [{"token": t, "logprob": lp, "bytes": None} for t, lp in (("A", -0.2), ("B", -1.9))]
        choice["logprobs"] = {"content": [{**tops[0], "top_logprobs": tops}]}
    return {"id": "c", "object": "chat.completion", "created": 1, "model": body["model"], "choices": [choice]}


def files_holding(root: Path, text: str, *, besides: set[Path]) -> list[str]:
    """Every regular file under `root` whose bytes hold `text`, but those in `besides`; symlinks are not
    followed (the linked embedded model is no file of this run)."""
    found = []
    for folder, _, names in os.walk(root):
        for name in names:
            path = Path(folder) / name
            if not path.is_symlink() and path not in besides and text.encode() in path.read_bytes():
                found.append(str(path.relative_to(root)))
    return found


@pytest.mark.slow
def test_a_real_run_writes_no_key_anywhere_and_sends_the_variables_key_only_as_authorization(
    tmp_path, embedded_model_dir
):
    """The CW-POR judge behind a local OpenAI-compatible server, called through the real SDK in a real run,
    with a fake key in every place a user could put one: the run succeeds and judges, the key in the variable
    that api_key_env names reaches the server as the Authorization header only, the one on the command line
    stops the run at start-up, and no key is in Snakemake's output or in any file of the work directory."""
    from conftest import json_server
    from helpers import offline_env
    from smoke_workflow import scratch_copy

    seen: list[tuple[str | None, dict]] = []  # (Authorization header, body) of every request

    def respond(path, body, headers):
        seen.append((headers.get("Authorization"), body))
        return 200, {}, chat_completion(body)

    work = tmp_path / "project"
    scratch_copy(work, embedded_model_dir)  # the prepared embedded model, linked: it debates
    (tmp_path / "tmp").mkdir()
    env = {
        **offline_env(),  # every proxy at a closed port: nothing but the local server answers
        "NO_PROXY": "127.0.0.1",
        "no_proxy": "127.0.0.1",
        "PATH": f"{BIN}:{os.environ['PATH']}",
        "TMPDIR": str(tmp_path / "tmp"),  # a temporary file the run writes is searched too
        KEY_VARIABLE: ENV_KEY,
        "HF_TOKEN": HF_KEY,
    }
    run = [
        str(BIN / "snakemake"),
        "--cores",
        "2",
        "--resources",
        "gpu=1",
        "--configfile",
        "config/config.yaml",
        "tests/smoke/config.yaml",
        "overlay.yaml",
        "--allowed-rules",
        "prepare_truthfulqa",
        "prepare_model",
        "cwpor_questions",
        "cwpor_debate",
        "cwpor_judge",
    ]
    on_command_line = {"served": {"request": {"metadata": {"session_token": COMMAND_LINE_KEY}}}}
    with json_server(respond) as url:
        served = {
            "source": "openai",
            "provider": "openai",
            "id": "gpt-test",
            "base_url": url,
            "api_key_env": KEY_VARIABLE,
            "concurrency": 2,
            "request": {"temperature": 0.0, "prompt_cache_key": CACHE_KEY, "metadata": {"api_key": REQUEST_KEY}},
        }
        overlay = {
            "models": {"served": served},
            "cwpor": {"judge_model": "served", "judge_template": "paper", "subset": 2, "verbosity": [20]},
        }
        (work / "overlay.yaml").write_text(yaml.safe_dump(overlay))
        runs = [
            subprocess.run(
                [*run, *config, "--", JUDGED], cwd=work, capture_output=True, text=True, timeout=900, env=env
            )
            for config in (["--config", f"models={yaml.safe_dump(on_command_line, default_flow_style=True)}"], [])
        ]
    refused, done = runs
    said = "".join(r.stdout + r.stderr for r in runs)
    assert refused.returncode != 0
    assert "--config models.served.request.metadata.session_token: " in refused.stdout + refused.stderr
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    judged = pl.read_parquet(work / JUDGED)
    assert judged.height == 2 and judged["choice"].to_list() == ["A", "A"]
    assert judged["logprob_a"].to_list() == pytest.approx([-0.2, -0.2])

    # the variable's key went to the server as the Authorization header of every request, and only there
    assert seen and {auth for auth, _ in seen} == {f"Bearer {ENV_KEY}"}
    sent = [json.dumps(body) for _, body in seen]
    assert not [b for b in sent if ENV_KEY in b or HF_KEY in b]
    # the config file's request went as written: those keys were in the run, to be masked everywhere else
    assert all(CACHE_KEY in b and REQUEST_KEY in b for b in sent)

    written = {work / "overlay.yaml"}  # the test's own file, where the user put two of the keys
    keys = (ENV_KEY, REQUEST_KEY, CACHE_KEY, COMMAND_LINE_KEY, HF_KEY)
    leaks = {
        key: ["snakemake's output"] * (key in said) + files_holding(tmp_path, key, besides=written) for key in keys
    }
    assert {key: places for key, places in leaks.items() if places} == {}
    recorded = yaml.safe_load((work / "results/config.yaml").read_text())["models"]["served"]
    assert recorded["request"] == {"temperature": 0.0, "prompt_cache_key": MASK, "metadata": {"api_key": MASK}}
    assert recorded["api_key_env"] == KEY_VARIABLE


def test_a_key_like_setting_in_a_random_models_init_is_refused_without_its_value():
    from debate_audit.runtime.masking import secret_errors

    config = {
        "models": {"tiny": {"source": "random", "id": "llama", "init": {"hidden_size": 32, "hf_token": FAKE_KEY}}}
    }
    (error,) = secret_errors(config)
    assert error.startswith("models.tiny.init.hf_token: ") and FAKE_KEY not in error
    config["models"]["tiny"]["init"] = {"hidden_size": 32, "pad_token_id": 0, "num_hidden_layers": 2}
    assert secret_errors(config) == []
