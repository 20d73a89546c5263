"""Who plays which role in model m's debates, who judges them, and each model's family; used by
rules/cwpor.smk to build paths and params and by the cross-judge table."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

ROLES = ("neutral", "persuasive", "judge")

# How a judge relates to the experiment model whose debates it reads (the cross-judge contrast).
SELF, SAME_FAMILY, OTHER_FAMILY, UNKNOWN_FAMILY = "self", "same-family", "other-family", "unknown-family"


def role_model(cwpor_config: dict[str, Any], model: str, role: str) -> str:
    """cwpor.<role>_model, or the experiment model m itself when that key is null."""
    if role not in ROLES:
        raise ValueError(f"unknown CW-POR role {role!r}; roles: {ROLES}")
    return cwpor_config[f"{role}_model"] or model


def judges(cwpor_config: dict[str, Any], model: str) -> list[str]:
    """Every judge of m's debates: the primary judge (cwpor.judge_model or m; its judgments make the paper's
    outputs) first, then each of cwpor.cross_judges that is not already there."""
    primary = role_model(cwpor_config, model, "judge")
    return list(dict.fromkeys([primary, *(cwpor_config.get("cross_judges") or [])]))


def relation(families: Mapping[str, str], model: str, judge: str) -> str:
    """self (m judges its own debates), same-family, other-family, or unknown-family (cwpor.families
    names no family for one of them)."""
    if judge == model:
        return SELF
    mine, theirs = families.get(model), families.get(judge)
    if mine is None or theirs is None:
        return UNKNOWN_FAMILY
    return SAME_FAMILY if mine == theirs else OTHER_FAMILY
