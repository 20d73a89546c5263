# Where a run's files go and where its datasets come from: the run root and its results/, logs/,
# benchmarks/, data/ and verifier directories, the list of final targets every rule file appends to, the
# datasets (the three of the papers and your own, datasets.own) with the inputs their prepare rules read,
# and the check that no existing path blocks an output. Included first: every other rule file builds its
# paths from these.
from pathlib import Path

from debate_audit.eraudit.common.brought import own_datasets
from debate_audit.runtime.runs import run_root
from debate_audit.tools.config_check import (
    check_output_paths,
    dataset_source,
    location_source,
)

# Where this run's files go. A named run (config `run`) keeps everything that depends on its configuration
# under runs/<run>/; unnamed, these are results/, logs/, ... as they always were (src/debate_audit/runtime/runs.py).
# The rules' paths all start with one of them, but for what every run shares: the prepared models
# (model_dir: resources/models/, with prepare_model's log and benchmark) and the call cache (config `cache`).
RUN_ROOT = run_root(config["run"])
RESULTS = f"{RUN_ROOT}results"
LOGS = f"{RUN_ROOT}logs"
BENCHMARKS = f"{RUN_ROOT}benchmarks/rules"
DATA = f"{RUN_ROOT}data"  # prepared datasets: what they hold follows `datasets:`
VERIFIERS = f"{RUN_ROOT}resources/verifiers"  # fine-tuned verifiers (and V_base's copy)

# Each rules/*.smk appends the final outputs of its stage; rule all asks for them.
ALL_TARGETS = []

DATASETS = ["truthfulqa", "quality_h", "gpqa_h"]
# Your own datasets (config `datasets.own`: a pairs file each, data/own_pairs.py), audited with models you bring.
OWN_DATASETS = own_datasets(config)


def local_input(dataset, key):
    """A dataset location as a rule input when it is a local file; URLs are fetched by the loader."""
    location = config["datasets"][dataset].get(key)
    return [] if location is None or "://" in location else [location]


def own_location(name):
    """The pairs file of your own dataset `name` (datasets.own): a path or URL."""
    return config["datasets"]["own"][name]["pairs"]


def own_input(name):
    """As local_input, for your own dataset's pairs file."""
    location = own_location(name)
    return [] if "://" in location else [location]


def source_location(input_value, dataset, key):
    """What the loader reads: the local input file, else the configured URL (or None)."""
    return str(input_value) if input_value else config["datasets"][dataset].get(key)


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
