"""The ER-Audit grid: verifier architectures x debate lengths x L_qh weights (the paper's ablations).

Each cell of the grid is named once here and the rules, tables and figures use these names:

- architecture: a base model's name under `models:` (`verifier.base_models`); a path segment and the
  `architecture` column of every ER-Audit output downstream of a verifier.
- length: `w<word_limit>` for generated debates (`debate.word_limit`, one value or a list), `release` for
  the release's imported transcripts (their length is the release's).
- checkpoint: `base`, or `<length>/<variant>` for a fine-tuned verifier, where the variant is `honest`,
  `adv` or `org_qh<weight>` (only V_org is trained with L_qh, so only V_org is swept over
  `verifier.loss_weights.qh`; V_honest and V_adv of a length serve every weight).
- setting: `<length>_qh<weight>`, one audit (V_base and the targets of that length and weight).

The grid need not be a full product (`Plan`): the first value of `debate.word_limit` and of
`verifier.loss_weights.qh` is the main setting and reaches every architecture and dataset; the further ones
(the ablations) reach only the cells `debate.length_sweep` and `verifier.qh_sweep` name (their keys unset:
every cell, the product). The release's length ablation is honest-only on QuALITY-H, its L_qh sweep trains
GPT-20B only (config/ablations.yaml). An audit runs where every audited target was trained.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import polars as pl

from .verifiers import VARIANTS, VERIFIERS

RELEASE_LENGTH = "release"
ORG = "org"
# Checkpoints with no length or variant in their path id: the verifiers never trained (V_base, its copy).
UNTRAINED = tuple(v.name for v in VERIFIERS.values() if not v.trained)

# Leading columns of the outputs of one grid cell; null where a file does not depend on the key (V_base
# depends on neither length nor weight, V_honest / V_adv not on the weight).
LABEL_SCHEMA = {
    "architecture": pl.Utf8,  # the base model's name under `models:`
    "length": pl.Utf8,  # w<word limit> or release
    "qh_weight": pl.Float64,  # L_qh weight of V_org
}


def as_list(value: Any) -> list:
    """A config value that may be one value or a list, as a list."""
    return list(value) if isinstance(value, list | tuple) else [value]


def weight_id(weight: float) -> str:
    """A weight as a path segment: 2.0 -> "2", 0.5 -> "0.5"."""
    return f"{float(weight):g}"


def base_models(verifier: Mapping[str, Any]) -> list[str]:
    """`verifier.base_models`, or `[verifier.base_model]` (the one-architecture shorthand wins when set)."""
    if verifier.get("base_model"):
        return [verifier["base_model"]]
    return list(dict.fromkeys(verifier.get("base_models") or []))


def uses_lora(verifier: Mapping[str, Any], architecture: str) -> bool:
    """Whether `architecture`'s verifiers train LoRA adapters: `verifier.lora.enabled` is true for all, false
    for none, or the list of the architectures that do (the others train all parameters)."""
    enabled = (verifier.get("lora") or {}).get("enabled", False)
    return architecture in enabled if isinstance(enabled, list) else bool(enabled)


def lora_settings(verifier: Mapping[str, Any], architecture: str) -> dict[str, Any]:
    """`architecture`'s LoRA settings with `enabled` resolved: `verifier.lora` for a LoRA architecture, only
    `{"enabled": False}` for a full-parameter one (so changing r or alpha retrains only the LoRA ones)."""
    if uses_lora(verifier, architecture):
        return dict(verifier["lora"], enabled=True)
    return {"enabled": False}


def own_training(verifier: Mapping[str, Any], checkpoint: Checkpoint) -> dict[str, Any]:
    """The settings `checkpoint` trains with in place of the shared ones: V_org's `verifier.org_training`
    (its keys left null keep the shared value), nothing for the other variants."""
    if checkpoint.qh_weight is None:
        return {}
    return {k: v for k, v in (verifier.get("org_training") or {}).items() if v is not None}


def per_architecture(value: Any, architecture: str, default: Any) -> Any:
    """A setting given for every architecture (a plain value) or per architecture (a mapping; the others
    get `default`)."""
    return value.get(architecture, default) if isinstance(value, Mapping) else value


def distributed_settings(verifier: Mapping[str, Any], architecture: str) -> dict[str, Any]:
    """`architecture`'s fine-tuning processes and CPU offload (`verifier.distributed`; each a value for all
    architectures or a mapping architecture -> value): FinetuneSettings.processes / cpu_offload."""
    distributed = verifier.get("distributed") or {}
    return {
        "processes": int(per_architecture(distributed.get("processes", 1), architecture, 1)),
        "cpu_offload": bool(per_architecture(distributed.get("cpu_offload", False), architecture, False)),
    }


def lengths(debate: Mapping[str, Any]) -> list[str]:
    transcripts = debate.get("transcripts") or {}
    if transcripts.get("source") == "release":
        return [RELEASE_LENGTH]
    return [f"w{int(w)}" for w in dict.fromkeys(as_list(debate["word_limit"]))]


def word_limit(length: str) -> int:
    if not re.fullmatch(r"w\d+", length):
        raise ValueError(f"length {length!r} names no word limit (expected w<words>)")
    return int(length[1:])


def qh_weights(verifier: Mapping[str, Any]) -> list[float]:
    return [float(w) for w in dict.fromkeys(as_list(verifier["loss_weights"]["qh"]))]


def variant_ids(weights: list[float]) -> list[str]:
    """Fine-tuned variants as path segments: honest, adv, org_qh<weight> per weight."""
    return [v for v in VARIANTS if v != ORG] + [f"{ORG}_qh{weight_id(w)}" for w in weights]


@dataclass(frozen=True)
class Checkpoint:
    verifier: str  # base / honest / adv / org (eraudit/common/verifiers.py)
    length: str | None = None  # None for base
    qh_weight: float | None = None  # V_org only

    @property
    def path_id(self) -> str:
        if self.verifier in UNTRAINED:
            return self.verifier
        return f"{self.length}/{self.variant_id}"

    @property
    def variant_id(self) -> str:
        return f"{ORG}_qh{weight_id(self.qh_weight)}" if self.verifier == ORG else self.verifier

    @classmethod
    def parse(cls, path_id: str) -> Checkpoint:
        if path_id in UNTRAINED:
            return cls(path_id)
        length, _, variant = path_id.partition("/")
        return cls.of(length, variant)

    @classmethod
    def of(cls, length: str, variant_id: str) -> Checkpoint:
        """The checkpoint of a fine-tuned variant id (honest, adv, org_qh2) at a length."""
        match = re.fullmatch(rf"{ORG}_qh([0-9.eE+-]+)", variant_id)
        if match:
            return cls(ORG, length, float(match.group(1)))
        if variant_id not in VARIANTS or variant_id == ORG:
            raise ValueError(f"checkpoint {length}/{variant_id}: unknown variant {variant_id!r}")
        return cls(variant_id, length)

    def labels(self, architecture: str) -> dict[str, Any]:
        return {"architecture": architecture, "length": self.length, "qh_weight": self.qh_weight}


@dataclass(frozen=True)
class Setting:
    """One audit: V_base against the targets fine-tuned at `length` (V_org with L_qh weight `qh_weight`)."""

    length: str
    qh_weight: float

    @property
    def path_id(self) -> str:
        return f"{self.length}_qh{weight_id(self.qh_weight)}"

    def checkpoints(self, targets: list[str]) -> list[Checkpoint]:
        """V_base first, then each target at this setting."""
        return [Checkpoint("base")] + [
            Checkpoint(t) if t in UNTRAINED else Checkpoint(t, self.length, self.qh_weight if t == ORG else None)
            for t in targets
        ]

    def labels(self, architecture: str) -> dict[str, Any]:
        return {"architecture": architecture, "length": self.length, "qh_weight": self.qh_weight}


@dataclass(frozen=True)
class Reach:
    """The cells a sweep's further values reach: each key lists what it reaches; None reaches all."""

    architectures: tuple[str, ...] | None = None
    datasets: tuple[str, ...] | None = None
    modes: tuple[str, ...] | None = None  # debate modes (honest / adversarial): the length sweep only

    @classmethod
    def from_config(cls, entry: Mapping[str, Any] | None) -> Reach:
        entry = entry or {}
        return cls(
            **{
                k: None if entry.get(k) is None else tuple(entry[k])
                for k in ("architectures", "datasets", "modes")
                if k in entry
            }
        )

    def reaches(self, architecture: str | None = None, dataset: str | None = None, mode: str | None = None) -> bool:
        """Whether the cell is reached; a key given as None is not looked at (debates have no architecture)."""
        return all(
            allowed is None or value is None or value in allowed
            for allowed, value in ((self.architectures, architecture), (self.datasets, dataset), (self.modes, mode))
        )


