"""The cost of a stage in model calls, before anything runs: each stage counts its own (its `cost.py`) as
`RulePlan` rows, and `make plan` (tools/plan.py) adds them up, prices them in GPU-hours or USD and prints them."""

from __future__ import annotations

from dataclasses import dataclass, field

TOKENS_PER_WORD = 1.35  # English prose under the papers' BPE tokenizers


def tokens(words: float) -> float:
    """Tokens of `words` words of English prose (an estimate: the models' tokenizers differ)."""
    return words * TOKENS_PER_WORD


@dataclass
class RulePlan:
    rule: str
    jobs: int = 0
    model: str = ""  # the model whose size sets the GPU time ("" for CPU rules)
    generations: int = 0
    scorings: int = 0
    prompt_tokens: float = 0.0
    new_tokens: float = 0.0  # upper bound
    train_tokens: float = 0.0
    sampled: bool = False
    engine: str = "in-process"  # who generates: the in-process loop, or vLLM (generation_backend vllm / server)
    gpu_hours_h200: float = 0.0
    gpu_hours_h100: float = 0.0
    gpus: int = 0  # GPUs one job of the rule asks for (rules/job_sizes.smk: generation_gpu, finetune_processes)
    gpu_gib: float | None = None  # planned memory per GPU before activations / key-value cache
    cpus: int = 0  # cores one job asks for (tools/job_sizes.py; the most of the rule's jobs with this model)
    runtime_min: int = 0  # time limit of one job, first attempt (tools/job_sizes.py; the longest such job)
    runtime_wanted_min: int = 0  # ... before cluster.runtime.max_minutes caps it (above the cap: killed there)
    # The wildcard values of the one job whose calls these are (a stage's cost.py counts them per job; `make
    # plan` adds the rows up per rule and model, tools/job_sizes.py gives each job the time its rows take).
    cell: dict[str, str] = field(default_factory=dict)
