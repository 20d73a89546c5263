"""How CW-POR's model-bound work is cut into jobs (config `cwpor.job_split`).

One job per model and word limit runs the word limits side by side; one job per model for all its word limits
(the single-turn debates, the judgments, the judgments of the rebuttal rounds) loads each model, or starts
its vLLM engine, once instead of once per word limit. At the paper's scale the latter is what the engine
costs: a CW-POR word limit is ~2 minutes of an H100's generation (`make plan`), and each engine start adds
the engine's start-up and a reading of the weights. The files are the same either way (each word limit's
calls are the same, in the same order: debates.debates_at_limits, judge.judge_files); the logs and benchmark
records are one per job. `auto`: one job per model where a CW-POR model generates through a vLLM engine
the job starts (generation_backend vllm), else one per word limit (the in-process default, whose jobs load
a 135M model in seconds and run two at a time on two cores).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .roles import judges, role_model

SPLITS = ("auto", "model", "word_limit")
# The rules a per-model split gathers (their jobs lose the {verbosity} wildcard). The rebuttal round's own
# generations (cwpor_rebuttal) stay one job per word limit.
GATHERED_RULES = frozenset({"cwpor_debate", "cwpor_judge", "cwpor_judge_rebuttal"})


def cwpor_models(config: Mapping[str, Any]) -> list[str]:
    """Every model CW-POR's jobs use: each experiment model's neutral, persuasive and judging models."""
    cw = config["cwpor"]
    return list(
        dict.fromkeys(
            name
            for m in cw["models"]
            for name in (role_model(cw, m, "neutral"), role_model(cw, m, "persuasive"), *judges(cw, m))
        )
    )


def job_split(config: Mapping[str, Any]) -> str:
    """`model` or `word_limit`: cwpor.job_split, `auto` resolved."""
    split = config["cwpor"].get("job_split", "auto")
    if split not in SPLITS:
        raise ValueError(f"cwpor.job_split must be one of {list(SPLITS)}, got {split!r}")
    if split != "auto":
        return split
    engines = any(
        (config["models"][name].get("source") != "openai")
        and config["models"][name].get("generation_backend") == "vllm"
        for name in cwpor_models(config)
    )
    return "model" if engines else "word_limit"


def job_wildcards(config: Mapping[str, Any], rule: str, cell: Mapping[str, str]) -> dict[str, str]:
    """The wildcards of the job that makes the calls of a plan row of `rule` with `cell` (its wildcards at one
    job per word limit): without the word limit where the split gathers the rule's jobs per model."""
    if rule in GATHERED_RULES and job_split(config) == "model":
        return {key: value for key, value in cell.items() if key != "verbosity"}
    return dict(cell)
