"""What the debates cost in model calls (`make plan`, tools/plan.py): the debaters' turns of every candidate
(debate_generate) and the selector's readouts of each candidate (debate_select); one row per job (dataset x
length x mode)."""

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
                orders = 1 if db.get("selection_order") == "seeded" else 2
                sel.scorings += item.train * db["candidates"] * 2 * orders  # questions q_m/q_h x orders
                sel.prompt_tokens += item.train * db["candidates"] * 2 * orders * (shape.transcript_tokens + 60)
                gens.append(gen)
                sels.append(sel)
            plans += [row for pair in zip(gens, sels) for row in pair]
    return plans
