# CW-POR: single-turn persuasion debates on TruthfulQA (issue 3).
#   cwpor_questions -> cwpor_debate (per model x verbosity) -> cwpor_judge -> cwpor_metrics
#   -> cwpor_tables, cwpor_figures
# Prompt templates are versioned in debate_audit.cwpor.prompts; each rule carries only the id of the
# template it uses, so a judge-template change reruns the judge and what follows, not the debates.
from debate_audit.cwpor.prompts import max_new_tokens_for, template_id
from debate_audit.cwpor.roles import role_model

CWPOR = config["cwpor"]
CWPOR_OUT = "results/cwpor"
CWPOR_FIGURES = [
    "fig2_category",
    "fig4_verbosity",
    "fig5_question_type",
    "fig6_confidence",
]
CWPOR_CELLS = dict(model=CWPOR["models"], verbosity=CWPOR["verbosity"])
CWPOR_RESPONSES = expand(
    f"{CWPOR_OUT}/{{model}}/responses_v{{verbosity}}.parquet", **CWPOR_CELLS
)
CWPOR_JUDGMENTS = expand(
    f"{CWPOR_OUT}/{{model}}/judgments_v{{verbosity}}.parquet", **CWPOR_CELLS
)


wildcard_constraints:
    verbosity=r"\d+",


rule cwpor_questions:
    input:
        dataset="data/truthfulqa.parquet",
    output:
        questions=f"{CWPOR_OUT}/questions.parquet",
    log:
        "logs/cwpor/questions.log",
    conda:
        "../envs/debate-audit.yaml"
    params:
        subset=CWPOR["subset"],
        seed=CWPOR["seed"],
        library=library_code("cwpor_questions"),
    script:
        "../workflow/scripts/cwpor_questions.py"


rule cwpor_debate:
    input:
        questions=f"{CWPOR_OUT}/questions.parquet",
        neutral=lambda wc: model_fingerprint(role_model(CWPOR, wc.model, "neutral")),
        persuasive=lambda wc: model_fingerprint(
            role_model(CWPOR, wc.model, "persuasive")
        ),
    output:
        responses=f"{CWPOR_OUT}/{{model}}/responses_v{{verbosity}}.parquet",
    log:
        "logs/cwpor/debate/{model}_v{verbosity}.log",
    benchmark:
        "benchmarks/rules/cwpor/debate/{model}_v{verbosity}.tsv"
    conda:
        "../envs/debate-audit.yaml"
    resources:
        gpu=lambda wc: generation_gpu(
            role_model(CWPOR, wc.model, "neutral"),
            role_model(CWPOR, wc.model, "persuasive"),
        ),
        mem_mb=lambda wc: model_mem_mb(
            role_model(CWPOR, wc.model, "neutral"),
            role_model(CWPOR, wc.model, "persuasive"),
            scores=False,
        ),
        runtime=CWPOR["resources"]["runtime"],
    params:
        agents=lambda wc, resources: {
            role: model_ref(role_model(CWPOR, wc.model, role))
            for role in ("neutral", "persuasive")
        },
        numbers=lambda wc: model_numbers(
            role_model(CWPOR, wc.model, "neutral"),
            role_model(CWPOR, wc.model, "persuasive"),
        ),
        template=CWPOR["debate_template"],
        # version + hash of the template text: editing the debate prompts reruns this rule
        template_id=template_id("debate", CWPOR["debate_template"]),
        max_new_tokens=lambda wc: max_new_tokens_for(
            int(wc.verbosity), CWPOR["tokens_per_word"], CWPOR["extra_tokens"]
        ),
        cache=config["cache"],
        library=library_code("cwpor_debate"),
    script:
        "../workflow/scripts/cwpor_debate.py"


