# ER-Audit part 1: fine-tune V_honest / V_adv / V_org, forced-choice evaluation, Table 1.

from debate_audit.eraudit.adjudication import ADJUDICATION_VERSION
from debate_audit.eraudit.finetune import training_items_id
from debate_audit.eraudit.readout import readout_id
from debate_audit.eraudit.verifiers import VARIANTS as VERIFIER_VARIANTS
from debate_audit.eraudit.verifiers import VERIFIERS as VERIFIER_DEFS

# variant -> transcript mode, and every verifier name (base first): one definition in the library.
VERIFIERS = list(VERIFIER_DEFS)
# FinetuneSettings fields, passed as params so a changed setting retrains.
FINETUNE_KEYS = ["loss_weights", "epochs", "max_steps", "learning_rate", "batch_size"]
FINETUNE_KEYS += ["grad_accum", "max_length", "max_target_tokens", "seed", "lora"]
FINETUNE_KEYS += ["lm_target"]
LM_TARGET = config["verifier"]["lm_target"]


wildcard_constraints:
    variant="|".join(VERIFIER_VARIANTS),
    verifier="|".join(VERIFIERS),


# The L_lm targets of lm_target adjudication: the base model adjudicates each training transcript.
rule verifier_adjudicate:
    input:
        selected="results/er_audit/{dataset}/debates_{debate_mode}.parquet",
        pairs="data/{dataset}.parquet",
        split="results/er_audit/{dataset}/split.parquet",
        base=model_fingerprint(config["verifier"]["base_model"]),
    output:
        adjudications="results/er_audit/{dataset}/adjudications_{debate_mode}.parquet",
        rejected="results/er_audit/{dataset}/adjudications_{debate_mode}.rejected.parquet",
    log:
        "logs/verifier/adjudicate_{dataset}_{debate_mode}.log",
    benchmark:
        "benchmarks/rules/verifier/adjudicate_{dataset}_{debate_mode}.tsv"
    conda:
        "../envs/debate-audit.yaml"
    resources:
        gpu=1,
        mem_mb=lambda wc: model_mem_mb(config["verifier"]["base_model"]),
        runtime=120,
    params:
        model_dir=lambda wc, input: str(Path(input.base).parent),
        settings=config["verifier"]["adjudication"],
        adjudication_version=ADJUDICATION_VERSION,
        spec=model_spec(config["verifier"]["base_model"]).__dict__,
        cache=config["cache"],
        library=library_code("verifier_adjudicate"),
    script:
        "../workflow/scripts/verifier_adjudicate.py"


rule verifier_finetune:
    input:
        selected=lambda wc: f"results/er_audit/{wc.dataset}/debates_{VERIFIER_VARIANTS[wc.variant]}.parquet",
        pairs="data/{dataset}.parquet",
        split="results/er_audit/{dataset}/split.parquet",
        base=model_fingerprint(config["verifier"]["base_model"]),
        adjudications=lambda wc: (
            f"results/er_audit/{wc.dataset}/adjudications_{VERIFIER_VARIANTS[wc.variant]}.parquet"
            if LM_TARGET == "adjudication"
            else []
        ),
    output:
        fingerprint="resources/verifiers/{dataset}/{variant}/fingerprint.json",
        curve="results/er_audit/{dataset}/loss_curve_{variant}.parquet",
    log:
        "logs/verifier/finetune_{dataset}_{variant}.log",
    benchmark:
        "benchmarks/rules/verifier/finetune_{dataset}_{variant}.tsv"
    conda:
        "../envs/debate-audit.yaml"
    resources:
        gpu=1,
        mem_mb=lambda wc: model_mem_mb(config["verifier"]["base_model"], training=True),
        runtime=720,
    params:
        base_dir=lambda wc, input: str(Path(input.base).parent),
        out_dir=lambda wc, output: str(Path(output.fingerprint).parent),
        settings={key: config["verifier"][key] for key in FINETUNE_KEYS},
        training_items_version=training_items_id(LM_TARGET),
        readout=config["verifier"]["readout"],
        readout_version=readout_id(config["verifier"]["readout"]),
        device=model_spec(config["verifier"]["base_model"]).device,
        library=library_code("verifier_finetune"),
    script:
        "../workflow/scripts/verifier_finetune.py"


rule verifier_loss_figure:
    input:
        curves=expand(
            "results/er_audit/{{dataset}}/loss_curve_{variant}.parquet",
            variant=VERIFIER_VARIANTS,
        ),
    output:
        png=report(
            "results/er_audit/{dataset}/loss_curves.png",
            caption="../report/captions/eraudit_loss_curves.rst",
            category="ER-Audit",
            subcategory="1. Verifier fine-tuning",
            labels={"dataset": "{dataset}", "figure": "loss curves"},
        ),
        svg="results/er_audit/{dataset}/loss_curves.svg",
    log:
        "logs/verifier/loss_figure_{dataset}.log",
    conda:
        "../envs/debate-audit.yaml"
    params:
        library=library_code("verifier_loss_figure"),
    script:
        "../workflow/scripts/verifier_loss_figure.py"


rule verifier_evaluate:
    input:
        pairs="data/{dataset}.parquet",
        split="results/er_audit/{dataset}/split.parquet",
        model=lambda wc: (
            model_fingerprint(config["verifier"]["base_model"])
            if wc.verifier == "base"
            else f"resources/verifiers/{wc.dataset}/{wc.verifier}/fingerprint.json"
        ),
    output:
        scores="results/er_audit/{dataset}/eval_{verifier}.parquet",
    log:
        "logs/verifier/evaluate_{dataset}_{verifier}.log",
    benchmark:
        "benchmarks/rules/verifier/evaluate_{dataset}_{verifier}.tsv"
    conda:
        "../envs/debate-audit.yaml"
    resources:
        gpu=1,
        mem_mb=lambda wc: model_mem_mb(config["verifier"]["base_model"]),
        runtime=60,
    params:
        model_dir=lambda wc, input: str(Path(input.model).parent),
        readout=config["verifier"]["readout"],
        readout_version=readout_id(config["verifier"]["readout"]),
        batch_size=model_spec(config["verifier"]["base_model"]).batch_size,
        device=model_spec(config["verifier"]["base_model"]).device,
        dtype=model_spec(config["verifier"]["base_model"]).dtype,
        cache=config["cache"],
        library=library_code("verifier_evaluate"),
    script:
        "../workflow/scripts/verifier_evaluate.py"


rule verifier_table1:
    input:
        scores=expand(
            "results/er_audit/{dataset}/eval_{verifier}.parquet",
            dataset=config["verifier"]["datasets"],
            verifier=VERIFIERS,
        ),
    output:
        table="results/er_audit/table1.parquet",
        markdown="results/er_audit/table1.md",
        csv=report(
            "results/er_audit/table1.csv",
            caption="../report/captions/eraudit_table1.rst",
            category="ER-Audit",
            subcategory="2. Verifier evaluation",
            labels={"table": "Table 1"},
        ),
    log:
        "logs/verifier/table1.log",
    conda:
        "../envs/debate-audit.yaml"
    params:
        library=library_code("verifier_table1"),
    script:
        "../workflow/scripts/verifier_table1.py"


ALL_TARGETS.extend(["results/er_audit/table1.md"])
ALL_TARGETS.extend(
    expand(
        "results/er_audit/{dataset}/loss_curves.png",
        dataset=config["verifier"]["datasets"],
    )
)
