from debate_audit.data.pairs import prepare_quality_h
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    prepare_quality_h(
        snakemake.params.pairs,
        snakemake.params.stories,
        snakemake.output.table,
        snakemake.output.rejected,
    )
