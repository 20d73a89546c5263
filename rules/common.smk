import functools
import re
from pathlib import Path

from snakemake.logging import logger

from debate_audit.eraudit.audit.brought import (
    audit_datasets,
    brought_audits,
    own_datasets,
)
from debate_audit.eraudit.common import grid
from debate_audit.models.loading import ModelRef
from debate_audit.models.memory import finetune_host_mb, host_mem_mb
from debate_audit.models.pins import unpinned_warnings
from debate_audit.models.prepare import PREPARE_MEM_MB
from debate_audit.models.spec import ModelSpec
from debate_audit.runtime.provenance import code_fingerprint
from debate_audit.runtime.runs import run_root
from debate_audit.runtime.cluster import ClusterSettings
from debate_audit.runtime.sizing import JobTimes, job_cpus, job_minutes, model_job_cpus
from debate_audit.tools.config_check import (
    check_output_paths,
    dataset_source,
    location_source,
    stale_local_warnings,
    used_models,
)

# Where this run's files go. A named run (config `run`) keeps everything that depends on its configuration
# under runs/<run>/; unnamed, these are results/, logs/, ... as they always were (src/debate_audit/runtime/runs.py).
# The rules' paths all start with one of them, but for what every run shares: the prepared models
# (model_dir: resources/models/, with prepare_model's log and benchmark) and the call cache (config `cache`).
RUN_ROOT = run_root(config["run"])
RESULTS = f"{RUN_ROOT}results"
LOGS = f"{RUN_ROOT}logs"
BENCHMARKS = f"{RUN_ROOT}benchmarks/rules"
DATA = f"{RUN_ROOT}data"  # prepared datasets: what they hold follows `datasets:`
VERIFIERS = f"{RUN_ROOT}resources/verifiers"  # fine-tuned verifiers (and V_base's copy)

# Each rules/*.smk appends the final outputs of its stage; rule all asks for them.
ALL_TARGETS = []

# Only the models some experiment uses (an overlay's merge may keep others under `models:`).
MODEL_SPECS = {
    name: ModelSpec.from_config(name, config["models"][name])
    for name in used_models(config)
}
# A hub model at a branch or tag can download other weights in a later run (models/pins.py pins them).
if unpinned_warnings(MODEL_SPECS.values()):
    logger.warning("\n".join(unpinned_warnings(MODEL_SPECS.values())))

DATASETS = ["truthfulqa", "quality_h", "gpqa_h"]
# Your own datasets (config `datasets.own`: a pairs file each, data/own_pairs.py), audited with models you bring.
OWN_DATASETS = own_datasets(config)

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
# Audits of models you bring (config `audited_models`, eraudit/audit/brought.py; rules/audited_models.smk): a base
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


# A local model directory written again after it was prepared (a model you bring, retrained in place).
STALE_LOCAL = stale_local_warnings(MODEL_SPECS.values(), lambda n: Path(model_dir(n)))
if STALE_LOCAL:
    logger.warning("\n".join(STALE_LOCAL))


# A model spec's settings are of two kinds (models/spec.py). Those that define its numbers (NUMBER_KEYS)
# are, through model_numbers, a tracked param of every model-bound job, so a change reruns what used the
# model; those of them that define its files (FILE_KEYS) are prepare_model's params too. How it runs (RUN_KEYS: device, batch size, backend,
# server, engine settings, concurrency) reaches a script inside its ModelRef, passed through a params
# function that takes `resources`: Snakemake counts such params as derived from the job's resources and
# leaves them out of its params rerun trigger, so changing a run setting reruns nothing.
def model_ref(name, directory=None):
    """The one param a model-bound job's script gets for model `name` (ModelRef.to_params): the prepared
    directory, or `directory` (a fine-tuned verifier of base model `name`), and the spec's inference fields.
    Pass it through `lambda wc, resources: model_ref(...)` (untracked, see above)."""
    return ModelRef.from_spec(
        model_spec(name), directory or model_dir(name)
    ).to_params()


def model_numbers(*names):
    """The settings that define the numbers of the models `names` (spec.NUMBER_KEYS), a tracked param."""
    return {name: model_spec(name).number_settings() for name in dict.fromkeys(names)}


