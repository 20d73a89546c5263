from debate_audit.cwpor.cross_judge import compute_cross_judge
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    compute_cross_judge(
        list(snakemake.input.judgments),
        snakemake.output.matrix,
        snakemake.output.contrast,
        snakemake.output.markdown,
        families=snakemake.params.families,
        resamples=snakemake.params.resamples,
        level=snakemake.params.level,
        seed=snakemake.params.seed,
    )
