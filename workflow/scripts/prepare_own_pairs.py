from debate_audit.data.own_pairs import prepare_own_pairs
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    prepare_own_pairs(
        snakemake.params.pairs,
        snakemake.wildcards.own,
        snakemake.output.table,
        snakemake.output.rejected,
    )
