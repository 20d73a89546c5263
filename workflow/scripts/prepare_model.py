from debate_audit.models.prepare import prepare_model
from debate_audit.models.spec import ModelSpec
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    spec = dict(snakemake.params.spec)
    prepare_model(ModelSpec(**spec), snakemake.params.out_dir, snakemake.params.tokenizer_dir)
