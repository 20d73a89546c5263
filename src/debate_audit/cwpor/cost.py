"""What CW-POR costs in model calls (`make plan`, tools/plan.py): per model its single-turn debates, the
rebuttal protocols' turns, and each judge's judgments, with their prompt and generated tokens; one row per
job (model x word limit, and judge, protocol). A judgment is its reply's generations and one scoring (the
LLC), which a judge behind an endpoint without log-probabilities does not make (spec.no_logprobs)."""

from __future__ import annotations

from debate_audit.models.calls import RulePlan, tokens
from debate_audit.models.spec import ModelSpec, no_logprobs

from .prompts import judge_template, max_new_tokens_for
from .rebuttal import protocol as rebuttal_protocol
from .roles import judges as cwpor_judges
from .roles import role_model


def calls(config: dict, stats: dict[str, dict[str, float]]) -> list[RulePlan]:
    """Calls and tokens of the CW-POR rules over the whole run (`stats`: dataset sizes, tools/plan_counts.py)."""
    plans: list[RulePlan] = []
    cw = config["cwpor"]
    n_q = min(stats["truthfulqa"]["n"], cw["subset"] or stats["truthfulqa"]["n"])
    tqa = stats["truthfulqa"]
    tpl = judge_template(cw["judge_template"])
    slots = max(1, len(tpl.reply_labels))
    protocols = [rebuttal_protocol(p) for p in cw.get("rebuttal_protocols") or []]

    def budget(words: int) -> int:
        return max_new_tokens_for(words, cw["tokens_per_word"], cw["extra_tokens"])

    def scores(judge: str) -> bool:  # whether the judge's LLC is scored (its endpoint has log-probabilities)
        entry = (config.get("models") or {}).get(judge)
        return not isinstance(entry, dict) or no_logprobs(ModelSpec.from_config(judge, entry)) is None

    def judged(plan: RulePlan, shown_words: float) -> None:  # one judgment of every question
        prompt = 350 + tokens(tqa["question_words"]) + 2 * shown_words
        scored = int(scores(plan.model))
        plan.generations += slots * n_q
        plan.scorings += scored * n_q
        plan.prompt_tokens += (slots + scored) * n_q * prompt
        plan.new_tokens += n_q * (cw["judge_max_new_tokens"] + (slots - 1) * tpl.slot_tokens)

    for model in cw["models"]:  # each CW-POR cell runs its own model; responses once, every judge reads them
        neutral = role_model(cw, model, "neutral")
        debates, rebuttals, judged_rows = [], [], {j: ([], []) for j in cwpor_judges(cw, model)}
        halves = {p.turn_words(v) for p in protocols for v in cw["verbosity"]} - set(cw["verbosity"])
        for v in [*cw["verbosity"], *sorted(halves)]:
            debate = RulePlan("cwpor_debate", model=neutral, cell={"model": model, "verbosity": str(v)})
            debate.generations += 2 * n_q
            debate.prompt_tokens += 2 * n_q * (80 + tokens(tqa["question_words"] + tqa["answer_words"]))
            debate.new_tokens += 2 * n_q * budget(v)
            debates.append(debate)
        for v in cw["verbosity"]:
            for judge, (singles, _) in judged_rows.items():
                single = RulePlan(
                    "cwpor_judge", model=judge, cell={"model": model, "judge": judge, "verbosity": str(v)}
                )
                judged(single, min(budget(v), tokens(v)))
                singles.append(single)
            for name, p in zip(cw.get("rebuttal_protocols") or [], protocols):
                words = p.turn_words(v)
                calls = len(p.rebutters) * n_q
                cell = {"model": model, "protocol": name, "verbosity": str(v)}
                rebut = RulePlan("cwpor_rebuttal", model=neutral, cell=cell)
                rebut.generations += calls
                rebut.prompt_tokens += calls * (120 + tokens(tqa["question_words"] + tqa["answer_words"] + 2 * words))
                rebut.new_tokens += calls * budget(words)
                rebuttals.append(rebut)
                for judge, (_, afters) in judged_rows.items():
                    after = RulePlan("cwpor_judge_rebuttal", model=judge, cell={**cell, "judge": judge})
                    judged(after, min(budget(words), tokens(words)) * (1 + len(p.rebutters) / 2))
                    afters.append(after)
        plans += [*debates, *rebuttals]
        plans += [row for singles, afters in judged_rows.values() for row in (*singles, *afters)]
    return plans
