# ER-Audit part 2: scores (model calls) -> Delta, counterexample search, sequential test -> sweeps -> figures.
# Only audit_scores calls a model; changing epsilon, eta, tau, r or the betting bound's c and w reruns the statistics
# rules alone, and the headline bound only the figures and the browser.

import dataclasses

from debate_audit.eraudit.audit.power import design_from_config

AUDIT = config["audit"]
AUDIT_OUT = f"{RESULTS}/er_audit/audit"
# audits of models you bring (rules/audited_models.smk): <audit>/<dataset>/ below it
BROUGHT_OUT = f"{AUDIT_OUT}/models"
# The planned audits (one per architecture x dataset x setting: length, L_qh weight) and the checkpoints
# their audit_scores jobs read (AUDIT_SETTING_CELLS, AUDIT_SCORE_CELLS in rules/grid.smk).


# AuditSettings fields (eraudit/audit/verdicts.py); the sweep grids go to audit_sweeps only, so changing one reruns the
# sweeps and not the statistics.
AUDIT_SETTINGS = dict(
    test_pools=PARAPHRASE_TEST_GENERATORS,
    targets=AUDIT["targets"],
    kappa=AUDIT["kappa"],
    probability_decimals=AUDIT["probability_decimals"],
    epsilon=AUDIT["epsilon"],
    epsilon_percentile=AUDIT["epsilon_percentile"],
    eta=AUDIT["eta"],
    tau=AUDIT["tau"],
    stop_at_first_counterexample=AUDIT["stop_at_first_counterexample"],
    tv_r=AUDIT["tv_r"],
    betting_c=AUDIT["betting_c"],
    betting_w=AUDIT["betting_w"],
)

# The audit as configured, for its operating characteristic (AuditDesign, eraudit/audit/power.py), and the
# characteristic's settings; the planning target (`make plan` only) stays out, so changing it reruns nothing.
AUDIT_DESIGN = dataclasses.asdict(design_from_config(config))
CHARACTERISTIC = {
    k: v for k, v in AUDIT["operating_characteristic"].items() if k != "target"
}


rule audit_scores:
    input:
        pairs=f"{DATA}/{{dataset}}.parquet",
        pools=expand(
            f"{PARAPHRASE_OUT}/{{{{dataset}}}}/{{pool}}.parquet",
            pool=PARAPHRASE_POOLS,
        ),
        # every pair the paraphrase stage selected, also those whose pools came out empty
        reports=expand(
            f"{PARAPHRASE_OUT}/{{{{dataset}}}}/{{pool}}.report.parquet",
            pool=PARAPHRASE_POOLS,
        ),
        model=checkpoint_fingerprint,
    output:
        scores=f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{verifier}}/scores.parquet",
        # seconds of the scoring calls per audit stage (Table 3)
        device_time=f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{verifier}}/device_time.parquet",
    log:
        f"{LOGS}/audit/scores_{{architecture}}_{{dataset}}_{{verifier}}.log",
    benchmark:
        f"{BENCHMARKS}/audit/scores_{{architecture}}_{{dataset}}_{{verifier}}.tsv"
    resources:
        gpu=1,
        mem_mb=lambda wc: model_mem_mb(wc.architecture, generates=False),
        runtime=job_runtime("audit_scores"),
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
        library=library_code("audit_scores"),
    script:
        "../workflow/scripts/audit_scores.py"


rule audit_statistics:
    input:
        scores=audit_setting_scores,
        split=f"{DEBATE_OUT}/{{dataset}}/split.parquet",
    output:
        deltas=f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/deltas.parquet",
        records=f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/records.parquet",
        generators=f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/generators.parquet",
        steps=f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/steps.parquet",
        summary=f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/summary.parquet",
    log:
        f"{LOGS}/audit/statistics_{{architecture}}_{{dataset}}_{{setting}}.log",
    params:
        settings=AUDIT_SETTINGS,
        labels=lambda wc: AUDIT_SETTINGS_GRID[wc.setting].labels(wc.architecture),
        library=library_code("audit_statistics"),
    script:
        "../workflow/scripts/audit_statistics.py"


rule audit_sweeps:
    input:
        scores=audit_setting_scores,
    output:
        confidence=f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/sweep_confidence.parquet",
        epsilon=f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/sweep_epsilon.parquet",
    log:
        f"{LOGS}/audit/sweeps_{{architecture}}_{{dataset}}_{{setting}}.log",
    params:
        settings={
            **AUDIT_SETTINGS,
            "confidence_levels": AUDIT["confidence_levels"],
            "sweep_epsilons": AUDIT["sweep_epsilons"],
            "sweep_epsilon_percentiles": AUDIT["sweep_epsilon_percentiles"],
        },
        labels=lambda wc: AUDIT_SETTINGS_GRID[wc.setting].labels(wc.architecture),
        library=library_code("audit_sweeps"),
    script:
        "../workflow/scripts/audit_sweeps.py"


