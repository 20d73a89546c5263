from debate_audit.logging import to_log
from debate_audit.models import ModelSpec, prepare_model

with to_log(snakemake.log[0]):
    spec = dict(snakemake.params.spec)
    prepare_model(ModelSpec(**spec), snakemake.params.out_dir, snakemake.params.tokenizer_dir)
