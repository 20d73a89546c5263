# The models some experiment uses (config `models:`) and how the rules refer to one: its spec, its prepared
# directory and fingerprint (an input), the tokenizer a `source: random` model borrows, the one
# untracked param a model-bound script opens it with (model_ref), and the tracked params that rerun what used
# it when a setting changes (model_numbers, sampling_engine). Warns of a hub model not pinned to a commit and
# of a local model written again after it was prepared.
from pathlib import Path

from snakemake.logging import logger

from debate_audit.models.loading import ModelRef
from debate_audit.models.pins import unpinned_warnings
from debate_audit.models.spec import ModelSpec
from debate_audit.runtime.masking import masked
from debate_audit.tools.config_check import stale_local_warnings, used_models

# Only the models some experiment uses (an overlay's merge may keep others under `models:`).
MODEL_SPECS = {
    name: ModelSpec.from_config(name, config["models"][name])
    for name in used_models(config)
}
# A hub model at a branch or tag can download other weights in a later run (models/pins.py pins them).
if unpinned_warnings(MODEL_SPECS.values()):
    logger.warning("\n".join(unpinned_warnings(MODEL_SPECS.values())))


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


# A local model directory written again after it was prepared (a model you bring, retrained in place).
STALE_LOCAL = stale_local_warnings(MODEL_SPECS.values(), lambda n: Path(model_dir(n)))
if STALE_LOCAL:
    logger.warning("\n".join(STALE_LOCAL))


def tokenizer_input(wc):
    """A `source: random` model borrows the tokenizer of another prepared model."""
    spec = model_spec(wc.model)
    return [model_fingerprint(spec.tokenizer)] if spec.source == "random" else []


# A model spec's settings are of two kinds (models/spec.py). Those that define its numbers (NUMBER_KEYS)
# are, through model_numbers, a tracked param of every model-bound job, so a change reruns what used the
# model; those of them that define its files (FILE_KEYS) are prepare_model's params too. How it runs (RUN_KEYS: device, batch size, backend,
# server, engine settings, concurrency) reaches a script inside its ModelRef, passed through a params
# function that takes `resources`: Snakemake counts such params as derived from the job's resources and
# leaves them out of its params rerun trigger, so changing a run setting reruns nothing.
def model_ref(name, directory=None):
    """The one param a model-bound job's script gets for model `name` (ModelRef.to_params): the prepared
    directory, or `directory` (a fine-tuned verifier of base model `name`), and the spec's inference fields.
    Pass it through `lambda wc, resources: model_ref(...)` (untracked, see above)."""
    return ModelRef.from_spec(
        model_spec(name), directory or model_dir(name)
    ).to_params()


def model_numbers(*names):
    """The settings that define the numbers of the models `names` (spec.NUMBER_KEYS), a tracked param.
    Snakemake writes a tracked param's text into .snakemake/metadata/, so a value under a key-like name
    (a provider model's `request.metadata.api_key`, ...) is masked: no script reads this param.
    """
    return {
        name: masked(model_spec(name).number_settings())
        for name in dict.fromkeys(names)
    }


def sampling_engine(name):
    """Who samples for model `name`: a tracked param of the rules that sample (paraphrase pools, best-of-K
    debates), since another engine draws from other random streams. Greedy rules leave it out.
    """
    spec = model_spec(name)
    return "api" if spec.source == "openai" else spec.generation_backend
