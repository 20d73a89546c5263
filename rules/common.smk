from pathlib import Path

import re

from debate_audit.config_check import check_output_paths, dataset_source, used_models
from debate_audit.eraudit import grid
from debate_audit.models.loading import ModelRef
from debate_audit.models.spec import ModelSpec
from debate_audit.provenance import code_fingerprint

# Each rules/*.smk appends the final outputs of its stage; rule all asks for them.
ALL_TARGETS = []

# Only the models some experiment uses (an overlay's merge may keep others under `models:`).
MODEL_SPECS = {
    name: ModelSpec.from_config(name, config["models"][name])
    for name in used_models(config)
}

DATASETS = ["truthfulqa", "quality_h", "gpqa_h"]

# The ER-Audit grid (eraudit/grid.py): verifier architectures x debate lengths x V_org's L_qh weights.
ARCHITECTURES = grid.base_models(config["verifier"])
LENGTHS = grid.lengths(config["debate"])
QH_WEIGHTS = grid.qh_weights(config["verifier"])
VARIANT_IDS = grid.variant_ids(QH_WEIGHTS)
AUDIT_SETTINGS_GRID = {s.path_id: s for s in grid.settings(LENGTHS, QH_WEIGHTS)}
# base, then <length>/<variant> of every fine-tuned verifier
CHECKPOINT_IDS = ["base", *(f"{l}/{v}" for l in LENGTHS for v in VARIANT_IDS)]
# Best-of-K selection scores candidates with one model, so every architecture trains on the same transcripts
# (as the release's verifiers did).
DEBATE_SELECTOR = config["debate"].get("selector") or ARCHITECTURES[0]


def one_of(values):
    """A wildcard constraint matching exactly one of `values` (model names hold dots)."""
    return "|".join(re.escape(v) for v in values)


wildcard_constraints:
    model=one_of(MODEL_SPECS),
    dataset=one_of(DATASETS),
    architecture=one_of(ARCHITECTURES),
    length=one_of(LENGTHS),
    variant=one_of(VARIANT_IDS),
    setting=one_of(AUDIT_SETTINGS_GRID),
    verifier=one_of(CHECKPOINT_IDS),


def model_spec(name):
    if name not in MODEL_SPECS:
        raise ValueError(
            f"model {name!r} is not used by any experiment (or not defined under 'models:')"
        )
    return MODEL_SPECS[name]


def model_dir(name):
    return f"resources/models/{name}"


def model_fingerprint(name):
    return f"resources/models/{name}/fingerprint.json"


def model_ref(name, directory=None):
    """The one param a model-bound job's script gets for model `name` (ModelRef.to_params): the prepared
    directory, or `directory` (a fine-tuned verifier of base model `name`), and the spec's inference fields.
    """
    return ModelRef.from_spec(
        model_spec(name), directory or model_dir(name)
    ).to_params()


def local_input(dataset, key):
    """A dataset location as a rule input when it is a local file; URLs are fetched by the loader."""
    location = config["datasets"][dataset].get(key)
    return [] if location is None or "://" in location else [location]


def source_location(input_value, dataset, key):
    """What the loader reads: the local input file, else the configured URL (or None)."""
    return str(input_value) if input_value else config["datasets"][dataset].get(key)


# Table 3 (audit_runtime): the benchmark records of this run's model-bound jobs as inputs, so no stale
# record of another configuration under benchmarks/rules/ gets in. prepare_model is left out: a model
# prepared by an earlier run, or linked in, has no record here and must not be prepared again for a table.
def runtime_benchmarks(wildcards):
    # Called when the DAG is built, after every rules/*.smk has defined its rules and lists.
    datasets = config["verifier"]["datasets"]
    cells = [
        *(
            [
                (
                    rules.debate_generate,
                    dict(dataset=datasets, length=LENGTHS, debate_mode=DEBATE_MODES),
                ),
                (
                    rules.debate_select,
                    dict(dataset=datasets, length=LENGTHS, debate_mode=DEBATE_MODES),
                ),
            ]
            if DEBATE_TRANSCRIPTS["source"] == "generate"
            else []
        ),
        *(
            [
                (
                    rules.verifier_adjudicate,
                    dict(
                        architecture=ARCHITECTURES,
                        dataset=datasets,
                        length=LENGTHS,
                        debate_mode=DEBATE_MODES,
                    ),
                )
            ]
            if LM_TARGET == "adjudication"
            else []
        ),
        (
            rules.verifier_finetune,
            dict(
                architecture=ARCHITECTURES,
                dataset=datasets,
                length=LENGTHS,
                variant=VARIANT_IDS,
            ),
        ),
        (
            rules.verifier_evaluate,
            dict(architecture=ARCHITECTURES, dataset=datasets, verifier=CHECKPOINT_IDS),
        ),
        (rules.paraphrase_search, dict(dataset=AUDIT_DATASETS)),
        (
            rules.paraphrase_test,
            dict(dataset=AUDIT_DATASETS, generator=PARAPHRASE_TEST_GENERATORS),
        ),
        (
            rules.audit_scores,
            dict(
                architecture=ARCHITECTURES,
                dataset=AUDIT_DATASETS,
                verifier=AUDIT_CHECKPOINTS,
            ),
        ),
    ]
    return cwpor_benchmarks() + [
        path for rule, wcs in cells for path in expand(rule.benchmark, **wcs)
    ]