rule cwpor_judge:
    input:
        questions=f"{CWPOR_OUT}/questions.parquet",
        responses=f"{CWPOR_OUT}/{{model}}/responses_v{{verbosity}}.parquet",
        judge=lambda wc: model_fingerprint(role_model(CWPOR, wc.model, "judge")),
    output:
        judgments=f"{CWPOR_OUT}/{{model}}/judgments_v{{verbosity}}.parquet",
    log:
        "logs/cwpor/judge/{model}_v{verbosity}.log",
    benchmark:
        "benchmarks/rules/cwpor/judge/{model}_v{verbosity}.tsv"
    conda:
        "../envs/debate-audit.yaml"
    resources:
        gpu=1,
        mem_mb=lambda wc: model_mem_mb(role_model(CWPOR, wc.model, "judge")),
        runtime=CWPOR["resources"]["runtime"],
    params:
        judge=lambda wc, resources: model_ref(role_model(CWPOR, wc.model, "judge")),
        numbers=lambda wc: model_numbers(role_model(CWPOR, wc.model, "judge")),
        template=CWPOR["judge_template"],
        # version + hash of the template text: editing the judge prompt reruns this rule
        template_id=template_id("judge", CWPOR["judge_template"]),
        max_new_tokens=CWPOR["judge_max_new_tokens"],
        cache=config["cache"],
        library=library_code("cwpor_judge"),
    script:
        "../workflow/scripts/cwpor_judge.py"


rule cwpor_metrics:
    input:
        judgments=CWPOR_JUDGMENTS,
    output:
        metrics=f"{CWPOR_OUT}/metrics.parquet",
        breakdowns=f"{CWPOR_OUT}/breakdowns.parquet",
    log:
        "logs/cwpor/metrics.log",
    conda:
        "../envs/debate-audit.yaml"
    params:
        resamples=CWPOR["bootstrap"],
        level=CWPOR["ci_level"],
        seed=CWPOR["seed"],
        library=library_code("cwpor_metrics"),
    script:
        "../workflow/scripts/cwpor_metrics.py"


rule cwpor_tables:
    input:
        metrics=f"{CWPOR_OUT}/metrics.parquet",
        judgments=CWPOR_JUDGMENTS,
        responses=CWPOR_RESPONSES,
        questions=f"{CWPOR_OUT}/questions.parquet",
    output:
        summary_md=f"{CWPOR_OUT}/tables/summary.md",
        summary_csv=report(
            f"{CWPOR_OUT}/tables/summary.csv",
            caption="../report/captions/cwpor_summary.rst",
            category="CW-POR",
            subcategory="Tables",
            labels={"table": "summary per model and word limit"},
        ),
        examples=report(
            f"{CWPOR_OUT}/tables/fig3_examples.md",
            caption="../report/captions/cwpor_examples.rst",
            category="CW-POR",
            subcategory="Tables",
            labels={"table": "Fig. 3 example debates"},
        ),
    log:
        "logs/cwpor/tables.log",
    conda:
        "../envs/debate-audit.yaml"
    params:
        level=CWPOR["ci_level"],
        example_categories=CWPOR["example_categories"],
        examples_per_category=CWPOR["examples_per_category"],
        library=library_code("cwpor_tables"),
    script:
        "../workflow/scripts/cwpor_tables.py"


rule cwpor_figures:
    input:
        metrics=f"{CWPOR_OUT}/metrics.parquet",
        breakdowns=f"{CWPOR_OUT}/breakdowns.parquet",
    output:
        [
            report(
                f"{CWPOR_OUT}/figures/{figure}.png",
                caption=f"../report/captions/cwpor_{figure}.rst",
                category="CW-POR",
                subcategory="Figures",
                labels={"figure": figure},
            )
            for figure in CWPOR_FIGURES
        ],
        expand(f"{CWPOR_OUT}/figures/{{figure}}.svg", figure=CWPOR_FIGURES),
    log:
        "logs/cwpor/figures.log",
    conda:
        "../envs/debate-audit.yaml"
    params:
        out_dir=lambda wc, output: str(Path(output[0]).parent),
        level=CWPOR["ci_level"],
        library=library_code("cwpor_figures"),
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
