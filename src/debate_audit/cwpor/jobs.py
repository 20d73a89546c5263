"""How CW-POR's model-bound work is cut into jobs (config `cwpor.job_split`).

`word_limit` (the default) runs one job per model and word limit, side by side (on a laptop, one per core);
`model` runs one job per model for all its word limits (the single-turn debates, the judgments, the judgments
of the rebuttal rounds), which loads each model, or starts its vLLM engine, once instead of once per word
limit. At the paper's scale that is what the engines cost (`config/paper.yaml` sets it): a CW-POR word limit
is ~2 minutes of an H100's generation (`make plan`), and every engine start adds its start-up and a reading of
the weights (benchmarks/README.md: on the CPU engine, start-ups are 65% of ten one-word-limit jobs).

The files are the same either way: each word limit's calls are the same, in the same order
(debates.debates_at_limits, judge.judge_files); the logs and benchmark records are one per job. The split is a
setting of its own rather than following `generation_backend`: switching a backend must not rerun the greedy
rules, and a changed split reruns the gathered rules (their benchmark records and params are others), which
find their calls in the call cache.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SPLITS = ("word_limit", "model")
# The rules a per-model split gathers (their jobs lose the {verbosity} wildcard). The rebuttal round's own
# generations (cwpor_rebuttal) stay one job per word limit.
GATHERED_RULES = frozenset({"cwpor_debate", "cwpor_judge", "cwpor_judge_rebuttal"})


def job_split(config: Mapping[str, Any]) -> str:
    """cwpor.job_split: `word_limit` or `model`."""
    split = config["cwpor"].get("job_split", "word_limit")
    if split not in SPLITS:
        raise ValueError(f"cwpor.job_split must be one of {list(SPLITS)}, got {split!r}")
    return split


def job_wildcards(config: Mapping[str, Any], rule: str, cell: Mapping[str, str]) -> dict[str, str]:
    """The wildcards of the job that makes the calls of a plan row of `rule` with `cell` (its wildcards at one
    job per word limit): without the word limit where the split gathers the rule's jobs per model."""
    if rule in GATHERED_RULES and job_split(config) == "model":
        return {key: value for key, value in cell.items() if key != "verbosity"}
    return dict(cell)
