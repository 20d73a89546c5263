"""The verifiers of ER-Audit, defined once: V_base (the prepared base model, not trained) and the three
fine-tuned variants V_honest / V_adv / V_org, and the audit's null target V_copy (V_base saved again, never
trained: auditing it against V_base is the false-alarm check, which must find nothing). Rules (wildcards,
targets), the fine-tuning code, Table 1 and every figure read names, labels, colours and transcript modes
from here, so a figure's V_adv is the same colour in the loss curves and in the audit figures."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Verifier:
    name: str  # the wildcard / column value: base, honest, adv, org
    label: str  # how figures and tables show it
    color: str  # matplotlib colour, the same in every figure
    mode: str | None  # transcript mode it is trained on ("honest" / "adversarial"); None: not trained

    @property
    def trained(self) -> bool:
        return self.mode is not None


BASE = Verifier("base", "V_base", "tab:gray", None)
HONEST = Verifier("honest", "V_honest", "tab:blue", "honest")
ADV = Verifier("adv", "V_adv", "tab:red", "adversarial")
ORG = Verifier("org", "V_org", "tab:purple", "adversarial")
COPY = Verifier("copy", "V_base copy", "tab:olive", None)

VERIFIERS: dict[str, Verifier] = {v.name: v for v in (BASE, HONEST, ADV, ORG, COPY)}
# The fine-tuned variants, in order: variant name -> transcript mode it is trained on.
VARIANTS: dict[str, str] = {v.name: v.mode for v in VERIFIERS.values() if v.mode is not None}
# What the audit may compare with V_base: the fine-tuned variants and the untrained copy (audit.targets).
AUDIT_TARGETS: tuple[str, ...] = (*VARIANTS, COPY.name)


def label(name: str) -> str:
    """Display label of a verifier; an unknown name is shown as is."""
    return VERIFIERS[name].label if name in VERIFIERS else name


def color(name: str) -> str | None:
    """Figure colour of a verifier; None (matplotlib's cycle) for an unknown name."""
    return VERIFIERS[name].color if name in VERIFIERS else None


def training_rows(model_dir: str | Path) -> int | None:
    """How many training rows the checkpoint in `model_dir` was fine-tuned on, from its fingerprint.json:
    0 for a prepared base model (whose fingerprint has no such field) and for an untrained variant; None
    (unknown) for a directory without a fingerprint, which this project's rules never score."""
    path = Path(model_dir) / "fingerprint.json"
    if not path.exists():
        return None
    return int(json.loads(path.read_text()).get("training_rows") or 0)


def untrained(name: str, rows: int | None) -> bool:
    """A fine-tuned variant that had no training row: the base model under a variant's name."""
    return name in VARIANTS and rows == 0
