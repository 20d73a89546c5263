from pathlib import Path

from debate_audit.config_check import dataset_source, used_models
from debate_audit.models.spec import ModelSpec

# Each rules/*.smk appends the final outputs of its stage; rule all asks for them.
ALL_TARGETS = []

# Only the models some experiment uses (an overlay's merge may keep others under `models:`).
MODEL_SPECS = {
    name: ModelSpec.from_config(name, config["models"][name])
    for name in used_models(config)
}

DATASETS = ["truthfulqa", "quality_h", "gpqa_h"]


wildcard_constraints:
    model="|".join(MODEL_SPECS),
    dataset="|".join(DATASETS),


def model_spec(name):
    if name not in MODEL_SPECS:
        raise ValueError(f"model {name!r} is not defined under 'models:' in the config")
    return MODEL_SPECS[name]


def model_dir(name):
    return f"resources/models/{name}"


def model_fingerprint(name):
    return f"resources/models/{name}/fingerprint.json"


def local_input(dataset, key):
    """A dataset location as a rule input when it is a local file; URLs are fetched by the loader."""
    location = config["datasets"][dataset].get(key)
    return [] if location is None or "://" in location else [location]


def source_location(input_value, dataset, key):
    """What the loader reads: the local input file, else the configured URL (or None)."""
    return str(input_value) if input_value else config["datasets"][dataset].get(key)
