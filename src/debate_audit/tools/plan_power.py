"""The audit's operating characteristic for `make plan` (eraudit/audit/power.py): for the configured pools,
the smallest per-paraphrase degradation rate p the audit flags with 80% power, whether its test pools can
certify tau_c at all and P(certify) at p = 0.01; for `audit.operating_characteristic.target`, the pool sizes
that reach it and what they cost in calls, tokens and (where `prices` are set) USD."""

from __future__ import annotations

from dataclasses import dataclass, field

from debate_audit.models.spec import ModelSpec
from debate_audit.tools.plan_api import api_plans


@dataclass
class PoolOption:
    """Pool sizes of the audit and what they cost (`power_plan`)."""

    name: str  # configured / equal pools / larger search pool
    search_size: int  # M_search
    test_size: int  # M_test per generator
    clean_reads: int  # paraphrases the paper's test reads on a q_h without a counterexample
    p_flag: float  # P(flagged) at the target's p
    generations: float  # paraphrase_search + paraphrase_test, the whole run
    scorings: float  # audit_scores, the whole run
    prompt_tokens: float  # of those calls
    new_tokens: float  # generated-token budget of those calls
    api_models: int  # of their models, served by an API
    cost_usd: float | None  # the API models' cost at `prices`; None: no price set (or no API model)
    priced_all: bool  # every API model has a price


@dataclass
class PowerPlan:
    """The audit's operating characteristic for planning (`audit.operating_characteristic`, power.py)."""

    search_size: int
    test_size: int
    generators: int
    eta: float
    tau: float | None
    certify_tau: float
    clean_reads: int  # N: paraphrases read on a q_h without a counterexample
    detectable_p: float | None  # smallest p flagged with 80% power (power.DETECTABLE_POWER)
    certifiable: bool  # the test pools can lift the paper's common bound to certify_tau
    clean_bound: float  # the paper's common bound of a clean q_h
    certify_test_size: int  # M_test per generator that certifying certify_tau needs
    p_certify_paper: float  # at CERTIFY_P
    p_certify_betting: float  # at CERTIFY_P
    p_certify_betting_se: float | None  # Monte Carlo standard error; None: exact
    target_p: float
    target_power: float
    target_reads: int  # paraphrases read that reach the target
    options: list[PoolOption] = field(default_factory=list)


CERTIFY_P = 0.01  # the nearly clean q_h whose P(certify) make plan prints
PLAN_DRAWS = 4000  # at most this many Monte Carlo streams for the betting bound in make plan (a few tenths of a second)


def power_plan(config: dict, stats: dict[str, dict[str, float]], specs: dict[str, ModelSpec]) -> PowerPlan:
    """The configured audit's operating characteristic, and the pool sizes that reach the config's target
    (`audit.operating_characteristic.target`) with their cost: the configured pools, the smallest equal pools
    (M search + M per test generator, the paper's 100 + 100 shape) and, where the configured pools fall short,
    the configured test pools with the smallest search pool that makes up the rest."""
    from debate_audit.eraudit.audit import cost as audit_cost
    from debate_audit.eraudit.audit import power
    from debate_audit.eraudit.audit.stats import samples_to_certify

    design = power.design_from_config(config)
    settings = config["audit"]["operating_characteristic"]
    target = settings["target"]
    p, level = target["detectable_p"], target["power"]
    betting, betting_se, _ = power.betting_pool_certify(
        design, CERTIFY_P, draws=min(settings["monte_carlo_draws"], PLAN_DRAWS), seed=settings["seed"]
    )
    designs = [("configured", design), ("equal pools", power.equal_pools_for(design, p, level))]
    if power.flag_probability(design, p)[0] < level:
        designs.append(("larger search pool", power.search_pool_for(design, p, level)))
    options = []
    for name, option in designs:
        test_size = option.test_sizes[0] if option.test_sizes else 0
        rules = audit_cost.pool_calls(config, stats, option.search_size, test_size)
        sized = audit_cost.with_pools(config, option.search_size, test_size)
        api, _ = api_plans(sized, rules, specs)
        priced = [a.cost_usd for a in api if a.cost_usd is not None]
        options.append(
            PoolOption(
                name=name,
                search_size=option.search_size,
                test_size=test_size,
                clean_reads=option.clean_reads,
                p_flag=float(power.flag_probability(option, p)[0]),
                generations=sum(r.generations for r in rules),
                scorings=sum(r.scorings for r in rules),
                prompt_tokens=sum(r.prompt_tokens for r in rules),
                new_tokens=sum(r.new_tokens for r in rules),
                api_models=len(api),
                cost_usd=sum(priced) if priced else None,
                priced_all=len(priced) == len(api),
            )
        )
    return PowerPlan(
        search_size=design.search_size,
        test_size=design.test_sizes[0] if design.test_sizes else 0,
        generators=len(design.test_sizes),
        eta=design.eta,
        tau=design.tau,
        certify_tau=design.certify_tau,
        clean_reads=design.clean_reads,
        detectable_p=power.detectable_p(design, power.DETECTABLE_POWER),
        certifiable=design.certifiable,
        clean_bound=design.clean_bound,
        certify_test_size=samples_to_certify(design.certify_tau, design.eta),
        p_certify_paper=float(power.paper_certify_probability(design, CERTIFY_P)[0]),
        p_certify_betting=betting,
        p_certify_betting_se=betting_se,
        target_p=p,
        target_power=level,
        target_reads=power.reads_for_power(p, level),
        options=options,
    )