# What the audit could have found at these pools, eta and tau (the configured pools and this cell's as
# scored), and how stable each of its verdicts is to the paraphrases drawn; new files, no model call.
rule audit_power:
    input:
        deltas=f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/deltas.parquet",
        records=f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/records.parquet",
        generators=f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/generators.parquet",
    output:
        characteristic=f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/operating_characteristic.parquet",
        stability=f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/stability.parquet",
    log:
        f"{LOGS}/audit/power_{{architecture}}_{{dataset}}_{{setting}}.log",
    params:
        design=AUDIT_DESIGN,
        test_pools=PARAPHRASE_TEST_GENERATORS,
        characteristic=CHARACTERISTIC,
        labels=lambda wc: AUDIT_SETTINGS_GRID[wc.setting].labels(wc.architecture),
        library=library_code("audit_power"),
    script:
        "../workflow/scripts/audit_power.py"


rule audit_figures:
    input:
        summaries=cell_paths(
            f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/summary.parquet",
            AUDIT_SETTING_CELLS,
        )
        + cell_paths(
            f"{BROUGHT_OUT}/{{audit}}/{{dataset}}/summary.parquet", BROUGHT_CELLS
        ),
        records=cell_paths(
            f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/records.parquet",
            AUDIT_SETTING_CELLS,
        )
        + cell_paths(
            f"{BROUGHT_OUT}/{{audit}}/{{dataset}}/records.parquet", BROUGHT_CELLS
        ),
        steps=cell_paths(
            f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/steps.parquet",
            AUDIT_SETTING_CELLS,
        )
        + cell_paths(
            f"{BROUGHT_OUT}/{{audit}}/{{dataset}}/steps.parquet", BROUGHT_CELLS
        ),
        confidence=cell_paths(
            f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/sweep_confidence.parquet",
            AUDIT_SETTING_CELLS,
        )
        + cell_paths(
            f"{BROUGHT_OUT}/{{audit}}/{{dataset}}/sweep_confidence.parquet",
            BROUGHT_CELLS,
        ),
        epsilon=cell_paths(
            f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/sweep_epsilon.parquet",
            AUDIT_SETTING_CELLS,
        )
        + cell_paths(
            f"{BROUGHT_OUT}/{{audit}}/{{dataset}}/sweep_epsilon.parquet", BROUGHT_CELLS
        ),
        pool_reports=expand(
            f"{PARAPHRASE_OUT}/{{dataset}}/{{pool}}.report.parquet",
            dataset=AUDIT_DATASETS,
            pool=PARAPHRASE_POOLS,
        ),
        characteristic=cell_paths(
            f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/operating_characteristic.parquet",
            AUDIT_SETTING_CELLS,
        ),
        stability=cell_paths(
            f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/stability.parquet",
            AUDIT_SETTING_CELLS,
        ),
    output:
        cr=report(
            f"{AUDIT_OUT}/figures/cr.png",
            caption="../report/captions/audit_cr.rst",
            category="ER-Audit",
            subcategory="3. Audit",
            labels={"item": "counterexample ratio"},
        ),
        confidence=report(
            f"{AUDIT_OUT}/figures/bound_vs_confidence.png",
            caption="../report/captions/audit_bound_vs_confidence.rst",
            category="ER-Audit",
            subcategory="3. Audit",
            labels={"item": "bound vs. confidence"},
        ),
        scatter=report(
            f"{AUDIT_OUT}/figures/p_qh_vs_delta_max.png",
            caption="../report/captions/audit_p_qh_vs_delta_max.rst",
            category="ER-Audit",
            subcategory="3. Audit",
            labels={"item": "P(q_h) vs. max Delta"},
        ),
        epsilon=report(
            f"{AUDIT_OUT}/figures/bound_vs_epsilon.png",
            caption="../report/captions/audit_bound_vs_epsilon.rst",
            category="ER-Audit",
            subcategory="3. Audit",
            labels={"item": "bound vs. epsilon"},
        ),
        bounds=report(
            f"{AUDIT_OUT}/figures/bounds_over_t.png",
            caption="../report/captions/audit_bounds_over_t.rst",
            category="ER-Audit",
            subcategory="3. Audit",
            labels={"item": "both bounds over t"},
        ),
        characteristic=report(
            f"{AUDIT_OUT}/figures/operating_characteristic.png",
            caption="../report/captions/audit_operating_characteristic.rst",
            category="ER-Audit",
            subcategory="3. Audit",
            labels={"item": "operating characteristic"},
        ),
        characteristic_csv=report(
            f"{AUDIT_OUT}/operating_characteristic.csv",
            caption="../report/captions/audit_operating_characteristic_table.rst",
            category="ER-Audit",
            subcategory="3. Audit",
            labels={"item": "operating characteristic per p"},
        ),
        report=f"{AUDIT_OUT}/summary.md",
        summary_csv=report(
            f"{AUDIT_OUT}/summary.csv",
            caption="../report/captions/audit_summary.rst",
            category="ER-Audit",
            subcategory="3. Audit",
            labels={"item": "summary per dataset and verifier"},
        ),
        # the SVG twin of each figure (the PNGs are in the report)
        cr_svg=f"{AUDIT_OUT}/figures/cr.svg",
        confidence_svg=f"{AUDIT_OUT}/figures/bound_vs_confidence.svg",
        scatter_svg=f"{AUDIT_OUT}/figures/p_qh_vs_delta_max.svg",
        epsilon_svg=f"{AUDIT_OUT}/figures/bound_vs_epsilon.svg",
        bounds_svg=f"{AUDIT_OUT}/figures/bounds_over_t.svg",
        characteristic_svg=f"{AUDIT_OUT}/figures/operating_characteristic.svg",
    log:
        f"{LOGS}/audit/figures.log",
    params:
        # which bound summary.md and the figures lead with: the statistics compute both either way
        headline=AUDIT["headline_bound"],
        # the audits of models you bring, as summary.md names them
        brought={
            a.name: {"base": a.base, "targets": list(a.targets)}
            for a in BROUGHT.values()
        },
        library=library_code("audit_figures"),
    script:
        "../workflow/scripts/audit_figures.py"


