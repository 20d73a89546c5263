"""What the audit costs in model calls (`make plan`, tools/plan.py): the readouts of q_m, q_h and every
paraphrase by V_base and each audited target (audit_scores), and by the base and each target of the audits of
models you bring (audit_model_scores); the statistics call no model."""

from __future__ import annotations

from debate_audit.models.calls import RulePlan, tokens

from ..common import grid
from ..common.shape import audit_shapes, item_shapes
from .brought import brought_audits


def calls(config: dict, stats: dict[str, dict[str, float]]) -> list[RulePlan]:
    par, aud = config["paraphrase"], config["audit"]
    cells = grid.Plan.from_config(config)
    per_pair = par["search"]["size"] + par["test"]["size"] * len(par["test"]["generators"]) + 1
    plans = []
    for item in item_shapes(config, stats):
        for arch in grid.base_models(config["verifier"]):
            scores = RulePlan("audit_scores", model=arch)
            scored = {
                cp.path_id
                for setting in cells.settings(arch, item.dataset, aud["targets"])
                for cp in setting.checkpoints(aud["targets"])
            }
            scores.scorings += len(scored) * item.pairs * per_pair * 2
            scores.prompt_tokens += scores.scorings * (60 + tokens(item.question_words))
            plans.append(scores)
    shapes = {s.dataset: s for s in audit_shapes(config, stats)}
    for audit in brought_audits(config):
        for dataset in audit.datasets:
            for model in audit.models:
                scores = RulePlan("audit_model_scores", model=model)
                scores.scorings += shapes[dataset].pairs * per_pair * 2
                scores.prompt_tokens += scores.scorings * (60 + tokens(shapes[dataset].question_words))
                plans.append(scores)
    return plans
