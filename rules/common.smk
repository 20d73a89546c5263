from pathlib import Path

from debate_audit.config_check import check_output_paths, dataset_source, used_models
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
        raise ValueError(
            f"model {name!r} is not used by any experiment (or not defined under 'models:')"
        )
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


# Table 3 (audit_runtime): the benchmark records of this run's model-bound jobs as inputs, so no stale
# record of another configuration under benchmarks/rules/ gets in. prepare_model is left out: a model
# prepared by an earlier run, or linked in, has no record here and must not be prepared again for a table.
def runtime_benchmarks(wildcards):
    # Called when the DAG is built, after every rules/*.smk has defined its rules and lists.
    datasets = config["verifier"]["datasets"]
    cells = [
        (rules.cwpor_debate, CWPOR_CELLS),
        (rules.cwpor_judge, CWPOR_CELLS),
        *(
            [
                (
                    rules.debate_generate,
                    dict(dataset=datasets, debate_mode=DEBATE_MODES),
                ),
                (rules.debate_select, dict(dataset=datasets, debate_mode=DEBATE_MODES)),
            ]
            if DEBATE_TRANSCRIPTS["source"] == "generate"
            else []
        ),
        (rules.verifier_finetune, dict(dataset=datasets, variant=VERIFIER_VARIANTS)),
        (rules.verifier_evaluate, dict(dataset=datasets, verifier=VERIFIERS)),
        (rules.paraphrase_search, dict(dataset=AUDIT_DATASETS)),
        (
            rules.paraphrase_test,
            dict(dataset=AUDIT_DATASETS, generator=PARAPHRASE_TEST_GENERATORS),
        ),
        (
            rules.audit_scores,
            dict(dataset=AUDIT_DATASETS, checkpoint=AUDIT_CHECKPOINTS),
        ),
    ]
    return [path for rule, wcs in cells for path in expand(rule.benchmark, **wcs)]


def check_outputs(workflow):
    """Fail naming any existing output path that is a directory, a dangling link or unreadable."""
    patterns, roots = [], []
    for step in workflow.rules:
        for f in [
            *step.output,
            *([step.benchmark] if step.benchmark else []),
        ]:
            patterns.append((f.regex(), f.is_directory))
            roots.append(Path(f.constant_prefix() or ".").parts[0])
    check_output_paths(patterns, roots)


def tokenizer_input(wc):
    """A `source: random` model borrows the tokenizer of another prepared model."""
    spec = model_spec(wc.model)
    return [model_fingerprint(spec.tokenizer)] if spec.source == "random" else []


def release_transcripts(dataset, mode):
    """The configured release files (paths or URLs) of one dataset and debate mode."""
    return list(DEBATE_TRANSCRIPTS["release"][dataset][mode])


def release_transcript_inputs(dataset, mode):
    return [p for p in release_transcripts(dataset, mode) if "://" not in p]