def sampling_engine(name):
    """Who samples for model `name`: a tracked param of the rules that sample (paraphrase pools, best-of-K
    debates), since another engine draws from other random streams. Greedy rules leave it out.
    """
    spec = model_spec(name)
    return "api" if spec.source == "openai" else spec.generation_backend


# The ER-Audit chain (debates -> selection -> adjudication -> fine-tuning) is a run's longest path: its jobs
# go first, and CW-POR and the paraphrase pools fill the cores around them (scheduling only: no output changes).
ER_CHAIN_PRIORITY = 10


def generation_gpu(*names):
    """gpu of a job that only generates with the models `names`: the most GPUs one of them needs (a vLLM
    engine the job starts: its tensor_parallel_size; in-process: 1), none when every one of them is served
    by a server the job does not start (generation_backend server, source openai)."""
    local = [
        model_spec(n)
        for n in names
        if model_spec(n).source != "openai"
        and model_spec(n).generation_backend != "server"
    ]
    return max(
        (
            s.vllm.tensor_parallel_size if s.generation_backend == "vllm" else 1
            for s in local
        ),
        default=0,
    )


def model_gpu(*names):
    """gpu of a job that scores with the models `names` and may generate with them: one GPU where one
    of them scores in-process, none where each is an endpoint or scored by its server"""
    in_process = any(
        model_spec(n).source != "openai" and model_spec(n).scoring_backend == "local"
        for n in names
    )
    return max(int(in_process), generation_gpu(*names))


def local_input(dataset, key):
    """A dataset location as a rule input when it is a local file; URLs are fetched by the loader."""
    location = config["datasets"][dataset].get(key)
    return [] if location is None or "://" in location else [location]


def own_location(name):
    """The pairs file of your own dataset `name` (datasets.own): a path or URL."""
    return config["datasets"]["own"][name]["pairs"]


def own_input(name):
    """As local_input, for your own dataset's pairs file."""
    location = own_location(name)
    return [] if "://" in location else [location]


def source_location(input_value, dataset, key):
    """What the loader reads: the local input file, else the configured URL (or None)."""
    return str(input_value) if input_value else config["datasets"][dataset].get(key)


