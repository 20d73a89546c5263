# CW-POR: single-turn persuasion debates on TruthfulQA (issue 3).
#   cwpor_questions -> cwpor_debate (per model x verbosity) -> cwpor_judge -> cwpor_metrics
#   -> cwpor_tables, cwpor_figures
# Prompt templates are versioned in debate_audit.cwpor.prompts; each rule carries only the id of the
# template it uses, so a judge-template change reruns the judge and what follows, not the debates.
from debate_audit.cwpor.prompts import max_new_tokens_for, template_id

CWPOR = config["cwpor"]
CWPOR_OUT = "results/cwpor"
CWPOR_FIGURES = ["fig2_category", "fig4_verbosity", "fig5_question_type", "fig6_confidence"]


wildcard_constraints:
    verbosity=r"\d+",


def cwpor_role_model(model, role):
    """The model playing `role` in model m's debates: cwpor.<role>_model, or m itself when null."""
    return CWPOR[f"{role}_model"] or model


def cwpor_model_ref(name):
    spec = model_spec(name)
    return {
        "name": name,
        "model_dir": model_dir(name),
        "device": spec.device,
        "dtype": spec.dtype,
        "batch_size": spec.batch_size,
    }


def cwpor_judgments():
    return expand(
        f"{CWPOR_OUT}/{{model}}/judgments_v{{verbosity}}.parquet",
        model=CWPOR["models"],
        verbosity=CWPOR["verbosity"],
    )


def cwpor_responses():
    return expand(
        f"{CWPOR_OUT}/{{model}}/responses_v{{verbosity}}.parquet",
        model=CWPOR["models"],
        verbosity=CWPOR["verbosity"],
    )


rule cwpor_questions:
    input:
        dataset="data/truthfulqa.parquet",
    output:
        questions=f"{CWPOR_OUT}/questions.parquet",
    params:
        subset=CWPOR["subset"],
        seed=CWPOR["seed"],
    log:
        "logs/cwpor/questions.log",
    script:
        "../workflow/scripts/cwpor_questions.py"


rule cwpor_debate:
    input:
        questions=f"{CWPOR_OUT}/questions.parquet",
        neutral=lambda wc: model_fingerprint(cwpor_role_model(wc.model, "neutral")),
        persuasive=lambda wc: model_fingerprint(
            cwpor_role_model(wc.model, "persuasive")
        ),
    output:
        responses=f"{CWPOR_OUT}/{{model}}/responses_v{{verbosity}}.parquet",
    params:
        agents=lambda wc: {
            role: cwpor_model_ref(cwpor_role_model(wc.model, role))
            for role in ("neutral", "persuasive")
        },
        template=CWPOR["debate_template"],
        # version + hash of the template text: editing the debate prompts reruns this rule
        template_id=template_id("debate", CWPOR["debate_template"]),
        max_new_tokens=lambda wc: max_new_tokens_for(
            int(wc.verbosity), CWPOR["tokens_per_word"], CWPOR["extra_tokens"]
        ),
        cache=config["cache"],
    log:
        "logs/cwpor/debate/{model}_v{verbosity}.log",
    benchmark:
        "benchmarks/rules/cwpor/debate/{model}_v{verbosity}.tsv"
    resources:
        gpu=1,
        mem_mb=CWPOR["resources"]["mem_mb"],
        runtime=CWPOR["resources"]["runtime"],
    script:
        "../workflow/scripts/cwpor_debate.py"


rule cwpor_judge:
    input:
        questions=f"{CWPOR_OUT}/questions.parquet",
        responses=f"{CWPOR_OUT}/{{model}}/responses_v{{verbosity}}.parquet",
        judge=lambda wc: model_fingerprint(cwpor_role_model(wc.model, "judge")),
    output:
        judgments=f"{CWPOR_OUT}/{{model}}/judgments_v{{verbosity}}.parquet",
    params:
        judge=lambda wc: cwpor_model_ref(cwpor_role_model(wc.model, "judge")),
        template=CWPOR["judge_template"],
        # version + hash of the template text: editing the judge prompt reruns this rule
        template_id=template_id("judge", CWPOR["judge_template"]),
        max_new_tokens=CWPOR["judge_max_new_tokens"],
        cache=config["cache"],
    log:
        "logs/cwpor/judge/{model}_v{verbosity}.log",
    benchmark:
        "benchmarks/rules/cwpor/judge/{model}_v{verbosity}.tsv"
    resources:
        gpu=1,
        mem_mb=CWPOR["resources"]["mem_mb"],
        runtime=CWPOR["resources"]["runtime"],
    script:
        "../workflow/scripts/cwpor_judge.py"


rule cwpor_metrics:
    input:
        judgments=cwpor_judgments(),
    output:
        metrics=f"{CWPOR_OUT}/metrics.parquet",
        breakdowns=f"{CWPOR_OUT}/breakdowns.parquet",
    params:
        resamples=CWPOR["bootstrap"],
        level=CWPOR["ci_level"],
        seed=CWPOR["seed"],
    log:
        "logs/cwpor/metrics.log",
    script:
        "../workflow/scripts/cwpor_metrics.py"


rule cwpor_tables:
    input:
        metrics=f"{CWPOR_OUT}/metrics.parquet",
        judgments=cwpor_judgments(),
        responses=cwpor_responses(),
        questions=f"{CWPOR_OUT}/questions.parquet",
    output:
        summary_md=f"{CWPOR_OUT}/tables/summary.md",
        summary_csv=f"{CWPOR_OUT}/tables/summary.csv",
        examples=f"{CWPOR_OUT}/tables/fig3_examples.md",
    params:
        level=CWPOR["ci_level"],
        example_categories=CWPOR["example_categories"],
        examples_per_category=CWPOR["examples_per_category"],
    log:
        "logs/cwpor/tables.log",
    script:
        "../workflow/scripts/cwpor_tables.py"


rule cwpor_figures:
    input:
        metrics=f"{CWPOR_OUT}/metrics.parquet",
        breakdowns=f"{CWPOR_OUT}/breakdowns.parquet",
    output:
        expand(
            f"{CWPOR_OUT}/figures/{{figure}}.{{ext}}",
            figure=CWPOR_FIGURES,
            ext=["png", "svg"],
        ),
    params:
        out_dir=f"{CWPOR_OUT}/figures",
        level=CWPOR["ci_level"],
    log:
        "logs/cwpor/figures.log",
    script:
        "../workflow/scripts/cwpor_figures.py"


ALL_TARGETS.extend(
    [
        f"{CWPOR_OUT}/metrics.parquet",
        f"{CWPOR_OUT}/tables/summary.md",
        f"{CWPOR_OUT}/tables/fig3_examples.md",
    ]
    + expand(f"{CWPOR_OUT}/figures/{{figure}}.png", figure=CWPOR_FIGURES)
)
