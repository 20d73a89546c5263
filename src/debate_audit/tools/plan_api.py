"""What the models served by an API cost (`make plan`): per model its calls, input tokens (the plan's prompt
estimate), output tokens (the request's own token cap where it sets one, else the stage's max_new_tokens)
and, from the config's `prices` table (USD per million tokens, the user's to set), the estimated cost."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from debate_audit.models.calls import TOKENS_PER_WORD, RulePlan, tokens
from debate_audit.models.spec import ModelSpec

# What the API table's figures rest on (printed under it, and in --json).
API_BASIS = (
    "calls: the generations counted above (paraphrase pools: their planned draws, top-up rounds "
    "included) and the scorings (a CW-POR judge's LLC; the audit's readouts of a verifier behind an endpoint, "
    "audit_model_scores, two per question, one per answer order; a selector's: one request for one token "
    "each, its input carrying the one-letter instruction models/api.py appends), from scratch, with "
    "nothing in the call cache; input tokens: the plan's prompt estimate, "
    f"the stage's prompt template and the dataset's mean text lengths at {TOKENS_PER_WORD} tokens per "
    "word (the provider's tokenizer and any system prompt differ); output tokens: a budget, every reply "
    "run to the provider request's own token cap (request.max_tokens / max_completion_tokens) where it "
    "sets one, else to the stage's max_new_tokens, which for a provider model without a cap is an "
    "estimate (it is not sent; reasoning tokens are billed as output); cost: input x input_per_mtok + "
    "output x output_per_mtok (USD per million tokens, config `prices`, yours to set)"
)


@dataclass
class ApiPlan:
    """One model served by an API (source openai): its calls and tokens over the run, and their price."""

    model: str
    provider: str  # openai, anthropic, or openai-compatible (no provider: a vLLM server, a gateway)
    rules: list[str]
    calls: float
    input_tokens: float  # estimate: the plan's prompt_tokens (template + the dataset's mean lengths)
    output_tokens: float  # budget: calls x the request's cap, or the stage's max_new_tokens
    output_budget: str  # where the output budget per call comes from
    output_estimated: bool  # no cap on the request: output counted at the stage's max_new_tokens, an estimate
    input_per_mtok: float | None = None  # USD per million tokens (config `prices`)
    output_per_mtok: float | None = None
    cost_usd: float | None = None  # None: no price set


def check_prices(config: dict) -> None:
    """`prices` names models under `models:` only (config_check.price_errors, which start-up runs too;
    the schema checks the figures: numbers >= 0 or null)."""
    from debate_audit.tools.config_check import price_errors

    errors = price_errors(config)
    if errors:
        raise ValueError("; ".join(errors))


def token_cap(spec: ModelSpec) -> tuple[str, int] | None:
    """The token cap a provider model's own request sets (models/api.py, TOKEN_CAPS), as (key, value)."""
    from debate_audit.models.api import TOKEN_CAPS

    if spec.provider is None:
        return None
    request = spec.request or {}
    return next(((k, request[k]) for k in TOKEN_CAPS[spec.provider] if request.get(k) is not None), None)


def api_plans(config: dict, rules: Sequence[RulePlan], specs: dict[str, ModelSpec]) -> tuple[list[ApiPlan], list[str]]:
    """Per model served by an API: calls, input and output tokens of the rows in `rules` it generates, and
    the cost at the config's `prices` (None where no price is set). A capped provider model's rows get their
    output budget set to calls x cap here too, so the rule table and this one agree."""
    prices = config.get("prices") or {}
    by_model: dict[str, list[RulePlan]] = {}
    for rp in rules:
        spec = specs.get(rp.model)
        if spec is not None and spec.source == "openai" and (rp.generations or rp.scorings):
            by_model.setdefault(rp.model, []).append(rp)
    from debate_audit.models.api import ONE_LETTER

    plans, notes = [], []
    instruction = tokens(len(ONE_LETTER.format(letters="A or B").split()))
    for model, rows in by_model.items():
        spec = specs[model]
        cap = token_cap(spec)
        for rp in rows:
            # a scoring request asks for one token (models/api.py, EndpointChatModel.scoring_request), its last
            # user turn carrying the one-letter instruction
            rp.new_tokens = (rp.generations * cap[1] if cap is not None else rp.new_tokens) + rp.scorings
            rp.prompt_tokens += rp.scorings * instruction
        generations = sum(rp.generations for rp in rows)
        scorings = sum(rp.scorings for rp in rows)
        calls = generations + scorings
        output = sum(rp.new_tokens for rp in rows)
        per_generation = (output - scorings) / generations if generations else 0.0
        if not generations:
            budget, estimated = "", False
        elif cap is not None:
            budget, estimated = f"{cap[1]} (request.{cap[0]})", False
        elif spec.provider is None:  # the OpenAI-compatible client sends the stage's max_new_tokens as max_tokens
            budget, estimated = f"{per_generation:.0f} (stage max_new_tokens, sent as max_tokens)", False
        else:
            budget, estimated = f"{per_generation:.0f} (stage max_new_tokens; no cap: estimate)", True
        if scorings:
            scored = "1 per scoring (one-token request)"
            budget = f"{budget} per generation; {scored}" if generations else scored
        price = prices.get(model) or {}
        inp, out = price.get("input_per_mtok"), price.get("output_per_mtok")
        prompt = sum(rp.prompt_tokens for rp in rows)
        cost = None if inp is None or out is None else (prompt * inp + output * out) / 1e6
        plans.append(
            ApiPlan(
                model,
                spec.provider or "openai-compatible",
                sorted({rp.rule for rp in rows}),
                calls,
                prompt,
                output,
                budget,
                estimated,
                inp,
                out,
                cost,
            )
        )
    for name in prices:
        if name not in by_model and any(v is not None for v in (prices[name] or {}).values()):
            served = specs[name].source == "openai"
            notes.append(
                f"prices.{name}: not used, {name} "
                + (
                    "makes no call in this plan"
                    if served
                    else f"is not served by an API here (source {specs[name].source}; its GPU-hours are above)"
                )
            )
    return plans, notes