# Table 3 (audit_runtime): the benchmark records of this run's model-bound jobs as inputs, so no stale
# record of another configuration under benchmarks/rules/ gets in. prepare_model is left out: a model
# prepared by an earlier run, or linked in, has no record here and must not be prepared again for a table.
def runtime_benchmarks(wildcards):
    # Called when the DAG is built, after every rules/*.smk has defined its rules and lists.
    generated = DEBATE_TRANSCRIPTS["source"] == "generate"
    cells = [
        *([(rules.debate_generate, c) for c in DEBATE_CELLS] if generated else []),
        *([(rules.debate_select, c) for c in DEBATE_CELLS] if generated else []),
        *(
            [(rules.debate_gcg, c) for c in GCG_CELLS]
            if generated and DEBATE_GCG["enabled"]
            else []
        ),
        *(
            [(rules.verifier_adjudicate, c) for c in ADJUDICATION_CELLS]
            if LM_TARGET == "adjudication"
            else []
        ),
        *[(rules.verifier_finetune, c) for c in FINETUNE_CELLS],
        *[(rules.verifier_evaluate, c) for c in CHECKPOINT_CELLS],
        (rules.paraphrase_search, dict(dataset=AUDIT_DATASETS)),
        (
            rules.paraphrase_test,
            dict(dataset=AUDIT_DATASETS, generator=PARAPHRASE_TEST_GENERATORS),
        ),
        *[(rules.audit_scores, c) for c in AUDIT_SCORE_CELLS],
        *[(rules.audit_model_scores, c) for c in BROUGHT_SCORE_CELLS],
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


def selection_candidates(wc):
    """debate_select's pool: the generated candidates, or for adversarial selection with debate.gcg on the
    pool debate_gcg writes (the suffixed candidates, with or instead of the natives: debate.gcg.pool).
    """
    if wc.debate_mode == "adversarial" and DEBATE_GCG["enabled"]:
        return (
            f"{DEBATE_OUT}/{wc.dataset}/{wc.length}/candidates_adversarial_gcg.parquet"
        )
    return f"{DEBATE_OUT}/{wc.dataset}/{wc.length}/candidates_{wc.debate_mode}.parquet"


def honest_candidates(wc):
    """debate_select's input: the honest candidates an adversarial selection checks its own against
    (debate.drop_honest_copies), where that length debates honest transcripts too."""
    if (
        wc.debate_mode != "adversarial"
        or not config["debate"]["drop_honest_copies"]
        or "honest" not in PLAN.debate_modes(wc.dataset, wc.length)
    ):
        return []
    return f"{DEBATE_OUT}/{wc.dataset}/{wc.length}/candidates_honest.parquet"


# ---------------------------------------------- cores and time limits of model-bound jobs (runtime/sizing.py)
# What a scheduler is asked for besides GPUs and memory (config `cluster`): `cpus_per_task`, which the SLURM
# plugin sends as --cpus-per-task and the local scheduler ignores (the rules' `threads` stay 1: one core, one
# OMP thread per model job on a CPU), and `runtime`, make plan's estimate of the job x margin x attempt.
CLUSTER = ClusterSettings.from_config(config)


@functools.cache
def job_times():
    """make plan's per-job estimates for this configuration (built on first use, when the DAG is)."""
    return JobTimes.from_config(config, {name: model_dir(name) for name in MODEL_SPECS})


def job_runtime(rule):
    """runtime (minutes) of a job of `rule`: its estimate x cluster.runtime.margin, at least min_minutes, x
    Snakemake's attempt (a job killed at its limit is retried with twice the time)."""
    return lambda wc, attempt: job_minutes(
        CLUSTER, job_times().hours(rule, dict(wc.items())), attempt
    )


def model_cpus(*names, scores=True, generates=True):
    """cpus_per_task of a job using the models `names`: 3 + N where it generates through a vLLM engine over N
    GPUs, cluster.cpus.per_gpu where it computes in-process (it scores, or a model generates in-process).
    """
    specs = [model_spec(n) for n in dict.fromkeys(names)]
    return model_job_cpus(CLUSTER, specs, scores=scores, generates=generates)


def finetune_cpus(wc):
    """cpus_per_task of one verifier_finetune job: cluster.cpus.per_gpu for each of its processes
    (offload_per_gpu where the optimizer steps on the host)."""
    shards = grid.distributed_settings(config["verifier"], wc.architecture)
    return job_cpus(
        CLUSTER, compute_gpus=shards["processes"], offload=shards["cpu_offload"]
    )


# ---------------------------------------------- memory of model-bound jobs (models/memory.py)
def model_mem_mb(*names, training=False, scores=True):
    """mem_mb of a job using the models `names` (repeats count once): memory.host_mem_mb of their specs and
    prepared directories. Snakemake evaluates resources again when a job is about to start, so a submitted
    job gets the figure of its prepared models."""
    return host_mem_mb(
        [(model_spec(n), model_dir(n)) for n in dict.fromkeys(names)],
        training=training,
        scores=scores,
    )


def finetune_mem_mb(wc):
    """mem_mb of one verifier_finetune job: memory.finetune_host_mb, from what its processes hold (on a GPU
    the fp32 model each loads before sharding it, the offloaded shards and optimizer, the gathered weights it
    saves; LoRA only the bf16 base)."""
    return finetune_host_mb(
        model_spec(wc.architecture),
        model_dir(wc.architecture),
        lora=grid.uses_lora(config["verifier"], wc.architecture),
        **grid.distributed_settings(config["verifier"], wc.architecture),
    )


def library_code(script):
    """Hash of the library modules `workflow/scripts/<script>.py` reaches: an edited prompt or function
    body reruns exactly the rules whose output can change (their descendants follow)."""
    return code_fingerprint(
        Path(workflow.basedir) / "workflow" / "scripts" / f"{script}.py"
    )


# ---------------------------------------------- ER-Audit verifiers (rules/verifier.smk)
def checkpoint_fingerprint(wc):
    """The fingerprint of checkpoint `wc.verifier` of an architecture: its prepared V_base, V_base's copy (the
    audit's null, verifier_copy), or a fine-tuned verifier (`<length>/<variant>`, written by verifier_finetune).
    """
    if wc.verifier == "base":
        return model_fingerprint(wc.architecture)
    if wc.verifier == "copy":
        return f"{VERIFIERS}/{wc.architecture}/copy/fingerprint.json"
    return f"{VERIFIERS}/{wc.architecture}/{wc.dataset}/{wc.verifier}/fingerprint.json"


def finetune_mode(wc):
    """The debate mode (honest / adversarial) of the transcripts a fine-tuned variant trains on."""
    return VERIFIER_VARIANTS[grid.Checkpoint.of(wc.length, wc.variant).verifier]


def finetune_transcripts(wc):
    """The selected transcripts a fine-tuned variant trains on (honest or adversarial, at its length)."""
    return f"{DEBATE_OUT}/{wc.dataset}/{wc.length}/debates_{finetune_mode(wc)}.parquet"


def adjudicator(architecture):
    """Who writes an architecture's L_lm targets (lm_target adjudication): the one teacher
    (verifier.adjudication.teacher) or its own V_base; their files sit under this name.
    """
    return config["verifier"]["adjudication"].get("teacher") or architecture


def finetune_adjudications(wc):
    """The L_lm targets of a variant (lm_target adjudication): the adjudications of the transcripts it trains
    on, by its architecture's adjudicator; [] for lm_target argument."""
    if LM_TARGET != "adjudication":
        return []
    return f"{VERIFIER_OUT}/{adjudicator(wc.architecture)}/{wc.dataset}/{wc.length}/adjudications_{finetune_mode(wc)}.parquet"


def finetune_settings(wc):
    """The FinetuneSettings of one checkpoint that define its weights (a tracked param): only V_org carries its
    L_qh weight and its own epochs and learning rate (verifier.org_training), so changing them retrains V_org
    alone. How many processes share the work and where the optimizer state lives (verifier.distributed) are
    `finetune_distributed`'s."""
    cp = grid.Checkpoint.of(wc.length, wc.variant)
    weights = dict(config["verifier"]["loss_weights"], qh=cp.qh_weight or 0.0)
    return (
        {key: config["verifier"][key] for key in FINETUNE_KEYS}
        | grid.own_training(config["verifier"], cp)
        | {
            "loss_weights": weights,
            "lora": grid.lora_settings(config["verifier"], wc.architecture),
        }
    )


def finetune_distributed(wc, resources):
    """The rest of one checkpoint's FinetuneSettings: processes (GPUs) and CPU offload (verifier.distributed).
    Speed and memory settings, like a model's batch size: N processes train the one-process curve and
    weights up to the order of float additions (eraudit/verifier/distributed.py), so they reach the script
    untracked (a params function taking `resources`, as model_ref) and changing the GPU count reruns nothing.
    """
    return grid.distributed_settings(config["verifier"], wc.architecture)


def finetune_processes(wc):
    """Processes (GPUs; on a CPU, cores) of one verifier_finetune job."""
    return grid.distributed_settings(config["verifier"], wc.architecture)["processes"]


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


def brought_scores(wc):
    """The score files of one audit of models you bring: its base, then each target."""
    return [
        f"{AUDIT_OUT}/models/{wc.audit}/{wc.dataset}/{m}/scores.parquet"
        for m in BROUGHT[wc.audit].models
    ]


def pool_split(wc):
    """The part-1 split a dataset's pools select their pairs by (paraphrase.splits), where the workflow
    debates it; a dataset only models you bring are audited on has none: every pair (up to max_pairs).
    """
    if wc.dataset not in ER_DATASETS:
        return []
    return f"{DEBATE_OUT}/{wc.dataset}/split.parquet"


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
    # a job gathering a model's word limits (cwpor.job_split) has one record: its pattern has no {verbosity}
    return list(
        dict.fromkeys(
            [
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
        )
    )


def debate_budgets(wc):
    """max_new_tokens of a cwpor_debate job: its word limit's, or, gathered per model, each word limit's."""

    def budget(words):
        return max_new_tokens_for(
            words, CWPOR["tokens_per_word"], CWPOR["extra_tokens"]
        )

    if CWPOR_PER_MODEL:
        return {v: budget(v) for v in CWPOR_DEBATE_WORDS}
    return budget(int(wc.verbosity))


def round1_responses(wc):
    """The single-turn responses a protocol's round 1 is (length control: at v // 2 words)."""
    words = rebuttal_protocol(wc.protocol).turn_words(int(wc.verbosity))
    return f"{CWPOR_OUT}/{wc.model}/responses_v{words}.parquet"
