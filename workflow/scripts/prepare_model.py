from debate_audit.logging import to_log
from debate_audit.models.prepare import prepare_model
from debate_audit.models.spec import ModelSpec

with to_log(snakemake.log[0]):
    spec = dict(snakemake.params.spec)
    prepare_model(ModelSpec(**spec), snakemake.params.out_dir, snakemake.params.tokenizer_dir)
