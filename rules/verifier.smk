# ER-Audit part 1: fine-tune V_honest / V_adv / V_org per architecture and length (V_org per L_qh weight),
# forced-choice evaluation of every checkpoint, Table 1. Outputs under results/er_audit/verifier/.


# variant -> transcript mode, from the one list of verifier variants
from debate_audit.eraudit.common.verifiers import VARIANTS as VERIFIER_VARIANTS

# FinetuneSettings fields, passed as params so a changed setting retrains (loss_weights and lora: per
# checkpoint, finetune_settings in rules/stage_inputs.smk).
FINETUNE_KEYS = ["epochs", "max_steps", "learning_rate", "batch_size", "grad_accum"]
FINETUNE_KEYS += ["max_length", "max_target_tokens", "seed", "lm_target"]
FINETUNE_KEYS += ["gradient_checkpointing", "warmup_steps", "lr_schedule", "qh_readout"]
LM_TARGET = config["verifier"]["lm_target"]
ADJUDICATION = config["verifier"]["adjudication"]
# Who writes the L_lm targets (lm_target adjudication): one teacher for every architecture, or each V_base.
ADJUDICATORS = list(dict.fromkeys(adjudicator(a) for a in ARCHITECTURES))


wildcard_constraints:
    adjudicator=one_of(ADJUDICATORS),


VERIFIER_OUT = f"{RESULTS}/er_audit/verifier"


# The L_lm targets of lm_target adjudication: the teacher (verifier.adjudication.teacher), or each
# architecture's V_base, adjudicates every training transcript; the files sit under the adjudicator's name.
rule verifier_adjudicate:
    input:
        selected=f"{DEBATE_OUT}/{{dataset}}/{{length}}/debates_{{debate_mode}}.parquet",
        pairs=f"{DATA}/{{dataset}}.parquet",
        split=f"{DEBATE_OUT}/{{dataset}}/split.parquet",
        base=lambda wc: model_fingerprint(wc.adjudicator),
    output:
        adjudications=f"{VERIFIER_OUT}/{{adjudicator}}/{{dataset}}/{{length}}/adjudications_{{debate_mode}}.parquet",
        rejected=f"{VERIFIER_OUT}/{{adjudicator}}/{{dataset}}/{{length}}/adjudications_{{debate_mode}}.rejected.parquet",
    log:
        f"{LOGS}/verifier/adjudicate_{{adjudicator}}_{{dataset}}_{{length}}_{{debate_mode}}.log",
    benchmark:
        f"{BENCHMARKS}/verifier/adjudicate_{{adjudicator}}_{{dataset}}_{{length}}_{{debate_mode}}.tsv"
    priority: ER_CHAIN_PRIORITY
    resources:
        gpu=lambda wc: generation_gpu(wc.adjudicator),
        mem_mb=lambda wc: model_mem_mb(wc.adjudicator, scores=False),
        runtime=job_runtime("verifier_adjudicate"),
        cpus_per_task=lambda wc: model_cpus(wc.adjudicator, scores=False),
    params:
        model=lambda wc, resources: model_ref(wc.adjudicator),
        numbers=lambda wc: model_numbers(wc.adjudicator),
        settings={key: ADJUDICATION[key] for key in ("max_new_tokens", "protocol")},
        cache=config["cache"],
        library=library_code("verifier_adjudicate"),
    script:
        "../workflow/scripts/verifier_adjudicate.py"


rule verifier_finetune:
    input:
        selected=finetune_transcripts,
        pairs=f"{DATA}/{{dataset}}.parquet",
        split=f"{DEBATE_OUT}/{{dataset}}/split.parquet",
        base=lambda wc: model_fingerprint(wc.architecture),
        adjudications=finetune_adjudications,
    output:
        fingerprint=f"{VERIFIERS}/{{architecture}}/{{dataset}}/{{length}}/{{variant}}/fingerprint.json",
        curve=f"{VERIFIER_OUT}/{{architecture}}/{{dataset}}/{{length}}/{{variant}}/loss_curve.parquet",
    log:
        f"{LOGS}/verifier/finetune_{{architecture}}_{{dataset}}_{{length}}_{{variant}}.log",
    benchmark:
        f"{BENCHMARKS}/verifier/finetune_{{architecture}}_{{dataset}}_{{length}}_{{variant}}.tsv"
    priority: ER_CHAIN_PRIORITY
    threads: finetune_processes
    resources:
        gpu=finetune_processes,
        mem_mb=finetune_mem_mb,
        runtime=job_runtime("verifier_finetune"),
        cpus_per_task=finetune_cpus,
    params:
        base=lambda wc, resources: model_ref(wc.architecture),
        numbers=lambda wc: model_numbers(wc.architecture),
        out_dir=lambda wc, output: str(Path(output.fingerprint).parent),
        verifier_name=lambda wc: grid.Checkpoint.of(wc.length, wc.variant).verifier,
        labels=lambda wc: grid.Checkpoint.of(wc.length, wc.variant).labels(
            wc.architecture
        ),
        settings=finetune_settings,
        distributed=finetune_distributed,
        readout=config["verifier"]["readout"],
        library=library_code("verifier_finetune"),
    script:
        "../workflow/scripts/verifier_finetune.py"


