# ER-Audit part 2: paraphrase pools of every audited q_h (one search pool, one test pool per generator).

from debate_audit.eraudit.paraphrase.pools import pool_settings

PARAPHRASE = config["paraphrase"]
PARAPHRASE_TEST_GENERATORS = list(PARAPHRASE["test"]["generators"])
PARAPHRASE_POOLS = ["search", *(f"test_{g}" for g in PARAPHRASE_TEST_GENERATORS)]
PARAPHRASE_OUT = f"{RESULTS}/er_audit/paraphrase"


wildcard_constraints:
    generator=one_of(PARAPHRASE_TEST_GENERATORS),


# Every setting of a pool, shared by the search and test rules; wc.get("generator") is None for search.
PARAPHRASE_PARAMS = dict(
    pool=lambda wc: pool_settings(PARAPHRASE, wc.get("generator"))[0],
    model=lambda wc, resources: model_ref(
        pool_settings(PARAPHRASE, wc.get("generator"))[1]
    ),
    numbers=lambda wc: model_numbers(pool_settings(PARAPHRASE, wc.get("generator"))[1]),
    # pools are sampled: another engine draws other samples
    engine=lambda wc: sampling_engine(
        pool_settings(PARAPHRASE, wc.get("generator"))[1]
    ),
    settings=lambda wc: pool_settings(PARAPHRASE, wc.get("generator"))[2],
    min_similarity=PARAPHRASE["min_similarity"],
    prompt=PARAPHRASE["prompt"],
    filter=PARAPHRASE["filter"],
    truncated=PARAPHRASE["truncated"],
    # only a dataset the verifiers train on has a split (pool_split)
    splits=lambda wc: PARAPHRASE["splits"] if wc.dataset in ER_DATASETS else None,
    max_pairs=PARAPHRASE["max_pairs"],
    cache=config["cache"],
)


rule paraphrase_search:
    input:
        pairs=f"{DATA}/{{dataset}}.parquet",
        split=pool_split,
        model=model_fingerprint(PARAPHRASE["search"]["generator"]),
    output:
        paraphrases=f"{PARAPHRASE_OUT}/{{dataset}}/search.parquet",
        rejected=f"{PARAPHRASE_OUT}/{{dataset}}/search.rejected.parquet",
        report=f"{PARAPHRASE_OUT}/{{dataset}}/search.report.parquet",
    log:
        f"{LOGS}/paraphrase/search_{{dataset}}.log",
    benchmark:
        f"{BENCHMARKS}/paraphrase/search_{{dataset}}.tsv"
    resources:
        gpu=lambda wc: generation_gpu(pool_settings(PARAPHRASE, wc.get("generator"))[1]),
        mem_mb=lambda wc: model_mem_mb(
            pool_settings(PARAPHRASE, wc.get("generator"))[1], scores=False
        ),
        runtime=job_runtime("paraphrase_search"),
        cpus_per_task=lambda wc: model_cpus(
            pool_settings(PARAPHRASE, wc.get("generator"))[1], scores=False
        ),
    params:
        **PARAPHRASE_PARAMS,
        library=library_code("paraphrase_pool"),
    script:
        "../workflow/scripts/paraphrase_pool.py"


rule paraphrase_test:
    input:
        pairs=f"{DATA}/{{dataset}}.parquet",
        split=pool_split,
        model=lambda wc: model_fingerprint(pool_settings(PARAPHRASE, wc.generator)[1]),
    output:
        paraphrases=f"{PARAPHRASE_OUT}/{{dataset}}/test_{{generator}}.parquet",
        rejected=f"{PARAPHRASE_OUT}/{{dataset}}/test_{{generator}}.rejected.parquet",
        report=f"{PARAPHRASE_OUT}/{{dataset}}/test_{{generator}}.report.parquet",
    log:
        f"{LOGS}/paraphrase/test_{{dataset}}_{{generator}}.log",
    benchmark:
        f"{BENCHMARKS}/paraphrase/test_{{dataset}}_{{generator}}.tsv"
    resources:
        gpu=lambda wc: generation_gpu(pool_settings(PARAPHRASE, wc.get("generator"))[1]),
        mem_mb=lambda wc: model_mem_mb(
            pool_settings(PARAPHRASE, wc.get("generator"))[1], scores=False
        ),
        runtime=job_runtime("paraphrase_test"),
        cpus_per_task=lambda wc: model_cpus(
            pool_settings(PARAPHRASE, wc.get("generator"))[1], scores=False
        ),
    params:
        **PARAPHRASE_PARAMS,
        library=library_code("paraphrase_pool"),
    script:
        "../workflow/scripts/paraphrase_pool.py"


ALL_TARGETS.extend(
    expand(
        f"{PARAPHRASE_OUT}/{{dataset}}/{{pool}}.report.parquet",
        dataset=AUDIT_DATASETS,
        pool=PARAPHRASE_POOLS,
    )
)
