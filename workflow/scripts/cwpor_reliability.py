from debate_audit.cwpor.figures import draw_reliability
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    draw_reliability(
        table=snakemake.input.table,
        bins=snakemake.input.bins,
        signals=snakemake.params.signals,
        out_dir=snakemake.params.out_dir,
    )
