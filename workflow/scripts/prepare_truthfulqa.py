from debate_audit.data.truthfulqa import prepare_truthfulqa
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    prepare_truthfulqa(
        snakemake.output.table,
        snakemake.output.rejected,
        path=snakemake.params.path,
        hf_id=snakemake.params.hf_id,
        revision=snakemake.params.revision,
    )
