# CW-POR: single-turn persuasion debates on TruthfulQA (issue 3).
#   cwpor_questions -> cwpor_debate (per model x verbosity) -> cwpor_judge -> cwpor_metrics
#   -> cwpor_tables, cwpor_figures; cwpor_judge -> cwpor_calibration -> cwpor_reliability, cwpor_tables;
#   several judges (cwpor.cross_judges): cwpor_judge per model x judge x verbosity -> cwpor_cross_judge;
#   rebuttal (cwpor.rebuttal_protocols): cwpor_debate -> cwpor_rebuttal -> cwpor_judge_rebuttal
#   -> cwpor_rebuttal_effects. Path helpers (cwpor_judgments, round1_responses): rules/common.smk.
# Prompt templates are versioned in debate_audit.cwpor.prompts; each rule carries only the id of the
# template it uses, so a judge-template change reruns the judge and what follows, not the debates.
from debate_audit.cwpor.calibration import SIGNAL_NAMES as CALIBRATION_SIGNALS
from debate_audit.cwpor.jobs import job_split
from debate_audit.cwpor.prompts import max_new_tokens_for
from debate_audit.cwpor.rebuttal import PROTOCOLS as REBUTTAL_PROTOCOL_NAMES
from debate_audit.cwpor.rebuttal import protocol as rebuttal_protocol
from debate_audit.cwpor.roles import judges as cwpor_judges, role_model

CWPOR = config["cwpor"]
CWPOR_OUT = f"{RESULTS}/cwpor"
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
# Judges of each experiment model's debates: the primary one (cwpor.judge_model or m) first, then
# cwpor.cross_judges. Responses are written once per model; every judge reads the same ones.
CWPOR_JUDGES = {m: cwpor_judges(CWPOR, m) for m in CWPOR["models"]}
CROSS_JUDGING = any(len(judges) > 1 for judges in CWPOR_JUDGES.values())
# the primary judge's judgments make the paper's outputs; every judge's the calibration and matrix
CWPOR_JUDGMENTS = cwpor_judgments(primary_only=True)
CWPOR_ALL_JUDGMENTS = cwpor_judgments(primary_only=False)

# The rebuttal round (cwpor.rebuttal_protocols): both rounds per model, protocol and word limit, judged by
# every judge of the model. The length control's round 1 is the single-turn response at v // 2 words.
REBUTTAL_PROTOCOLS = CWPOR["rebuttal_protocols"]
REBUTTAL_CELLS = dict(
    model=CWPOR["models"], protocol=REBUTTAL_PROTOCOLS, verbosity=CWPOR["verbosity"]
)
REBUTTAL_JUDGMENTS = [
    f"{CWPOR_OUT}/{m}/judge-{judge}/rebuttal-{p}/judgments_v{v}.parquet"
    for m, judges in CWPOR_JUDGES.items()
    for judge in judges
    for p in REBUTTAL_PROTOCOLS
    for v in CWPOR["verbosity"]
]
# Every word limit single-turn responses are written at: the configured ones and the length control's v // 2.
CWPOR_DEBATE_WORDS = sorted(
    {
        rebuttal_protocol(p).turn_words(v)
        for p in REBUTTAL_PROTOCOLS
        for v in CWPOR["verbosity"]
    }
    | set(CWPOR["verbosity"])
)

