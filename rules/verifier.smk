# ER-Audit part 1: fine-tune V_honest / V_adv / V_org, forced-choice evaluation, Table 1.

from debate_audit.eraudit.finetune import TRAINING_ITEMS_VERSION
from debate_audit.eraudit.readout import readout_id
from debate_audit.eraudit.verifiers import VARIANTS as VERIFIER_VARIANTS
from debate_audit.eraudit.verifiers import VERIFIERS as VERIFIER_DEFS

# variant -> transcript mode, and every verifier name (base first): one definition in the library.
VERIFIERS = list(VERIFIER_DEFS)
# FinetuneSettings fields, passed as params so a changed setting retrains.
FINETUNE_KEYS = ["loss_weights", "epochs", "max_steps", "learning_rate", "batch_size"]
FINETUNE_KEYS += ["grad_accum", "max_length", "max_target_tokens", "seed", "lora"]


wildcard_constraints:
    variant="|".join(VERIFIER_VARIANTS),
    verifier="|".join(VERIFIERS),


rule verifier_finetune:
    input:
        selected=lambda wc: f"results/er_audit/{wc.dataset}/debates_{VERIFIER_VARIANTS[wc.variant]}.parquet",
        pairs="data/{dataset}.parquet",
        split="results/er_audit/{dataset}/split.parquet",
        base=model_fingerprint(config["verifier"]["base_model"]),
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
        base=model_ref(config["verifier"]["base_model"]),
        out_dir=lambda wc, output: str(Path(output.fingerprint).parent),
        settings={key: config["verifier"][key] for key in FINETUNE_KEYS},
        training_items_version=TRAINING_ITEMS_VERSION,
        readout=config["verifier"]["readout"],
        readout_version=readout_id(config["verifier"]["readout"]),
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
        # V_base is the prepared base model, the others its fine-tuned copies (same spec, own directory)
        model=lambda wc, input: model_ref(
            config["verifier"]["base_model"], str(Path(input.model).parent)
        ),
        readout=config["verifier"]["readout"],
        readout_version=readout_id(config["verifier"]["readout"]),
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