def check_outputs(workflow):
    """Fail naming any existing output path that is a directory, a dangling link or unreadable."""
    patterns, roots = [], []
    for step in workflow.rules:
        for f in [
            *step.output,
            *([step.benchmark] if step.benchmark else []),
        ]:
            patterns.append((f.regex(), f.is_directory))
            roots.append(Path(f.constant_prefix() or ".").parts[0])
    check_output_paths(patterns, roots)


def tokenizer_input(wc):
    """A `source: random` model borrows the tokenizer of another prepared model."""
    spec = model_spec(wc.model)
    return [model_fingerprint(spec.tokenizer)] if spec.source == "random" else []


def release_transcripts(dataset, mode):
    """The configured release files (paths or URLs) of one dataset and debate mode."""
    return list(DEBATE_TRANSCRIPTS["release"][dataset][mode])


def release_transcript_inputs(dataset, mode):
    return [p for p in release_transcripts(dataset, mode) if "://" not in p]


# ---------------------------------------------- memory of model-bound jobs (issue 15)
# A model-bound job holds its models' weights in host memory (loading, or running on the CPU), so its
# mem_mb is: JOB_BASE_MB + headroom x (parameters x bytes per parameter of the spec's dtype), summed over
# the distinct models it loads. Parameters are counted exactly from the prepared model's safetensors
# headers; before the model is prepared (a dry run) they are read from the size in the model's id or name
# ("...-14B-...", "...-135m"), else UNKNOWN_MODEL_PARAMS. Snakemake evaluates resources again when a job
# is about to start, so every submitted job gets the exact figure. Fine-tuned verifiers have their base
# model's parameters. Measured (benchmarks/rules, SmolLM2-135M in float32, 0.54 GB of weights): inference
# peaks at 1.1-1.2 GB, fine-tuning at 3.0 GB; the formula gives 2.8 GB and 4.2 GB.
import math

from debate_audit.models.size import bytes_per_param, params_b

JOB_BASE_MB = 2000  # interpreter, torch, tokenizer, data, activations
INFERENCE_HEADROOM = 1.5
TRAINING_HEADROOM = 4.0  # weights, gradients and two AdamW moments in the same dtype
UNKNOWN_MODEL_PARAMS = 8e9


def model_params(name):
    """Parameters of model `name`: exact once prepared, else the size its id or name states."""
    size = params_b(model_spec(name), model_dir(name))
    return UNKNOWN_MODEL_PARAMS if size is None else size * 1e9


def model_mem_mb(*names, training=False):
    """mem_mb of a job loading the models `names` (repeats count once); served models hold no weights."""
    weights_mb = 0.0
    for name in dict.fromkeys(names):
        spec = model_spec(name)
        if spec.source != "openai":
            # "auto" counts as on the CPU (float32), the larger of its two dtypes
            weights_mb += model_params(name) * bytes_per_param(spec, gpu=False) / 1e6
    headroom = TRAINING_HEADROOM if training else INFERENCE_HEADROOM
    return JOB_BASE_MB + math.ceil(headroom * weights_mb)


def finetune_mem_mb(wc):
    """mem_mb of one verifier_finetune job: full-parameter training holds gradients and two AdamW
    moments beside the weights; LoRA only the frozen weights and a few MB of adapters (on a GPU the
    host merely loads them): what inference asks (GPT-20B in bf16: ~65, not ~169 GB)."""
    lora = grid.uses_lora(config["verifier"], wc.architecture)
    return model_mem_mb(wc.architecture, training=not lora)


def library_code(script):
    """Hash of the library modules `workflow/scripts/<script>.py` reaches: an edited prompt or function
    body reruns exactly the rules whose output can change (their descendants follow)."""
    return code_fingerprint(
        Path(workflow.basedir) / "workflow" / "scripts" / f"{script}.py"
    )


