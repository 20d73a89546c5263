# ER-Audit part 2: scores (model calls) -> Delta, counterexample search, sequential test -> sweeps -> figures.
# Only audit_scores calls a model; changing epsilon, eta, tau or r reruns the statistics rules alone.

from debate_audit.eraudit.audit import STATISTICS_VERSION, SWEEPS_VERSION
from debate_audit.eraudit.audit_figures import FIGURES_VERSION
from debate_audit.eraudit.readout import readout_id

AUDIT = config["audit"]
# V_base first, then the audited variants (names from eraudit/verifiers.py via rules/verifier.smk)
AUDIT_CHECKPOINTS = [VERIFIERS[0], *AUDIT["targets"]]


wildcard_constraints:
    checkpoint="|".join(AUDIT_CHECKPOINTS),


# Checkpoint directories: V_base is the prepared base model, the targets are part 1's fine-tuned verifiers.
AUDIT_CHECKPOINT_FINGERPRINTS = {
    "base": lambda wc: model_fingerprint(config["verifier"]["base_model"]),
    **{
        target: (
            lambda wc, t=target: f"resources/verifiers/{wc.dataset}/{t}/fingerprint.json"
        )
        for target in AUDIT["targets"]
    },
}


# AuditSettings fields (eraudit/audit.py); the sweep grids go to audit_sweeps only, so changing one reruns the
# sweeps and not the statistics.
AUDIT_SETTINGS = dict(
    test_pools=PARAPHRASE_TEST_GENERATORS,
    targets=AUDIT["targets"],
    kappa=AUDIT["kappa"],
    epsilon=AUDIT["epsilon"],
    epsilon_percentile=AUDIT["epsilon_percentile"],
    eta=AUDIT["eta"],
    tau=AUDIT["tau"],
    tv_r=AUDIT["tv_r"],
)


rule audit_scores:
    input:
        pairs="data/{dataset}.parquet",
        pools=expand(
            "results/paraphrase/{{dataset}}/{pool}.parquet",
            pool=PARAPHRASE_POOLS,
        ),
        # every pair the paraphrase stage selected, also those whose pools came out empty
        reports=expand(
            "results/paraphrase/{{dataset}}/{pool}.report.parquet",
            pool=PARAPHRASE_POOLS,
        ),
        model=lambda wc: AUDIT_CHECKPOINT_FINGERPRINTS[wc.checkpoint](wc),
    output:
        scores="results/audit/{dataset}/scores_{checkpoint}.parquet",
    log:
        "logs/audit/scores_{dataset}_{checkpoint}.log",
    benchmark:
        "benchmarks/rules/audit/scores_{dataset}_{checkpoint}.tsv"
    conda:
        "../envs/debate-audit.yaml"
    resources:
        gpu=1,
        mem_mb=lambda wc: model_mem_mb(config["verifier"]["base_model"]),
        runtime=120,
    params:
        # V_base is the prepared base model, the targets its fine-tuned copies (same spec, own directory)
        model=lambda wc, input: model_ref(
            config["verifier"]["base_model"], str(Path(input.model).parent)
        ),
        readout=config["verifier"]["readout"],
        readout_version=readout_id(config["verifier"]["readout"]),
        cache=config["cache"],
        library=library_code("audit_scores"),
    script:
        "../workflow/scripts/audit_scores.py"


rule audit_statistics:
    input:
        scores=expand(
            "results/audit/{{dataset}}/scores_{checkpoint}.parquet",
            checkpoint=AUDIT_CHECKPOINTS,
        ),
        split="results/er_audit/{dataset}/split.parquet",
    output:
        deltas="results/audit/{dataset}/deltas.parquet",
        records="results/audit/{dataset}/records.parquet",
        generators="results/audit/{dataset}/generators.parquet",
        steps="results/audit/{dataset}/steps.parquet",
        summary="results/audit/{dataset}/summary.parquet",
    log:
        "logs/audit/statistics_{dataset}.log",
    conda:
        "../envs/debate-audit.yaml"
    params:
        settings=AUDIT_SETTINGS,
        statistics_version=STATISTICS_VERSION,
        library=library_code("audit_statistics"),
    script:
        "../workflow/scripts/audit_statistics.py"


