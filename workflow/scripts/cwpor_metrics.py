from debate_audit.cwpor.metrics import compute_metrics
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    compute_metrics(
        list(snakemake.input.judgments),
        snakemake.output.metrics,
        snakemake.output.breakdowns,
        resamples=snakemake.params.resamples,
        level=snakemake.params.level,
        seed=snakemake.params.seed,
    )
