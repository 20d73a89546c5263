rule prepare_truthfulqa:
    input:
        path=local_input("truthfulqa", "path"),
    output:
        table=f"{DATA}/truthfulqa.parquet",
        rejected=f"{DATA}/truthfulqa.rejected.parquet",
    log:
        f"{LOGS}/data/prepare_truthfulqa.log",
    params:
        path=lambda wc, input: source_location(input.path, "truthfulqa", "path"),
        # location + content hash: a changed or edited source reruns this rule
        source=dataset_source(config, "truthfulqa", "path"),
        hf_id=config["datasets"]["truthfulqa"].get("hf_id"),
        revision=config["datasets"]["truthfulqa"].get("revision"),
        library=library_code("prepare_truthfulqa"),
    script:
        "../workflow/scripts/prepare_truthfulqa.py"


rule prepare_quality_h:
    input:
        pairs=local_input("quality_h", "pairs"),
        stories=local_input("quality_h", "stories"),
    output:
        table=f"{DATA}/quality_h.parquet",
        rejected=f"{DATA}/quality_h.rejected.parquet",
    log:
        f"{LOGS}/data/prepare_quality_h.log",
    params:
        pairs=lambda wc, input: source_location(input.pairs, "quality_h", "pairs"),
        stories=lambda wc, input: source_location(input.stories, "quality_h", "stories"),
        source={
            key: dataset_source(config, "quality_h", key)
            for key in ("pairs", "stories")
        },
        library=library_code("prepare_quality_h"),
    script:
        "../workflow/scripts/prepare_quality_h.py"


rule prepare_gpqa_h:
    input:
        pairs=local_input("gpqa_h", "pairs"),
        contexts=local_input("gpqa_h", "contexts"),
    output:
        table=f"{DATA}/gpqa_h.parquet",
        rejected=f"{DATA}/gpqa_h.rejected.parquet",
    log:
        f"{LOGS}/data/prepare_gpqa_h.log",
    params:
        pairs=lambda wc, input: source_location(input.pairs, "gpqa_h", "pairs"),
        contexts=lambda wc, input: source_location(input.contexts, "gpqa_h", "contexts"),
        source={
            key: dataset_source(config, "gpqa_h", key) for key in ("pairs", "contexts")
        },
        library=library_code("prepare_gpqa_h"),
    script:
        "../workflow/scripts/prepare_gpqa_h.py"


# Your own dataset (config `datasets.own.<name>.pairs`): the QuALITY-H / GPQA-H fields and a context per pair,
# every field type-checked, each bad row in the rejected-rows file (data/own_pairs.py).
rule prepare_own_pairs:
    input:
        pairs=lambda wc: own_input(wc.own),
    output:
        table=f"{DATA}/{{own}}.parquet",
        rejected=f"{DATA}/{{own}}.rejected.parquet",
    log:
        f"{LOGS}/data/prepare_own_{{own}}.log",
    params:
        pairs=lambda wc, input: (
            str(input.pairs) if input.pairs else own_location(wc.own)
        ),
        # location + content hash: a changed or edited file reruns this rule
        source=lambda wc: location_source(own_location(wc.own)),
        library=library_code("prepare_own_pairs"),
    script:
        "../workflow/scripts/prepare_own_pairs.py"


ALL_TARGETS.extend(expand(f"{DATA}/{{dataset}}.parquet", dataset=DATASETS))
ALL_TARGETS.extend(expand(f"{DATA}/{{own}}.parquet", own=OWN_DATASETS))
# MODEL_SPECS holds only the models an experiment uses: an unused one is never prepared.
ALL_TARGETS.extend(model_fingerprint(name) for name in MODEL_SPECS)
