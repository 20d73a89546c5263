"""What the audit costs in model calls (`make plan`, tools/plan.py): the readouts of q_m, q_h and every
paraphrase by V_base and each audited target (audit_scores, one row per job: architecture x dataset x
checkpoint); the statistics call no model."""

from __future__ import annotations

from debate_audit.models.calls import RulePlan, tokens

from ..common import grid
from ..common.shape import item_shapes


def calls(config: dict, stats: dict[str, dict[str, float]]) -> list[RulePlan]:
    par, aud = config["paraphrase"], config["audit"]
    cells = grid.Plan.from_config(config)
    per_pair = par["search"]["size"] + par["test"]["size"] * len(par["test"]["generators"]) + 1
    plans = []
    for item in item_shapes(config, stats):
        for arch in grid.base_models(config["verifier"]):
            scored = dict.fromkeys(
                cp.path_id
                for setting in cells.settings(arch, item.dataset, aud["targets"])
                for cp in setting.checkpoints(aud["targets"])
            )
            for checkpoint in scored:  # one job each
                cell = {"architecture": arch, "dataset": item.dataset, "verifier": checkpoint}
                scores = RulePlan("audit_scores", model=arch, cell=cell)
                scores.scorings += item.pairs * per_pair * 2
                scores.prompt_tokens += scores.scorings * (60 + tokens(item.question_words))
                plans.append(scores)
    return plans
