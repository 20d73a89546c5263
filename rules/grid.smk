# What a run plans, as constants and wildcard values: the ER-Audit grid and its planned checkpoints and audit
# settings, the audits of models you bring, the wildcard constraints the rule files share, and the planned
# cells (one dict of wildcard values per job) the rule files expand their paths over. The cells are here,
# not in their stages' files, because rules of several stages read them (Table 3, the browser, the audits).
import re

from debate_audit.eraudit.common.brought import audit_datasets, brought_audits
from debate_audit.eraudit.common import grid

# The ER-Audit grid (eraudit/common/grid.py): verifier architectures x debate lengths x V_org's L_qh weights, the
# further lengths and weights reaching only the cells debate.length_sweep / verifier.qh_sweep name (PLAN).
ARCHITECTURES = grid.base_models(config["verifier"])
LENGTHS = grid.lengths(config["debate"])
QH_WEIGHTS = grid.qh_weights(config["verifier"])
VARIANT_IDS = grid.variant_ids(QH_WEIGHTS)
PLAN = grid.Plan.from_config(config)
ER_DATASETS = config["verifier"]["datasets"]
# The planned cells: (architecture, dataset) -> its checkpoints (base, then <length>/<variant>) and audits.
PLANNED_CHECKPOINTS = {
    (arch, dataset): PLAN.checkpoints(arch, dataset)
    for arch in ARCHITECTURES
    for dataset in ER_DATASETS
}
PLANNED_SETTINGS = {
    (arch, dataset): PLAN.settings(arch, dataset, config["audit"]["targets"])
    for arch in ARCHITECTURES
    for dataset in ER_DATASETS
}
AUDIT_SETTINGS_GRID = {
    s.path_id: s for settings in PLANNED_SETTINGS.values() for s in settings
}
# every checkpoint id of any cell (the wildcard's values)
CHECKPOINT_IDS = [*grid.UNTRAINED, *(f"{l}/{v}" for l in LENGTHS for v in VARIANT_IDS)]
# Best-of-K selection scores candidates with one model, so every architecture trains on the same transcripts
# (as the release's verifiers did).
DEBATE_SELECTOR = config["debate"].get("selector") or next(iter(ARCHITECTURES), None)
# Audits of models you bring (config `audited_models`, eraudit/common/brought.py; rules/audited_models.smk): a base
# and its targets, models this workflow did not train, on datasets of their own or the releases'.
BROUGHT = {a.name: a for a in brought_audits(config)}
# Every dataset with paraphrase pools: those the verifiers train on (ER_DATASETS), then those only brought audits use.
AUDIT_DATASETS = audit_datasets(config)


def one_of(values):
    """A wildcard constraint matching exactly one of `values` (model names hold dots); none: nothing."""
    return "|".join(re.escape(v) for v in values) or "(?!)"


wildcard_constraints:
    model=one_of(MODEL_SPECS),
    dataset=one_of(DATASETS + OWN_DATASETS),
    own=one_of(OWN_DATASETS),
    audit=one_of(BROUGHT),
    architecture=one_of(ARCHITECTURES),
    length=one_of(LENGTHS),
    variant=one_of(VARIANT_IDS),
    setting=one_of(AUDIT_SETTINGS_GRID),
    verifier=one_of(CHECKPOINT_IDS),


def adjudicator(architecture):
    """Who writes an architecture's L_lm targets (lm_target adjudication): the one teacher
    (verifier.adjudication.teacher) or its own V_base; their files sit under this name.
    """
    return config["verifier"]["adjudication"].get("teacher") or architecture


# ---------------------------------------------- the planned cells as wildcard values (one dict per job)
# debates per dataset x length x mode; adjudications per writer x dataset x length x mode; fine-tuned
# variants; evaluated checkpoints; audit scores (V_base and the targets of the planned audits); audits.
DEBATE_CELLS = [
    dict(dataset=d, length=l, debate_mode=m)
    for d in ER_DATASETS
    for l in LENGTHS
    for m in PLAN.debate_modes(d, l)
]
# GCG suffixes per dataset x length of the adversarial debates (debate.gcg)
GCG_CELLS = [
    dict(dataset=c["dataset"], length=c["length"])
    for c in DEBATE_CELLS
    if c["debate_mode"] == "adversarial"
]
# adjudications sit under their writer (adjudicator), once per writer however many architectures it serves
ADJUDICATION_CELLS = [
    dict(adjudicator=w, dataset=d, length=l, debate_mode=m)
    for (w, d, l, m) in dict.fromkeys(
        (adjudicator(a), d, l, m)
        for a in ARCHITECTURES
        for d in ER_DATASETS
        for l in LENGTHS
        for m in PLAN.adjudication_modes(a, d, l)
    )
]
FINETUNE_CELLS = [
    dict(architecture=a, dataset=d, length=l, variant=v)
    for a in ARCHITECTURES
    for d in ER_DATASETS
    for l in LENGTHS
    for v in PLAN.variants(a, d, l)
]
CHECKPOINT_CELLS = [
    dict(architecture=a, dataset=d, verifier=cp)
    for (a, d), cps in PLANNED_CHECKPOINTS.items()
    for cp in cps
]
AUDIT_SCORE_CELLS = [
    dict(architecture=a, dataset=d, verifier=cp)
    for (a, d), settings in PLANNED_SETTINGS.items()
    for cp in dict.fromkeys(
        c.path_id for s in settings for c in s.checkpoints(config["audit"]["targets"])
    )
]
AUDIT_SETTING_CELLS = [
    dict(architecture=a, dataset=d, setting=s.path_id)
    for (a, d), settings in PLANNED_SETTINGS.items()
    for s in settings
]


# audits of models you bring: the score files (each model of an audit on each of its datasets) and the audits
BROUGHT_SCORE_CELLS = [
    dict(audit=a.name, dataset=d, model=m)
    for a in BROUGHT.values()
    for d in a.datasets
    for m in a.models
]
BROUGHT_CELLS = [
    dict(audit=a.name, dataset=d) for a in BROUGHT.values() for d in a.datasets
]


def cell_paths(pattern, cells):
    """`pattern` filled in with each cell's wildcard values."""
    return [expand(pattern, **c)[0] for c in cells]