# One job per model and word limit, or one per model for all its word limits (cwpor.job_split, cwpor/jobs.py:
# the model is loaded, or its vLLM engine started, once). The files are the same either way; a gathered job's
# inputs and outputs are lists over the word limits, its log and benchmark record one per job.
CWPOR_PER_MODEL = job_split(config) == "model"
if CWPOR_PER_MODEL:
    DEBATE_JOB, JUDGE_JOB = "{model}", "{model}_judge-{judge}"
    REBUTTAL_JUDGE_JOB = "{model}_judge-{judge}_rebuttal-{protocol}"
    DEBATE_RESPONSES = [
        f"{CWPOR_OUT}/{{model}}/responses_v{v}.parquet" for v in CWPOR_DEBATE_WORDS
    ]
    JUDGED_RESPONSES = [
        f"{CWPOR_OUT}/{{model}}/responses_v{v}.parquet" for v in CWPOR["verbosity"]
    ]
    JUDGMENTS = [
        f"{CWPOR_OUT}/{{model}}/judge-{{judge}}/judgments_v{v}.parquet"
        for v in CWPOR["verbosity"]
    ]
    JUDGED_REBUTTALS = [
        f"{CWPOR_OUT}/{{model}}/rebuttal-{{protocol}}/responses_v{v}.parquet"
        for v in CWPOR["verbosity"]
    ]
    REBUTTAL_JUDGMENTS_OUT = [
        f"{CWPOR_OUT}/{{model}}/judge-{{judge}}/rebuttal-{{protocol}}/judgments_v{v}.parquet"
        for v in CWPOR["verbosity"]
    ]
else:
    DEBATE_JOB, JUDGE_JOB = "{model}_v{verbosity}", "{model}_judge-{judge}_v{verbosity}"
    REBUTTAL_JUDGE_JOB = "{model}_judge-{judge}_rebuttal-{protocol}_v{verbosity}"
    DEBATE_RESPONSES = f"{CWPOR_OUT}/{{model}}/responses_v{{verbosity}}.parquet"
    JUDGED_RESPONSES = DEBATE_RESPONSES
    JUDGMENTS = (
        f"{CWPOR_OUT}/{{model}}/judge-{{judge}}/judgments_v{{verbosity}}.parquet"
    )
    JUDGED_REBUTTALS = (
        f"{CWPOR_OUT}/{{model}}/rebuttal-{{protocol}}/responses_v{{verbosity}}.parquet"
    )
    REBUTTAL_JUDGMENTS_OUT = f"{CWPOR_OUT}/{{model}}/judge-{{judge}}/rebuttal-{{protocol}}/judgments_v{{verbosity}}.parquet"


wildcard_constraints:
    verbosity=r"\d+",
    judge=one_of(MODEL_SPECS),
    protocol=one_of(REBUTTAL_PROTOCOL_NAMES),


rule cwpor_questions:
    input:
        dataset=f"{DATA}/truthfulqa.parquet",
    output:
        questions=f"{CWPOR_OUT}/questions.parquet",
    log:
        f"{LOGS}/cwpor/questions.log",
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
        responses=DEBATE_RESPONSES,
    log:
        f"{LOGS}/cwpor/debate/{DEBATE_JOB}.log",
    benchmark:
        f"{BENCHMARKS}/cwpor/debate/{DEBATE_JOB}.tsv"
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
        runtime=job_runtime("cwpor_debate"),
        cpus_per_task=lambda wc: model_cpus(
            role_model(CWPOR, wc.model, "neutral"),
            role_model(CWPOR, wc.model, "persuasive"),
            scores=False,
        ),
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
        max_new_tokens=debate_budgets,
        cache=config["cache"],
        library=library_code("cwpor_debate"),
    script:
        "../workflow/scripts/cwpor_debate.py"


rule cwpor_judge:
    input:
        questions=f"{CWPOR_OUT}/questions.parquet",
        responses=JUDGED_RESPONSES,
        judge=lambda wc: model_fingerprint(wc.judge),
    output:
        judgments=JUDGMENTS,
    log:
        f"{LOGS}/cwpor/judge/{JUDGE_JOB}.log",
    benchmark:
        f"{BENCHMARKS}/cwpor/judge/{JUDGE_JOB}.tsv"
    resources:
        gpu=lambda wc: model_gpu(wc.judge),
        mem_mb=lambda wc: model_mem_mb(wc.judge),
        runtime=job_runtime("cwpor_judge"),
        cpus_per_task=lambda wc: model_cpus(wc.judge),
    params:
        judge=lambda wc, resources: model_ref(wc.judge),
        numbers=lambda wc: model_numbers(wc.judge),
        template=CWPOR["judge_template"],
        max_new_tokens=CWPOR["judge_max_new_tokens"],
        cache=config["cache"],
        library=library_code("cwpor_judge"),
    script:
        "../workflow/scripts/cwpor_judge.py"


