from debate_audit.eraudit.splits import split_pairs
from debate_audit.logging import to_log

with to_log(snakemake.log[0]):
    split_pairs(
        pairs=snakemake.input.pairs,
        out=snakemake.output.split,
        eval_fraction=snakemake.params.eval_fraction,
        seed=snakemake.params.seed,
        source=snakemake.params.source,
        release=snakemake.params.release,
        overlap=snakemake.params.overlap,
    )