@dataclass(frozen=True)
class Plan:
    """Which cells of architectures x datasets x lengths x variants the run trains, evaluates and audits."""

    lengths: tuple[str, ...]  # the main length first
    weights: tuple[float, ...]  # V_org's main L_qh weight first
    length_reach: Reach = Reach()
    weight_reach: Reach = Reach()

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> Plan:
        debate, verifier = config["debate"], config["verifier"]
        return cls(
            tuple(lengths(debate)),
            tuple(qh_weights(verifier)),
            Reach.from_config(debate.get("length_sweep")),
            Reach.from_config(verifier.get("qh_sweep")),
        )

    def debate_modes(self, dataset: str, length: str) -> list[str]:
        """The transcript modes debated at `length` (honest / adversarial)."""
        modes = list(dict.fromkeys(VARIANTS.values()))
        if length == self.lengths[0]:
            return modes
        return [m for m in modes if self.length_reach.reaches(dataset=dataset, mode=m)]

    def variants(self, architecture: str, dataset: str, length: str) -> list[str]:
        """The fine-tuned variant ids of one architecture, dataset and length (org_qh<w> per reached weight)."""
        out = []
        for name, mode in VARIANTS.items():
            if length != self.lengths[0] and not self.length_reach.reaches(architecture, dataset, mode):
                continue
            if name != ORG:
                out.append(name)
                continue
            out += [
                f"{ORG}_qh{weight_id(w)}"
                for w in self.weights
                if w == self.weights[0] or self.weight_reach.reaches(architecture, dataset)
            ]
        return out

    def adjudication_modes(self, architecture: str, dataset: str, length: str) -> list[str]:
        """The transcript modes whose adjudications one architecture's variants at `length` train on."""
        used = {VARIANTS[Checkpoint.of(length, v).verifier] for v in self.variants(architecture, dataset, length)}
        return [m for m in dict.fromkeys(VARIANTS.values()) if m in used]

    def checkpoints(self, architecture: str, dataset: str) -> list[str]:
        """Path ids of every checkpoint of one architecture and dataset: base, then <length>/<variant>."""
        return ["base"] + [
            f"{length}/{v}" for length in self.lengths for v in self.variants(architecture, dataset, length)
        ]

    def settings(self, architecture: str, dataset: str, targets: list[str]) -> list[Setting]:
        """The audits of one architecture and dataset: every length x weight at which each target was trained
        (a further weight only when V_org is audited: without it the audit would repeat the main weight's)."""
        out = []
        weights = self.weights if ORG in targets else self.weights[:1]
        for length in self.lengths:
            trained = set(self.variants(architecture, dataset, length))
            for w in weights:
                setting = Setting(length, w)
                if all(
                    cp.variant_id in trained for cp in setting.checkpoints(targets)[1:] if cp.verifier not in UNTRAINED
                ):
                    out.append(setting)
        return out


