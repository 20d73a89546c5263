"""What of a configuration is never shown: a key that a config mistake put into it.

A model's key lives in an environment variable and the config names the variable (`api_key_env`), never the
key. Two mistakes put a key into the config itself: the key pasted as the value of `api_key_env`, and a
setting under a key-like name (`api_key`, `hf_token`, `password`, an `Authorization` header in a model's
free-form `request`). The start-up check refuses the first without echoing it (`secret_errors`, which the start-up config check runs first);
the run's recorded config (run_config.py), the outputs' provenance (provenance.py), the tracked param of a
model's settings (rules/model_refs.smk, which Snakemake writes into .snakemake/metadata/) and the log line of a
provider model's request (models/api.py) mask both, so a config that reaches a file shows no key. A setting
under a key-like name given with `--config` is refused at start-up too (`command_line_errors`): Snakemake
writes its whole command line into its output and .snakemake/log/ when jobs start, where nothing masks it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")  # what a shell accepts after `export`
KEY_PREFIXES = ("sk-", "sk-ant-", "hf_")  # OpenAI, Anthropic and Hugging Face keys start so
# Config keys whose values are secrets. Narrower than provenance._SECRET_NAME (environment variables ending in
# key, token, secret, ...): the config has settings that end in `token` and are no secret (debate.gcg.init_token,
# the text a suffix starts from), so a `token` counts only alone or after a word that makes it a credential.
SECRET_KEY_NAME = re.compile(
    r"(^|[_-])(api[_-]?key|key|secret|password|passwd|credentials?|authorization)$"
    r"|(^|[_-])(access|auth|api|bearer|hf|refresh|session|id)[_-]?token$"
    r"|^token$",
    re.IGNORECASE,
)
MASK = "<masked>"


def variable_name_error(value: Any) -> str | None:
    """Why `value` (an `api_key_env`) cannot be the name of the variable holding a key, or None. The reason
    never quotes the value: a value that is no variable name may be the key itself."""
    if not isinstance(value, str) or not VARIABLE_NAME.fullmatch(value):
        return "is not the name of an environment variable (letters, digits and _, not starting with a digit)"
    if value.startswith(KEY_PREFIXES):
        return f"has the shape of a key (it starts like one of {', '.join(KEY_PREFIXES)})"
    return None


def masked(value: Any) -> Any:
    """`value` with every value under a key-like name (SECRET_KEY_NAME) replaced by MASK, and every
    `api_key_env` that is no variable name too; mappings and lists are walked, everything else kept."""
    if isinstance(value, Mapping):
        return {k: _masked_entry(str(k), v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [masked(v) for v in value]
    return value


def _masked_entry(key: str, value: Any) -> Any:
    if value is None:
        return None
    if SECRET_KEY_NAME.search(key):
        return MASK
    if key == "api_key_env" and value != "" and variable_name_error(value):
        return MASK
    return masked(value)


def secret_errors(config: Mapping[str, Any]) -> list[str]:
    """One error per model, used or not, whose `api_key_env` is no variable name or has a key's shape
    (variable_name_error): it names the key and never shows the value, which may be the key itself,
    so that the run stops before the config reaches a file, a log or a job's params."""
    models = config.get("models") if isinstance(config.get("models"), dict) else {}
    errors = []
    for name, entry in models.items():
        init = entry.get("init") if isinstance(entry, dict) else None
        # a random model's init is its architecture's settings, never a credential, and prepare_model's script
        # reads it from a tracked param that Snakemake writes into .snakemake/metadata/, where nothing masks it
        for key, setting in init.items() if isinstance(init, dict) else []:
            if SECRET_KEY_NAME.search(str(key)) and setting not in (None, ""):
                errors.append(
                    f"models.{name}.init.{key}: a setting under a key-like name in a random model's init is refused, "
                    "so its value is not shown: init holds the architecture's settings, never a key"
                )
        value = entry.get("api_key_env") if isinstance(entry, dict) else None
        if value is None or value == "":  # not set: a server of your own that takes no key
            continue
        reason = variable_name_error(value)
        if reason:
            errors.append(
                f"models.{name}.api_key_env: its value {reason}, so it is not shown; give the name of the "
                "environment variable that holds the key (export OPENAI_API_KEY=...; api_key_env: OPENAI_API_KEY), "
                "never the key"
            )
    return errors


def command_line_errors(overrides: Mapping[str, Any]) -> list[str]:
    """One error per value under a key-like name (SECRET_KEY_NAME) among the `--config` values `overrides`,
    naming its key and never the value: Snakemake writes its command line into its output and into
    .snakemake/log/ as jobs start, so such a value must stop the run before then (the Snakefile's start-up
    check) instead of being masked later."""
    errors = []

    def walk(value: Any, path: str) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                key = f"{path}.{k}" if path else str(k)
                if SECRET_KEY_NAME.search(str(k)) and v is not None and v != "":
                    errors.append(
                        f"--config {key}: a setting under a key-like name is refused on the command line, so its "
                        "value is not shown: Snakemake writes its command line into its output and .snakemake/log/. "
                        "Put it in a config file given with --configfile (the recorded config masks it), and a "
                        "model's key in the environment variable that api_key_env names"
                    )
                else:
                    walk(v, key)
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]")

    walk(overrides, "")
    return errors