rule cwpor_rebuttal:
    input:
        questions=f"{CWPOR_OUT}/questions.parquet",
        round1=round1_responses,
        neutral=lambda wc: model_fingerprint(role_model(CWPOR, wc.model, "neutral")),
        persuasive=lambda wc: model_fingerprint(
            role_model(CWPOR, wc.model, "persuasive")
        ),
    output:
        debate=f"{CWPOR_OUT}/{{model}}/rebuttal-{{protocol}}/responses_v{{verbosity}}.parquet",
    log:
        f"{LOGS}/cwpor/rebuttal/{{model}}_{{protocol}}_v{{verbosity}}.log",
    benchmark:
        f"{BENCHMARKS}/cwpor/rebuttal/{{model}}_{{protocol}}_v{{verbosity}}.tsv"
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
        runtime=job_runtime("cwpor_rebuttal"),
        cpus_per_task=lambda wc: model_cpus(
            role_model(CWPOR, wc.model, "neutral"),
            role_model(CWPOR, wc.model, "persuasive"),
            scores=False,
        ),
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
        rebuttal=CWPOR["rebuttal_template"],
        max_new_tokens=lambda wc: max_new_tokens_for(
            rebuttal_protocol(wc.protocol).turn_words(int(wc.verbosity)),
            CWPOR["tokens_per_word"],
            CWPOR["extra_tokens"],
        ),
        cache=config["cache"],
        library=library_code("cwpor_rebuttal"),
    script:
        "../workflow/scripts/cwpor_rebuttal.py"


# The judge reads both rounds of a rebuttal debate with the same prompt, template and settings.
use rule cwpor_judge as cwpor_judge_rebuttal with:
    input:
        questions=f"{CWPOR_OUT}/questions.parquet",
        responses=JUDGED_REBUTTALS,
        judge=lambda wc: model_fingerprint(wc.judge),
    output:
        judgments=REBUTTAL_JUDGMENTS_OUT,
    log:
        f"{LOGS}/cwpor/judge/{REBUTTAL_JUDGE_JOB}.log",
    benchmark:
        f"{BENCHMARKS}/cwpor/judge/{REBUTTAL_JUDGE_JOB}.tsv"


rule cwpor_rebuttal_effects:
    input:
        single=CWPOR_ALL_JUDGMENTS,
        rebutted=REBUTTAL_JUDGMENTS,
    output:
        effects=f"{CWPOR_OUT}/rebuttal.parquet",
        flips=f"{CWPOR_OUT}/rebuttal_flips.parquet",
        markdown=report(
            f"{CWPOR_OUT}/tables/rebuttal.md",
            caption="../report/captions/cwpor_rebuttal.rst",
            category="CW-POR",
            subcategory="Rebuttal",
            labels={"table": "POR and CW-POR after a rebuttal round"},
        ),
    log:
        f"{LOGS}/cwpor/rebuttal_effects.log",
    params:
        resamples=CWPOR["bootstrap"],
        level=CWPOR["ci_level"],
        seed=CWPOR["seed"],
        library=library_code("cwpor_rebuttal_effects"),
    script:
        "../workflow/scripts/cwpor_rebuttal_effects.py"


rule cwpor_metrics:
    input:
        judgments=CWPOR_JUDGMENTS,
    output:
        metrics=f"{CWPOR_OUT}/metrics.parquet",
        breakdowns=f"{CWPOR_OUT}/breakdowns.parquet",
    log:
        f"{LOGS}/cwpor/metrics.log",
    params:
        resamples=CWPOR["bootstrap"],
        level=CWPOR["ci_level"],
        seed=CWPOR["seed"],
        library=library_code("cwpor_metrics"),
    script:
        "../workflow/scripts/cwpor_metrics.py"


