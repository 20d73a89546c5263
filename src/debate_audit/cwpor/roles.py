"""Who plays which role in model m's debates; used by rules/cwpor.smk to build rule params."""

from __future__ import annotations

from typing import Any

ROLES = ("neutral", "persuasive", "judge")


def role_model(cwpor_config: dict[str, Any], model: str, role: str) -> str:
    """cwpor.<role>_model, or the experiment model m itself when that key is null."""
    if role not in ROLES:
        raise ValueError(f"unknown CW-POR role {role!r}; roles: {ROLES}")
    return cwpor_config[f"{role}_model"] or model
