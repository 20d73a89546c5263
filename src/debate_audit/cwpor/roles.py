"""Who plays which role in model m's debates; used by rules/cwpor.smk to build rule params."""

from __future__ import annotations

from typing import Any

from debate_audit.models.spec import ModelSpec

ROLES = ("neutral", "persuasive", "judge")


def role_model(cwpor_config: dict[str, Any], model: str, role: str) -> str:
    """cwpor.<role>_model, or the experiment model m itself when that key is null."""
    if role not in ROLES:
        raise ValueError(f"unknown CW-POR role {role!r}; roles: {ROLES}")
    return cwpor_config[f"{role}_model"] or model


def model_ref(spec: ModelSpec, model_dir: str) -> dict[str, Any]:
    """The fields of a `runtime.ModelRef` (plain values, so Snakemake can compare params)."""
    return {
        "name": spec.name,
        "model_dir": model_dir,
        "device": spec.device,
        "dtype": spec.dtype,
        "batch_size": spec.batch_size,
        "source": spec.source,
        "id": spec.id,
        "base_url": spec.base_url,
        "api_key_env": spec.api_key_env,
        "generation_backend": spec.generation_backend,
    }