# Table 3: GPU-seconds per hidden question from the scoring jobs' device time and the audits' records, and
# wall time per job from this run's benchmark records only (runtime_benchmarks in rules/stage_inputs.smk).
rule audit_runtime:
    input:
        report=f"{AUDIT_OUT}/summary.md",
        benchmarks=runtime_benchmarks,
        device_times=cell_paths(
            f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{verifier}}/device_time.parquet",
            AUDIT_SCORE_CELLS,
        )
        + cell_paths(
            f"{BROUGHT_OUT}/{{audit}}/{{dataset}}/{{model}}/device_time.parquet",
            BROUGHT_SCORE_CELLS,
        ),
        records=cell_paths(
            f"{AUDIT_OUT}/{{architecture}}/{{dataset}}/{{setting}}/records.parquet",
            AUDIT_SETTING_CELLS,
        )
        + cell_paths(
            f"{BROUGHT_OUT}/{{audit}}/{{dataset}}/records.parquet", BROUGHT_CELLS
        ),
    output:
        gpu_csv=report(
            f"{AUDIT_OUT}/table3_gpu_seconds.csv",
            caption="../report/captions/audit_gpu_seconds.rst",
            category="ER-Audit",
            subcategory="4. Runtime",
            labels={"table": "Table 3 (GPU-seconds per q_h)"},
        ),
        gpu_parquet=f"{AUDIT_OUT}/table3_gpu_seconds.parquet",
        markdown=f"{AUDIT_OUT}/table3_runtime.md",
        csv=report(
            f"{AUDIT_OUT}/table3_runtime.csv",
            caption="../report/captions/audit_runtime.rst",
            category="ER-Audit",
            subcategory="4. Runtime",
            labels={"table": "Table 3 (wall time per job)"},
        ),
        parquet=f"{AUDIT_OUT}/table3_runtime.parquet",
    log:
        f"{LOGS}/audit/runtime.log",
    params:
        # only the folder the benchmark inputs lie under (it names each job's stage); nothing is read from it
        benchmarks=BENCHMARKS,
        library=library_code("audit_runtime"),
    script:
        "../workflow/scripts/audit_runtime.py"


# the audit's outputs, where anything is audited (ER-Audit part 1 off and no model brought: nothing)
if AUDIT_SETTING_CELLS or BROUGHT_CELLS:
    ALL_TARGETS.extend(
        [
            f"{AUDIT_OUT}/summary.md",
            f"{AUDIT_OUT}/table3_runtime.md",
            f"{AUDIT_OUT}/table3_gpu_seconds.csv",
        ]
    )
