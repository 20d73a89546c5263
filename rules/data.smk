rule prepare_truthfulqa:
    input:
        lambda wc: (
            [config["datasets"]["truthfulqa"]["path"]]
            if "path" in config["datasets"]["truthfulqa"]
            and "://" not in config["datasets"]["truthfulqa"]["path"]
            else []
        ),
    output:
        table="data/truthfulqa.parquet",
        rejected="data/truthfulqa.rejected.parquet",
    log:
        "logs/data/prepare_truthfulqa.log",
    params:
        path=config["datasets"]["truthfulqa"].get("path"),
        hf_id=config["datasets"]["truthfulqa"].get("hf_id"),
        revision=config["datasets"]["truthfulqa"].get("revision"),
    script:
        "../workflow/scripts/prepare_truthfulqa.py"


def local_inputs(*locations):
    return [loc for loc in locations if "://" not in loc]


rule prepare_quality_h:
    input:
        local_inputs(
            config["datasets"]["quality_h"]["pairs"],
            config["datasets"]["quality_h"]["stories"],
        ),
    output:
        table="data/quality_h.parquet",
        rejected="data/quality_h.rejected.parquet",
    log:
        "logs/data/prepare_quality_h.log",
    params:
        pairs=config["datasets"]["quality_h"]["pairs"],
        stories=config["datasets"]["quality_h"]["stories"],
    script:
        "../workflow/scripts/prepare_quality_h.py"


rule prepare_gpqa_h:
    input:
        local_inputs(
            config["datasets"]["gpqa_h"]["pairs"],
            config["datasets"]["gpqa_h"]["contexts"],
        ),
    output:
        table="data/gpqa_h.parquet",
        rejected="data/gpqa_h.rejected.parquet",
    log:
        "logs/data/prepare_gpqa_h.log",
    params:
        pairs=config["datasets"]["gpqa_h"]["pairs"],
        contexts=config["datasets"]["gpqa_h"]["contexts"],
    script:
        "../workflow/scripts/prepare_gpqa_h.py"


ALL_TARGETS.extend(expand("data/{dataset}.parquet", dataset=DATASETS))
ALL_TARGETS.extend(model_fingerprint(name) for name in MODEL_SPECS)
