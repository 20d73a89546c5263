"""What the audit costs in model calls (`make plan`, tools/plan.py): the readouts of q_m, q_h and every
paraphrase by V_base and each audited target (audit_scores, one row per job: architecture x dataset x
checkpoint), and by the base and each target of the audits of models you bring (audit_model_scores, one row
per job: audit x dataset x model); the statistics call no model. `pool_calls`: the paraphrase pools and their
scoring at other pool sizes, for planning them (power.py)."""

from __future__ import annotations

import copy
import math

from debate_audit.models.calls import RulePlan, tokens

from ..common import grid
from ..common.brought import brought_audits
from ..common.shape import audit_shapes, item_shapes
from ..paraphrase import cost as paraphrase_cost


def calls(config: dict, stats: dict[str, dict[str, float]]) -> list[RulePlan]:
    par, aud = config["paraphrase"], config["audit"]
    cells = grid.Plan.from_config(config)
    # the questions scored per pair: q_m, q_h and every paraphrase of its pools (scoring.score_rows)
    per_pair = par["search"]["size"] + par["test"]["size"] * len(par["test"]["generators"]) + 2
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
    shapes = {s.dataset: s for s in audit_shapes(config, stats)}
    for audit in brought_audits(config):
        for dataset in audit.datasets:
            for model in audit.models:
                cell = {"audit": audit.name, "dataset": dataset, "model": model}
                scores = RulePlan("audit_model_scores", model=model, cell=cell)
                scores.scorings += shapes[dataset].pairs * per_pair * 2
                scores.prompt_tokens += scores.scorings * (60 + tokens(shapes[dataset].question_words))
                plans.append(scores)
    return plans


def with_pools(config: dict, search_size: int, test_size: int) -> dict:
    """`config` with M_search = `search_size` and M_test = `test_size` per generator. The search pool's sampled
    replies per q_h and round (`paraphrase.search.samples`) scale with its size, rounded up: a batch reply
    lists about as many paraphrases at any pool size, so the configured ratio of replies to paraphrases is
    kept."""
    out = copy.deepcopy(config)
    search = out["paraphrase"]["search"]
    search["samples"] = max(1, math.ceil(search["samples"] * search_size / search["size"]))
    search["size"] = search_size
    out["paraphrase"]["test"]["size"] = test_size
    return out


def pool_calls(config: dict, stats: dict[str, dict[str, float]], search_size: int, test_size: int) -> list[RulePlan]:
    """The calls that depend on the pool sizes (paraphrase_search, paraphrase_test, audit_scores) at these sizes."""
    sized = with_pools(config, search_size, test_size)
    return [*paraphrase_cost.calls(sized, stats), *calls(sized, stats)]
