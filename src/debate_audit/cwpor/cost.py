"""What CW-POR costs in model calls (`make plan`, tools/plan.py): per model its single-turn debates, the
rebuttal protocols' turns, and each judge's judgments, with their prompt and generated tokens. A judgment is
its reply's generations and one scoring (the LLC), which a judge behind an endpoint without log-probabilities
does not make (spec.no_logprobs)."""

from __future__ import annotations

from debate_audit.models.calls import RulePlan, tokens
from debate_audit.models.spec import ModelSpec, no_logprobs

from .prompts import judge_template, max_new_tokens_for
from .rebuttal import protocol as rebuttal_protocol
from .roles import judges as cwpor_judges
from .roles import role_model


def calls(config: dict, stats: dict[str, dict[str, float]]) -> list[RulePlan]:
    """Calls and tokens of the CW-POR rules over the whole run (`stats`: dataset sizes, tools/plan.py)."""
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
        debate = RulePlan("cwpor_debate", model=role_model(cw, model, "neutral"))
        rebut = RulePlan("cwpor_rebuttal", model=role_model(cw, model, "neutral"))
        judges = {
            j: (RulePlan("cwpor_judge", model=j), RulePlan("cwpor_judge_rebuttal", model=j))
            for j in cwpor_judges(cw, model)
        }
        halves = {p.turn_words(v) for p in protocols for v in cw["verbosity"]} - set(cw["verbosity"])
        for v in [*cw["verbosity"], *sorted(halves)]:
            debate.generations += 2 * n_q
            debate.prompt_tokens += 2 * n_q * (80 + tokens(tqa["question_words"] + tqa["answer_words"]))
            debate.new_tokens += 2 * n_q * budget(v)
        for v in cw["verbosity"]:
            for single, _ in judges.values():
                judged(single, min(budget(v), tokens(v)))
            for p in protocols:
                words = p.turn_words(v)
                calls = len(p.rebutters) * n_q
                rebut.generations += calls
                rebut.prompt_tokens += calls * (120 + tokens(tqa["question_words"] + tqa["answer_words"] + 2 * words))
                rebut.new_tokens += calls * budget(words)
                for _, after in judges.values():
                    judged(after, min(budget(words), tokens(words)) * (1 + len(p.rebutters) / 2))
        plans += [debate, *([rebut] if protocols else [])]
        plans += [plan for pair in judges.values() for plan in pair if plan.generations]
    return plans
