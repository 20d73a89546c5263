from debate_audit.cwpor.rebuttal import compute_rebuttal_effects
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    compute_rebuttal_effects(
        list(snakemake.input.single),
        list(snakemake.input.rebutted),
        snakemake.output.effects,
        snakemake.output.flips,
        snakemake.output.markdown,
        resamples=snakemake.params.resamples,
        level=snakemake.params.level,
        seed=snakemake.params.seed,
    )
