from debate_audit.eraudit.debate.splits import split_pairs
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    split_pairs(
        pairs=snakemake.input.pairs,
        out=snakemake.output.split,
        eval_fraction=snakemake.params.eval_fraction,
        seed=snakemake.params.seed,
        source=snakemake.params.source,
        release=snakemake.params.release,
        overlap=snakemake.params.overlap,
    )
