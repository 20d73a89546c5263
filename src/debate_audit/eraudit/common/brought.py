"""Audits of models you bring (config `audited_models`): a base and the targets adapted from it, each a model
spec under `models:` that this workflow did not train (a local directory, a hub id, an OpenAI-compatible
server, a hosted model), audited on a dataset through the same stages as the trained verifiers.

The audit is black-box (ER-Audit, Sections 3.1-3.2): it needs P[V(q) = a] of the base and of each target and
nothing else, so a brought pair takes the trained grid's scoring, statistics, figures and views unchanged.
What differs is only who the models are:

- the base's scores carry the checkpoint name `base` (Delta is computed against it), a target's its model
  name, so a target may not be named like one of the workflow's own verifiers (base, honest, adv, org, copy);
- the outputs' `architecture` label is the audit's name (its `length` and `qh_weight` are null), so two audits
  of one base model, or a brought base that is also a trained architecture, stay apart;
- there is no part-1 split (no verifier of this workflow trained on the pairs) and no V_org: epsilon is the
  audit's own `epsilon`, else `audit.epsilon`, or a percentile (`audit.epsilon_percentile`) of the search
  maxima of the target named by `epsilon_reference` (a model organism you bring);
- one audit reads its base and its targets with one prompt: a model behind a chat endpoint (`source: openai`)
  is read as a conversation with a one-letter instruction and no prefilled answer slot (models/api.py), any
  other (local weights, also those scored on a server with `scoring_backend: server`) with the prompt rendered
  here and a prefilled `Answer:`, so an audit whose members would be read both ways is refused
  (`read_through_endpoint`, `audit_errors`): the difference of prompts would be in every Delta (the same two
  engines read both ways, tests/test_vllm.py: 6 of 8 Deltas changed sign and one verdict changed).

Only the rules and the config check read this module (no model, no torch).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import verifiers

# The names of the workflow's own verifiers: a target named so would be drawn and read as one of them.
RESERVED_NAMES = tuple(verifiers.VERIFIERS)
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
# The datasets a brought audit may name besides `datasets.own`: the ER-Audit releases' pairs.
RELEASE_DATASETS = ("quality_h", "gpqa_h")


@dataclass(frozen=True)
class BroughtAudit:
    name: str  # the key under audited_models: a path segment and the outputs' `architecture` label
    base: str  # model under models:
    targets: tuple[str, ...]  # models under models:, each audited against the base
    datasets: tuple[str, ...]  # quality_h / gpqa_h, or names under datasets.own
    readout: str | None = None  # verifier.readout when None
    epsilon: float | None = None  # audit.epsilon / audit.epsilon_percentile when None
    epsilon_reference: str | None = None  # the target whose search maxima set a percentile epsilon

    @classmethod
    def from_config(cls, name: str, entry: Mapping[str, Any]) -> BroughtAudit:
        return cls(
            name=name,
            base=entry["base"],
            targets=tuple(entry["targets"]),
            datasets=tuple(entry["datasets"]),
            readout=entry.get("readout"),
            epsilon=entry.get("epsilon"),
            epsilon_reference=entry.get("epsilon_reference"),
        )

    @property
    def models(self) -> tuple[str, ...]:
        """The base, then each target: one score file per model and dataset."""
        return (self.base, *self.targets)

    def checkpoint(self, model: str) -> str:
        """The `checkpoint` its scores carry: `base` for the base, else the model's name."""
        return verifiers.BASE.name if model == self.base else model

    def labels(self) -> dict[str, Any]:
        """The grid label columns of every output (eraudit/common/grid.py LABEL_SCHEMA)."""
        return {"architecture": self.name, "length": None, "qh_weight": None}

    def readout_mode(self, verifier: Mapping[str, Any]) -> str:
        return self.readout or verifier["readout"]

    def settings(self, shared: Mapping[str, Any]) -> dict[str, Any]:
        """AuditSettings keywords (eraudit/audit/verdicts.py): the run's `shared` ones with this audit's targets,
        epsilon and reference."""
        own = {"epsilon": self.epsilon, "epsilon_percentile": None} if self.epsilon is not None else {}
        return {**shared, **own, "targets": list(self.targets), "epsilon_reference": self.epsilon_reference}


def brought_audits(config: Mapping[str, Any]) -> list[BroughtAudit]:
    return [BroughtAudit.from_config(name, entry) for name, entry in (config.get("audited_models") or {}).items()]


def own_datasets(config: Mapping[str, Any]) -> list[str]:
    """The names under `datasets.own` (your own pairs files)."""
    return list(config["datasets"].get("own") or {})