# ---------------------------------------------- ER-Audit verifiers (rules/verifier.smk)
def checkpoint_fingerprint(wc):
    """The fingerprint of checkpoint `wc.verifier` of an architecture: its prepared V_base, or a fine-tuned
    verifier (`<length>/<variant>`, written by verifier_finetune)."""
    if wc.verifier == "base":
        return model_fingerprint(wc.architecture)
    return f"resources/verifiers/{wc.architecture}/{wc.dataset}/{wc.verifier}/fingerprint.json"


def finetune_mode(wc):
    """The debate mode (honest / adversarial) of the transcripts a fine-tuned variant trains on."""
    return VERIFIER_VARIANTS[grid.Checkpoint.of(wc.length, wc.variant).verifier]


def finetune_transcripts(wc):
    """The selected transcripts a fine-tuned variant trains on (honest or adversarial, at its length)."""
    return f"{DEBATE_OUT}/{wc.dataset}/{wc.length}/debates_{finetune_mode(wc)}.parquet"


def finetune_adjudications(wc):
    """The L_lm targets of a variant (lm_target adjudication): its architecture's adjudications of the
    transcripts it trains on; [] for lm_target argument."""
    if LM_TARGET != "adjudication":
        return []
    return f"{VERIFIER_OUT}/{wc.architecture}/{wc.dataset}/{wc.length}/adjudications_{finetune_mode(wc)}.parquet"


def finetune_settings(wc):
    """The FinetuneSettings of one checkpoint: only V_org carries its L_qh weight, so sweeping the weight
    retrains V_org alone."""
    cp = grid.Checkpoint.of(wc.length, wc.variant)
    weights = dict(config["verifier"]["loss_weights"], qh=cp.qh_weight or 0.0)
    return {key: config["verifier"][key] for key in FINETUNE_KEYS} | {
        "loss_weights": weights,
        "lora": grid.lora_settings(config["verifier"], wc.architecture),
    }


# ---------------------------------------------- ER-Audit audit (rules/audit.smk)
def audit_setting_scores(wc):
    """The score files of one audit: V_base, then each target at the setting's length and L_qh weight."""
    setting = AUDIT_SETTINGS_GRID[wc.setting]
    return [
        f"{AUDIT_OUT}/{wc.architecture}/{wc.dataset}/{cp.path_id}/scores.parquet"
        for cp in setting.checkpoints(AUDIT["targets"])
    ]


def browse_section(dataset, architecture, setting):
    """A browser section's name: the dataset, with the grid cell when the run has more than one."""
    cells = len(ARCHITECTURES) * len(AUDIT_SETTINGS_GRID)
    return dataset if cells == 1 else f"{dataset} · {architecture} · {setting}"


# ---------------------------------------------- CW-POR (rules/cwpor.smk)
def cwpor_judgments(primary_only):
    """Judgment files of every (model, judge, word limit); primary_only: the primary judge's, which make
    the paper's outputs (metrics, breakdowns, figures, summary)."""
    return [
        f"{CWPOR_OUT}/{m}/judge-{judge}/judgments_v{v}.parquet"
        for m, judges in CWPOR_JUDGES.items()
        for judge in (judges[:1] if primary_only else judges)
        for v in CWPOR["verbosity"]
    ]


def cwpor_benchmarks():
    """Benchmark records of this configuration's CW-POR model jobs (Table 3: runtime_benchmarks), with the
    length control's single-turn debates at v // 2 words and every judge of every model.
    """
    words = {
        rebuttal_protocol(p).turn_words(v)
        for p in REBUTTAL_PROTOCOLS
        for v in CWPOR["verbosity"]
    }
    cells = [
        (m, j, v)
        for m, js in CWPOR_JUDGES.items()
        for j in js
        for v in CWPOR["verbosity"]
    ]
    pairs = dict(zip(("model", "judge", "verbosity"), map(list, zip(*cells))))
    return [
        *expand(
            rules.cwpor_debate.benchmark,
            model=CWPOR["models"],
            verbosity=sorted(words | set(CWPOR["verbosity"])),
        ),
        *expand(rules.cwpor_judge.benchmark, zip, **pairs),
        *expand(rules.cwpor_rebuttal.benchmark, **REBUTTAL_CELLS),
        *[
            path
            for p in REBUTTAL_PROTOCOLS
            for path in expand(
                rules.cwpor_judge_rebuttal.benchmark, zip, protocol=p, **pairs
            )
        ],
    ]


def round1_responses(wc):
    """The single-turn responses a protocol's round 1 is (length control: at v // 2 words)."""
    words = rebuttal_protocol(wc.protocol).turn_words(int(wc.verbosity))
    return f"{CWPOR_OUT}/{wc.model}/responses_v{words}.parquet"
