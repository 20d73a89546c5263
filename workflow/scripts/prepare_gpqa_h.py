from debate_audit.data.pairs import prepare_gpqa_h
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    prepare_gpqa_h(
        snakemake.params.pairs,
        snakemake.params.contexts,
        snakemake.output.table,
        snakemake.output.rejected,
    )
