# Audits of models you bring (config `audited_models`, eraudit/common/brought.py): a base and its targets, models
# this workflow did not train, through the trained verifiers' stages: the same paraphrase pools of each dataset,
# the same scoring, statistics and sweeps (the same scripts and library), and the same figures, summary, Table 3,
# browser and inspect logs (rules/audit.smk, rules/browse.smk read these cells too). Outputs under
# results/er_audit/audit/models/<audit>/<dataset>/.


rule audit_model_scores:
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
        model=lambda wc: model_fingerprint(wc.model),
    output:
        scores=f"{BROUGHT_OUT}/{{audit}}/{{dataset}}/{{model}}/scores.parquet",
        # seconds of the scoring calls per audit stage (Table 3)
        device_time=f"{BROUGHT_OUT}/{{audit}}/{{dataset}}/{{model}}/device_time.parquet",
    log:
        f"{LOGS}/audit/models/scores_{{audit}}_{{dataset}}_{{model}}.log",
    benchmark:
        f"{BENCHMARKS}/audit/models_scores_{{audit}}_{{dataset}}_{{model}}.tsv"
    resources:
        # a model behind an endpoint scores there: no GPU of this job's
        gpu=lambda wc: 0 if model_spec(wc.model).source == "openai" else 1,
        mem_mb=lambda wc: model_mem_mb(wc.model, generates=False),
        runtime=job_runtime("audit_model_scores"),
        cpus_per_task=lambda wc: model_cpus(wc.model, generates=False),
    params:
        model=lambda wc, resources: model_ref(wc.model),
        numbers=lambda wc: model_numbers(wc.model),
        verifier_name=lambda wc: BROUGHT[wc.audit].checkpoint(wc.model),
        labels=lambda wc: BROUGHT[wc.audit].labels(),
        readout=lambda wc: BROUGHT[wc.audit].readout_mode(config["verifier"]),
        trained_here=False,
        cache=config["cache"],
        library=library_code("audit_scores"),
    script:
        "../workflow/scripts/audit_scores.py"


rule audit_model_statistics:
    input:
        scores=brought_scores,
        # no part-1 split: no verifier of this workflow trained on these pairs
        split=[],
    output:
        deltas=f"{BROUGHT_OUT}/{{audit}}/{{dataset}}/deltas.parquet",
        records=f"{BROUGHT_OUT}/{{audit}}/{{dataset}}/records.parquet",
        generators=f"{BROUGHT_OUT}/{{audit}}/{{dataset}}/generators.parquet",
        steps=f"{BROUGHT_OUT}/{{audit}}/{{dataset}}/steps.parquet",
        summary=f"{BROUGHT_OUT}/{{audit}}/{{dataset}}/summary.parquet",
    log:
        f"{LOGS}/audit/models/statistics_{{audit}}_{{dataset}}.log",
    params:
        settings=lambda wc: BROUGHT[wc.audit].settings(AUDIT_SETTINGS),
        labels=lambda wc: BROUGHT[wc.audit].labels(),
        library=library_code("audit_statistics"),
    script:
        "../workflow/scripts/audit_statistics.py"


rule audit_model_sweeps:
    input:
        scores=brought_scores,
    output:
        confidence=f"{BROUGHT_OUT}/{{audit}}/{{dataset}}/sweep_confidence.parquet",
        epsilon=f"{BROUGHT_OUT}/{{audit}}/{{dataset}}/sweep_epsilon.parquet",
    log:
        f"{LOGS}/audit/models/sweeps_{{audit}}_{{dataset}}.log",
    params:
        settings=lambda wc: BROUGHT[wc.audit].settings(
            {
                **AUDIT_SETTINGS,
                "confidence_levels": AUDIT["confidence_levels"],
                "sweep_epsilons": AUDIT["sweep_epsilons"],
                "sweep_epsilon_percentiles": AUDIT["sweep_epsilon_percentiles"],
            }
        ),
        labels=lambda wc: BROUGHT[wc.audit].labels(),
        library=library_code("audit_sweeps"),
    script:
        "../workflow/scripts/audit_sweeps.py"
