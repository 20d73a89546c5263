"""A cost plan for a configuration, before any model runs: jobs, model calls, tokens and GPU hours per rule.

Job counts come from Snakemake's own dry run; calls and tokens from the config and the datasets (their
sizes and mean text lengths); GPU time from the throughput that `benchmarks/gpu_bench.py` measured on an
H200 at Llama-8B shape (benchmarks/README.md), scaled by parameter count, and, for the generations of a
model whose `generation_backend` is `vllm` or `server`, from vLLM's published throughput (VLLM_THROUGHPUT). The estimate is for planning a
cluster bill, not a promise: generated tokens are upper bounds (every reply runs to its budget), and the
throughput figures carry the uncertainty given in THROUGHPUT.

Models served by an API (`source: openai`: a provider's hosted model or an OpenAI-compatible server) cost
calls and tokens, not GPU time: the plan lists their calls, input tokens (the prompt estimate above) and
output tokens (the budget: the provider request's own token cap where it sets one, else the stage's
max_new_tokens) and, from the config's `prices` table (USD per million tokens, the user's to set), the
estimated cost (`api_plans`).

The audit's operating characteristic (`power_plan`, eraudit/audit/power.py): for the configured pools, the
smallest per-paraphrase degradation rate p the audit flags with 80% power, whether its test pools can
certify tau_c at all and P(certify) at p = 0.01; for `audit.operating_characteristic.target`, the pool sizes
that reach it and what they cost in calls, tokens and (where `prices` are set) USD.
"""

from __future__ import annotations

import sys
from collections.abc import Collection, Sequence
from pathlib import Path

from debate_audit.models.calls import RulePlan
from debate_audit.models.size import params_b
from debate_audit.models.spec import ModelSpec
from debate_audit.tools.job_sizes import job_sizes
from debate_audit.tools.plan_api import api_plans, check_prices
from debate_audit.tools.plan_counts import dataset_stats, dry_run_jobs, model_calls
from debate_audit.tools.plan_hours import (
    LOAD_SECONDS_PER_B,
    VLLM_THROUGHPUT,
    fallback_factor,
    gpu_hours,
    linear_attention_model,
)
from debate_audit.tools.plan_memory import MODELS_DIR, job_gpus, training_memory
from debate_audit.tools.plan_power import power_plan
from debate_audit.tools.plan_report import Plan, plan_json, render, runtime_warnings


def build_plan(
    config: dict, jobs: dict[str, int], shared: Path | None, *, rules: Collection[str] | None = None
) -> Plan:
    """The plan of `config`; `rules`: only the model calls of these rules (the audit command's jobs), else
    every stage's."""
    check_prices(config)
    stats, notes = dataset_stats(config, shared)
    specs = {name: ModelSpec.from_config(name, entry) for name, entry in config["models"].items()}
    merged: dict[tuple[str, str], RulePlan] = {}
    for rp in model_calls(config, stats):
        if rules is not None and rp.rule not in rules:
            continue
        key = (rp.rule, rp.model)
        if key not in merged:
            merged[key] = RulePlan(rp.rule, model=rp.model, sampled=rp.sampled)
        into = merged[key]
        for attr in ("generations", "scorings", "prompt_tokens", "new_tokens", "train_tokens"):
            setattr(into, attr, getattr(into, attr) + getattr(rp, attr))
    fine_tunes = rules is None or "verifier_finetune" in rules
    plan = Plan(notes=notes, training=training_memory(config, specs) if fine_tunes else [])
    for (rule, model), rp in merged.items():
        size = params_b(specs[model]) if model in specs else None
        if model in specs and rp.generations and specs[model].generation_backend in ("vllm", "server"):
            rp.engine = "vllm"
        prepared = Path(MODELS_DIR) / model
        rp.gpu_hours_h200, rp.gpu_hours_h100 = gpu_hours(rp, size, fallback_factor(config, specs.get(model), prepared))
        if model in specs and linear_attention_model(specs[model], prepared):
            plan.linear_attention[model] = fallback_factor(config, specs[model], prepared)
        loads = jobs.get(rule, 0) / max(1, sum(1 for (r, _) in merged if r == rule))
        load_h = loads * (size or 0) * LOAD_SECONDS_PER_B / 3600
        if rp.engine == "vllm" and specs[model].generation_backend == "vllm":  # the job starts its engine
            load_h += loads * VLLM_THROUGHPUT["start_seconds"] / 3600
        rp.gpu_hours_h200 += load_h
        rp.gpu_hours_h100 += load_h
        rp.gpus, rp.gpu_gib = job_gpus(config, specs.get(model), rp, size)
        plan.rules.append(rp)
    for rule, count in jobs.items():
        for rp in plan.rules:
            if rp.rule == rule:
                rp.jobs = count
    plan.cluster = job_sizes(config, specs, plan.rules)
    for rule, count in jobs.items():
        if not any(rp.rule == rule for rp in plan.rules):
            plan.rules.append(RulePlan(rule, jobs=count))
    plan.api, plan.api_notes = api_plans(config, plan.rules, specs)
    plan.power = power_plan(config, stats, specs)
    return plan


def load_config(configfiles: Sequence[str]) -> dict:
    """The config Snakemake would see: the files deep-merged in order, validated against the schema."""
    import yaml
    from snakemake.utils import update_config, validate

    config: dict = {}
    for path in configfiles:
        update_config(config, yaml.safe_load(Path(path).read_text()) or {})
    validate(config, "config/schema.yaml")
    check_prices(config)
    return config


def main(argv: Sequence[str] | None = None) -> None:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configfile", nargs="+", default=["config/config.yaml", "config/paper.yaml"])
    parser.add_argument(
        "--shared",
        default="../shared/data",
        help="dataset copies used for sizes when the "
        "configured locations are URLs (default: ../shared/data; absent: nominal sizes)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="print the plan as JSON (per rule: jobs, GPUs per "
        "job, memory per GPU, calls, tokens, GPU-hours; per API model: calls, tokens, estimated "
        "cost) instead of tables",
    )
    args = parser.parse_args(argv)
    try:
        config = load_config(args.configfile)
    except ValueError as error:
        parser.exit(2, f"{parser.prog}: error: {error}\n")
    jobs = dry_run_jobs(args.configfile)
    shared = Path(args.shared) if Path(args.shared).is_dir() else None
    plan = build_plan(config, jobs, shared)
    # on stderr as well: a JSON reader sees no tables, and a table reader may not scroll to the job sizes
    for warning in runtime_warnings(plan):
        print(warning, file=sys.stderr)
    if args.json:
        print(plan_json(plan))
        return
    print(f"Cost plan for {' + '.join(args.configfile)} (a from-scratch run; no model is loaded)\n")
    print(render(plan))


if __name__ == "__main__":
    main()