def with_labels(frame: pl.DataFrame, labels: Mapping[str, Any] | None) -> pl.DataFrame:
    """`frame` with the grid's label columns first (null where `labels` leaves one out)."""
    labels = labels or {}
    unknown = set(labels) - set(LABEL_SCHEMA)
    if unknown:
        raise ValueError(f"unknown grid label(s) {sorted(unknown)}")
    columns = [pl.lit(labels.get(k), dtype=t).alias(k) for k, t in LABEL_SCHEMA.items()]
    return frame.drop([c for c in LABEL_SCHEMA if c in frame.columns]).select(*columns, pl.all())


def labelled(schema: Mapping[str, pl.DataType]) -> dict[str, pl.DataType]:
    """A schema with the grid's label columns first."""
    return {**LABEL_SCHEMA, **{k: v for k, v in schema.items() if k not in LABEL_SCHEMA}}


def unlabelled(schema: Mapping[str, pl.DataType]) -> dict[str, pl.DataType]:
    """A labelled schema without the grid's label columns (what a function fills in before with_labels)."""
    return {k: v for k, v in schema.items() if k not in LABEL_SCHEMA}


def panel(frame: pl.DataFrame, *keys: str) -> pl.Series:
    """A figure panel's title per row: dataset, then each grid label that takes more than one value in
    `frame` (a one-architecture, one-length run keeps the dataset alone)."""
    parts = [k for k in ("architecture", "length", "qh_weight") if k in frame.columns and frame[k].n_unique() > 1]
    exprs = [pl.col(k).cast(pl.Utf8).fill_null("-") for k in (*keys, *parts)]
    if "qh_weight" in parts:
        i = len(keys) + parts.index("qh_weight")
        exprs[i] = pl.concat_str(pl.lit("qh="), exprs[i])
    return frame.select(pl.concat_str(exprs, separator=" · ").alias("panel"))["panel"]