rule cwpor_calibration:
    input:
        judgments=CWPOR_ALL_JUDGMENTS,
    output:
        table=f"{CWPOR_OUT}/calibration.parquet",
        bins=f"{CWPOR_OUT}/calibration_bins.parquet",
        markdown=report(
            f"{CWPOR_OUT}/tables/calibration.md",
            caption="../report/captions/cwpor_calibration.rst",
            category="CW-POR",
            subcategory="Calibration",
            labels={"table": "calibration of every confidence signal"},
        ),
    log:
        f"{LOGS}/cwpor/calibration.log",
    params:
        settings=CWPOR["calibration"],
        resamples=CWPOR["bootstrap"],
        level=CWPOR["ci_level"],
        seed=CWPOR["seed"],
        library=library_code("cwpor_calibration"),
    script:
        "../workflow/scripts/cwpor_calibration.py"


rule cwpor_reliability:
    input:
        table=f"{CWPOR_OUT}/calibration.parquet",
        bins=f"{CWPOR_OUT}/calibration_bins.parquet",
    output:
        [
            report(
                f"{CWPOR_OUT}/figures/reliability_{signal}.png",
                caption="../report/captions/cwpor_reliability.rst",
                category="CW-POR",
                subcategory="Calibration",
                labels={"figure": f"reliability of {signal}"},
            )
            for signal in CALIBRATION_SIGNALS
        ],
        expand(
            f"{CWPOR_OUT}/figures/reliability_{{signal}}.svg",
            signal=CALIBRATION_SIGNALS,
        ),
    log:
        f"{LOGS}/cwpor/reliability.log",
    params:
        signals=CALIBRATION_SIGNALS,
        out_dir=lambda wc, output: str(Path(output[0]).parent),
        library=library_code("cwpor_reliability"),
    script:
        "../workflow/scripts/cwpor_reliability.py"


rule cwpor_cross_judge:
    input:
        judgments=CWPOR_ALL_JUDGMENTS,
    output:
        matrix=f"{CWPOR_OUT}/cross_judge.parquet",
        contrast=f"{CWPOR_OUT}/cross_judge_contrast.parquet",
        markdown=report(
            f"{CWPOR_OUT}/tables/cross_judge.md",
            caption="../report/captions/cwpor_cross_judge.rst",
            category="CW-POR",
            subcategory="Judges",
            labels={"table": "debater x judge matrix, family contrast"},
        ),
    log:
        f"{LOGS}/cwpor/cross_judge.log",
    params:
        families=CWPOR["families"],
        resamples=CWPOR["bootstrap"],
        level=CWPOR["ci_level"],
        seed=CWPOR["seed"],
        library=library_code("cwpor_cross_judge"),
    script:
        "../workflow/scripts/cwpor_cross_judge.py"


rule cwpor_tables:
    input:
        metrics=f"{CWPOR_OUT}/metrics.parquet",
        calibration=f"{CWPOR_OUT}/calibration.parquet",
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
        f"{LOGS}/cwpor/tables.log",
    params:
        level=CWPOR["ci_level"],
        headline_por=CWPOR["headline_por"],
        calibration=CWPOR["calibration"],
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
        f"{LOGS}/cwpor/figures.log",
    params:
        out_dir=lambda wc, output: str(Path(output[0]).parent),
        level=CWPOR["ci_level"],
        headline_por=CWPOR["headline_por"],
        library=library_code("cwpor_figures"),
    script:
        "../workflow/scripts/cwpor_figures.py"


ALL_TARGETS.extend(
    [
        f"{CWPOR_OUT}/metrics.parquet",
        f"{CWPOR_OUT}/tables/summary.md",
        f"{CWPOR_OUT}/tables/fig3_examples.md",
        f"{CWPOR_OUT}/tables/calibration.md",
    ]
    + expand(f"{CWPOR_OUT}/figures/{{figure}}.png", figure=CWPOR_FIGURES)
    + expand(
        f"{CWPOR_OUT}/figures/reliability_{{signal}}.png", signal=CALIBRATION_SIGNALS
    )
    + ([f"{CWPOR_OUT}/tables/cross_judge.md"] if CROSS_JUDGING else [])
    + ([f"{CWPOR_OUT}/tables/rebuttal.md"] if REBUTTAL_PROTOCOLS else [])
)
