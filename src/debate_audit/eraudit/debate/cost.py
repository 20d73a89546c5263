"""What the debates cost in model calls (`make plan`, tools/plan.py): the debaters' turns of every candidate
(debate_generate), the GCG suffix search on every adversarial candidate (debate_gcg, `debate.gcg`) and the
selector's readouts of each candidate (debate_select); one row per job (dataset x length, x mode but for
debate_gcg)."""

from __future__ import annotations

from debate_audit.models.calls import RulePlan, tokens

from ..common import grid
from ..common.shape import generated, item_shapes, transcript_shape


def calls(config: dict, stats: dict[str, dict[str, float]]) -> list[RulePlan]:
    if not generated(config):
        return []
    db = config["debate"]
    cells = grid.Plan.from_config(config)
    selector = db.get("selector") or grid.base_models(config["verifier"])[0]
    plans = []
    for item in item_shapes(config, stats):
        for length in cells.lengths:
            shape = transcript_shape(config, item, length)
            arg_tokens = int(shape.words * 1.5) + 16
            gens, sels = [], []
            orders = 1 if db.get("selection_order") == "seeded" else 2
            gcg = db.get("gcg") or {}
            for mode in cells.debate_modes(item.dataset, length):  # one job each
                cell = {"dataset": item.dataset, "length": length, "debate_mode": mode}
                gen = RulePlan("debate_generate", model=db["debater"], sampled=db["candidates"] > 1, cell=cell)
                turns = item.train * db["candidates"] * db["rounds"] * 2  # two debaters
                # a scratchpad turn is two slots: the thinking, then the argument after it
                slots = 2 if db.get("scratchpad") else 1
                thinking = db.get("thinking_max_new_tokens", 0) if db.get("scratchpad") else 0
                gen.generations += turns * slots
                gen.prompt_tokens += (
                    turns * slots * (200 + item.context_tokens + tokens(item.question_words) + shape.history_tokens)
                    + turns * thinking
                )
                gen.new_tokens += turns * (arg_tokens + thinking)
                sel = RulePlan("debate_select", model=selector, cell=cell)
                pooled = db["candidates"]
                if gcg.get("enabled") and mode == "adversarial":
                    pooled += db["candidates"] if gcg.get("pool") == "add" else 0  # add: natives and suffixed copies
                sel.scorings += item.train * pooled * 2 * orders  # questions q_m/q_h x orders
                sel.prompt_tokens += item.train * pooled * 2 * orders * (shape.transcript_tokens + 60)
                gens.append(gen)
                sels.append(sel)
            plans += [row for pair in zip(gens, sels) for row in pair]
            if gcg.get("enabled") and "adversarial" in cells.debate_modes(item.dataset, length):
                cell = {"dataset": item.dataset, "length": length}
                candidates = item.train * db["candidates"]
                plans.append(gcg_plan(gcg, selector, candidates, orders, shape.transcript_tokens, cell))
    return plans


def gcg_plan(
    gcg: dict, selector: str, candidates: float, orders: int, transcript_tokens: float, cell: dict[str, str]
) -> RulePlan:
    """debate_gcg on `candidates` adversarial candidates (gcg.py): per candidate the no-suffix and initial
    scores, then per step one forward and backward pass per task (the gradient, counted as training tokens)
    and `candidates_per_step` exact forward passes per task, each over the whole readout prompt with the
    suffix (as the release scores them; the in-process scorer shares the prompt's prefix, so it computes less)."""
    tasks = 2 * orders  # q_m and q_h, in each order selection reads
    prompt = transcript_tokens + 60 + gcg["suffix_length"]
    scored = candidates * tasks * (2 + gcg["steps"] * gcg["candidates_per_step"])
    plan = RulePlan("debate_gcg", model=selector, cell=cell)
    plan.scorings += scored
    plan.prompt_tokens += scored * prompt
    plan.train_tokens += candidates * tasks * gcg["steps"] * prompt
    return plan
