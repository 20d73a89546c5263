"""What the paraphrase pools cost in model calls (`make plan`, tools/plan.py): the search pool's draws with
their top-up rounds, and each test generator's draws; one row per job (dataset, and generator)."""

from __future__ import annotations

from debate_audit.models.calls import RulePlan, tokens

from ..common.shape import audit_shapes
from . import prompts as paraphrase_prompts


def calls(config: dict, stats: dict[str, dict[str, float]]) -> list[RulePlan]:
    par = config["paraphrase"]
    # prompt tokens besides the question: the chosen prompt version's template, as words
    template = paraphrase_prompts.prompts(par.get("prompt", "paper"))
    overhead = {
        "search": 20 + tokens(len(template.batch("", 100)[-1]["content"].split())),
        "test": 20 + tokens(len(template.single("")[-1]["content"].split())),
    }
    plans = []
    # every audited dataset's pools: the trained verifiers' and those of models you bring
    for item in audit_shapes(config, stats):
        cell = {"dataset": item.dataset}
        search = RulePlan("paraphrase_search", model=par["search"]["generator"], sampled=True, cell=cell)
        rounds = 1 + par["search"]["max_topup_rounds"]
        search.generations += item.pairs * par["search"]["samples"] * rounds
        search.prompt_tokens += search.generations * (overhead["search"] + tokens(item.question_words))
        search.new_tokens += search.generations * par["search"]["max_new_tokens"]
        plans.append(search)
        for name, gen_cfg in par["test"]["generators"].items():
            test = RulePlan("paraphrase_test", model=gen_cfg["model"], sampled=True, cell={**cell, "generator": name})
            max_new = gen_cfg.get("max_new_tokens", par["test"]["max_new_tokens"])
            # filter drop: ~20% of draws rejected and redrawn; filter report redraws empty replies only
            test.generations += item.pairs * par["test"]["size"] * (1.25 if par.get("filter") == "drop" else 1.0)
            test.prompt_tokens += test.generations * (overhead["test"] + tokens(item.question_words))
            test.new_tokens += test.generations * max_new
            plans.append(test)
    return plans