# The audit's null target (audit.targets: copy): V_base saved again, byte for byte, under another name.
rule verifier_copy:
    input:
        base=lambda wc: model_fingerprint(wc.architecture),
    output:
        fingerprint=f"{VERIFIERS}/{{architecture}}/copy/fingerprint.json",
    log:
        f"{LOGS}/verifier/copy_{{architecture}}.log",
    params:
        base=lambda wc, resources: model_ref(wc.architecture),
        out_dir=lambda wc, output: str(Path(output.fingerprint).parent),
        library=library_code("verifier_copy"),
    script:
        "../workflow/scripts/verifier_copy.py"


rule verifier_loss_figure:
    input:
        curves=lambda wc: expand(
            f"{VERIFIER_OUT}/{{architecture}}/{{dataset}}/{{length}}/{{variant}}/loss_curve.parquet",
            variant=PLAN.variants(wc.architecture, wc.dataset, wc.length),
            **wc,
        ),
    output:
        png=report(
            f"{VERIFIER_OUT}/{{architecture}}/{{dataset}}/{{length}}/loss_curves.png",
            caption="../report/captions/eraudit_loss_curves.rst",
            category="ER-Audit",
            subcategory="1. Verifier fine-tuning",
            labels={
                "architecture": "{architecture}",
                "dataset": "{dataset}",
                "length": "{length}",
                "figure": "loss curves",
            },
        ),
        svg=f"{VERIFIER_OUT}/{{architecture}}/{{dataset}}/{{length}}/loss_curves.svg",
    log:
        f"{LOGS}/verifier/loss_figure_{{architecture}}_{{dataset}}_{{length}}.log",
    params:
        title=lambda wc: f"{wc.dataset} · {wc.architecture} · {wc.length}",
        library=library_code("verifier_loss_figure"),
    script:
        "../workflow/scripts/verifier_loss_figure.py"


rule verifier_evaluate:
    input:
        pairs=f"{DATA}/{{dataset}}.parquet",
        split=f"{DEBATE_OUT}/{{dataset}}/split.parquet",
        model=checkpoint_fingerprint,
    output:
        scores=f"{VERIFIER_OUT}/{{architecture}}/{{dataset}}/{{verifier}}/eval.parquet",
    log:
        f"{LOGS}/verifier/evaluate_{{architecture}}_{{dataset}}_{{verifier}}.log",
    benchmark:
        f"{BENCHMARKS}/verifier/evaluate_{{architecture}}_{{dataset}}_{{verifier}}.tsv"
    resources:
        gpu=1,
        mem_mb=lambda wc: model_mem_mb(wc.architecture, generates=False),
        runtime=job_runtime("verifier_evaluate"),
        cpus_per_task=lambda wc: model_cpus(wc.architecture, generates=False),
    params:
        model=lambda wc, input: model_ref(
            wc.architecture, str(Path(input.model).parent)
        ),
        numbers=lambda wc: model_numbers(wc.architecture),
        verifier_name=lambda wc: grid.Checkpoint.parse(wc.verifier).verifier,
        labels=lambda wc: grid.Checkpoint.parse(wc.verifier).labels(wc.architecture),
        readout=config["verifier"]["readout"],
        cache=config["cache"],
        library=library_code("verifier_evaluate"),
    script:
        "../workflow/scripts/verifier_evaluate.py"


rule verifier_table1:
    input:
        scores=cell_paths(
            f"{VERIFIER_OUT}/{{architecture}}/{{dataset}}/{{verifier}}/eval.parquet",
            CHECKPOINT_CELLS,
        ),
    output:
        table=f"{VERIFIER_OUT}/table1.parquet",
        markdown=f"{VERIFIER_OUT}/table1.md",
        csv=report(
            f"{VERIFIER_OUT}/table1.csv",
            caption="../report/captions/eraudit_table1.rst",
            category="ER-Audit",
            subcategory="2. Verifier evaluation",
            labels={"table": "Table 1"},
        ),
    log:
        f"{LOGS}/verifier/table1.log",
    params:
        library=library_code("verifier_table1"),
    script:
        "../workflow/scripts/verifier_table1.py"


# Table 1 where verifiers are trained (verifier.datasets: [] turns ER-Audit part 1 off)
if CHECKPOINT_CELLS:
    ALL_TARGETS.extend([f"{VERIFIER_OUT}/table1.md"])
# one loss figure per architecture x dataset x length with a fine-tuned variant
ALL_TARGETS.extend(
    dict.fromkeys(
        f"{VERIFIER_OUT}/{c['architecture']}/{c['dataset']}/{c['length']}/loss_curves.png"
        for c in FINETUNE_CELLS
    )
)
