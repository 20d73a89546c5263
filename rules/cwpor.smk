# CW-POR: single-turn persuasion debates on TruthfulQA (issue 3), the rules that call a model.
#   cwpor_questions -> cwpor_debate (per model x verbosity) -> cwpor_judge -> cwpor_metrics
#   -> cwpor_tables, cwpor_figures; cwpor_judge -> cwpor_calibration -> cwpor_reliability, cwpor_tables;
#   several judges (cwpor.cross_judges): cwpor_judge per model x judge x verbosity -> cwpor_cross_judge;
#   rebuttal (cwpor.rebuttal_protocols): cwpor_debate -> cwpor_rebuttal -> cwpor_judge_rebuttal
#   -> cwpor_rebuttal_effects. The rules after the judges read the judgments and call no model: they are in
#   rules/cwpor_analysis.smk. Path helpers (cwpor_judgments, round1_responses): rules/stage_inputs.smk.
# Prompt templates are versioned in debate_audit.cwpor.prompts; each rule carries only the id of the
# template it uses, so a judge-template change reruns the judge and what follows, not the debates.
from debate_audit.cwpor.jobs import job_split
from debate_audit.cwpor.prompts import max_new_tokens_for
from debate_audit.cwpor.rebuttal import PROTOCOLS as REBUTTAL_PROTOCOL_NAMES
from debate_audit.cwpor.rebuttal import protocol as rebuttal_protocol
from debate_audit.cwpor.roles import judges as cwpor_judges, role_model

CWPOR = config["cwpor"]
CWPOR_OUT = f"{RESULTS}/cwpor"
# Judges of each experiment model's debates: the primary one (cwpor.judge_model or m) first, then
# cwpor.cross_judges. Responses are written once per model; every judge reads the same ones.
CWPOR_JUDGES = {m: cwpor_judges(CWPOR, m) for m in CWPOR["models"]}

# The rebuttal round (cwpor.rebuttal_protocols): both rounds per model, protocol and word limit, judged by
# every judge of the model. The length control's round 1 is the single-turn response at v // 2 words.
REBUTTAL_PROTOCOLS = CWPOR["rebuttal_protocols"]
REBUTTAL_CELLS = dict(
    model=CWPOR["models"], protocol=REBUTTAL_PROTOCOLS, verbosity=CWPOR["verbosity"]
)
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
