from debate_audit.eraudit.debate.gcg_pool import merge_pool
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    merge_pool(
        candidates=snakemake.input.candidates,
        pairs=snakemake.input.pairs,
        parts=list(snakemake.input.parts),
        pool_out=snakemake.output.pool,
        suffixes_out=snakemake.output.suffixes,
        pool=snakemake.params.pool,
    )