rule audit_sweeps:
    input:
        scores=expand(
            "results/audit/{{dataset}}/scores_{checkpoint}.parquet",
            checkpoint=AUDIT_CHECKPOINTS,
        ),
    output:
        confidence="results/audit/{dataset}/sweep_confidence.parquet",
        epsilon="results/audit/{dataset}/sweep_epsilon.parquet",
    log:
        "logs/audit/sweeps_{dataset}.log",
    conda:
        "../envs/debate-audit.yaml"
    params:
        settings={
            **AUDIT_SETTINGS,
            "confidence_levels": AUDIT["confidence_levels"],
            "sweep_epsilons": AUDIT["sweep_epsilons"],
            "sweep_epsilon_percentiles": AUDIT["sweep_epsilon_percentiles"],
        },
        sweeps_version=SWEEPS_VERSION,
        library=library_code("audit_sweeps"),
    script:
        "../workflow/scripts/audit_sweeps.py"


rule audit_figures:
    input:
        summaries=expand(
            "results/audit/{dataset}/summary.parquet", dataset=AUDIT_DATASETS
        ),
        records=expand(
            "results/audit/{dataset}/records.parquet", dataset=AUDIT_DATASETS
        ),
        confidence=expand(
            "results/audit/{dataset}/sweep_confidence.parquet", dataset=AUDIT_DATASETS
        ),
        epsilon=expand(
            "results/audit/{dataset}/sweep_epsilon.parquet", dataset=AUDIT_DATASETS
        ),
        pool_reports=expand(
            "results/paraphrase/{dataset}/{pool}.report.parquet",
            dataset=AUDIT_DATASETS,
            pool=PARAPHRASE_POOLS,
        ),
    output:
        cr=report(
            "results/audit/figures/cr.png",
            caption="../report/captions/audit_cr.rst",
            category="ER-Audit",
            subcategory="3. Audit",
            labels={"item": "counterexample ratio"},
        ),
        confidence=report(
            "results/audit/figures/bound_vs_confidence.png",
            caption="../report/captions/audit_bound_vs_confidence.rst",
            category="ER-Audit",
            subcategory="3. Audit",
            labels={"item": "bound vs. confidence"},
        ),
        scatter=report(
            "results/audit/figures/p_qh_vs_delta_max.png",
            caption="../report/captions/audit_p_qh_vs_delta_max.rst",
            category="ER-Audit",
            subcategory="3. Audit",
            labels={"item": "P(q_h) vs. max Delta"},
        ),
        epsilon=report(
            "results/audit/figures/bound_vs_epsilon.png",
            caption="../report/captions/audit_bound_vs_epsilon.rst",
            category="ER-Audit",
            subcategory="3. Audit",
            labels={"item": "bound vs. epsilon"},
        ),
        report="results/audit/summary.md",
        summary_csv=report(
            "results/audit/summary.csv",
            caption="../report/captions/audit_summary.rst",
            category="ER-Audit",
            subcategory="3. Audit",
            labels={"item": "summary per dataset and verifier"},
        ),
        # the SVG twin of each figure (the PNGs are in the report)
        cr_svg="results/audit/figures/cr.svg",
        confidence_svg="results/audit/figures/bound_vs_confidence.svg",
        scatter_svg="results/audit/figures/p_qh_vs_delta_max.svg",
        epsilon_svg="results/audit/figures/bound_vs_epsilon.svg",
    log:
        "logs/audit/figures.log",
    conda:
        "../envs/debate-audit.yaml"
    params:
        figures_version=FIGURES_VERSION,
        library=library_code("audit_figures"),
    script:
        "../workflow/scripts/audit_figures.py"


# Table 3 reads only this run's benchmark records (runtime_benchmarks in rules/common.smk).
rule audit_runtime:
    input:
        report="results/audit/summary.md",
        benchmarks=runtime_benchmarks,
    output:
        markdown="results/audit/table3_runtime.md",
        csv=report(
            "results/audit/table3_runtime.csv",
            caption="../report/captions/audit_runtime.rst",
            category="ER-Audit",
            subcategory="4. Runtime",
            labels={"table": "Table 3"},
        ),
        parquet="results/audit/table3_runtime.parquet",
    log:
        "logs/audit/runtime.log",
    conda:
        "../envs/debate-audit.yaml"
    params:
        # only the folder the benchmark inputs lie under (it names each job's stage); nothing is read from it
        benchmarks="benchmarks/rules",
        library=library_code("audit_runtime"),
    script:
        "../workflow/scripts/audit_runtime.py"


ALL_TARGETS.extend(["results/audit/summary.md", "results/audit/table3_runtime.md"])