def trained_datasets(config: Mapping[str, Any]) -> list[str]:
    """The datasets the workflow debates and fine-tunes verifiers on (`verifier.datasets`; empty: part 1 off)."""
    return list((config.get("verifier") or {}).get("datasets") or [])


def audit_datasets(config: Mapping[str, Any]) -> list[str]:
    """Every dataset with paraphrase pools: the trained ones, then those only brought audits name."""
    return list(dict.fromkeys([*trained_datasets(config), *(d for a in brought_audits(config) for d in a.datasets)]))


def read_through_endpoint(entry: Any) -> bool:
    """Whether a model spec (an entry of `models:`) is read through a chat endpoint's conversation readout
    (`source: openai`: a one-letter instruction, no prefilled answer slot) rather than the prompt this workflow
    renders (a local model, also one scored on a server: `scoring_backend: server`)."""
    return isinstance(entry, Mapping) and entry.get("source") == "openai"


def mixed_readout_error(key: str, base: str, members: Mapping[str, Any]) -> str | None:
    """The refusal of an audit (`key`) whose members (model name -> spec, `base` among them) would be read with
    different prompts, naming each side's members and the two ways out; None when they are all read one way."""
    endpoint = [name for name, entry in members.items() if read_through_endpoint(entry)]
    local = [name for name, entry in members.items() if isinstance(entry, Mapping) and name not in endpoint]
    if not endpoint or not local:
        return None

    def named(names: list[str]) -> str:
        return ", ".join(f"{name} (base)" if name == base else name for name in names)

    return (
        f"{key}: its base and targets would be read with different prompts: {named(endpoint)} through the chat "
        f"endpoint (source openai: a one-letter instruction, no prefilled answer slot), {named(local)} with the "
        "prompt rendered here (a prefilled 'Answer:'), so every Delta would hold the difference of prompts; read "
        "them all one way: serve the weights of all of them with scoring_backend: server (source local or hf, "
        "generation_backend: server), or all through the endpoint (source openai)"
    )


def audit_errors(config: Mapping[str, Any]) -> list[str]:
    """What is wrong with `audited_models` and `datasets.own`, each naming its key (config_check)."""
    errors = []
    own = (config.get("datasets") or {}).get("own") or {}
    for name in own:
        if name in ("truthfulqa", *RELEASE_DATASETS) or not NAME.match(name):
            errors.append(
                f"datasets.own.{name}: not a name for your own dataset (letters, digits, '.', '_', '-'; not one of "
                f"the workflow's datasets truthfulqa, {', '.join(RELEASE_DATASETS)})"
            )
    architectures = (config.get("verifier") or {}).get("base_models") or []
    models = config.get("models") or {}
    shared_eps = (config.get("audit") or {}).get("epsilon")
    for name, entry in (config.get("audited_models") or {}).items():
        key = f"audited_models.{name}"
        if not isinstance(entry, Mapping):
            continue  # the schema names it
        if not NAME.match(name) or name in architectures:
            errors.append(
                f"{key}: the audit's name is a path segment and its outputs' architecture label: letters, digits, "
                f"'.', '_', '-', and not a verifier architecture of verifier.base_models ({architectures})"
            )
        targets = list(entry.get("targets") or [])
        for i, target in enumerate(targets):
            if target in RESERVED_NAMES:
                errors.append(
                    f"{key}.targets[{i}]: {target!r} is the name of one of the workflow's own verifiers "
                    f"({', '.join(RESERVED_NAMES)}); give the model another name under models:"
                )
            elif target == entry.get("base"):
                errors.append(
                    f"{key}.targets[{i}]: {target!r} is the audit's base; to check the audit's false-alarm rate, "
                    "define the same model a second time under another name and audit that"
                )
        for i, dataset in enumerate(entry.get("datasets") or []):
            if dataset not in RELEASE_DATASETS and dataset not in own:
                errors.append(
                    f"{key}.datasets[{i}]: {dataset!r} is neither {' nor '.join(RELEASE_DATASETS)} nor a dataset of "
                    f"datasets.own ({sorted(own)})"
                )
        reference = entry.get("epsilon_reference")
        if reference is not None and reference not in targets:
            errors.append(f"{key}.epsilon_reference: {reference!r} is not one of its targets {targets}")
        if entry.get("epsilon") is None and shared_eps is None and reference is None:
            errors.append(
                f"{key}.epsilon: audit.epsilon_percentile sets epsilon from V_org's search maxima, and a brought "
                "audit has no V_org: set its own epsilon, or name the target whose maxima set it in "
                "epsilon_reference (a model organism you bring)"
            )
        members = [entry.get("base"), *targets]
        mixed = mixed_readout_error(key, entry.get("base"), {m: models.get(m) for m in members if isinstance(m, str)})
        if mixed:
            errors.append(mixed)
    return errors
