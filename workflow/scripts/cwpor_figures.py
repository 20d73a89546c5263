from debate_audit.cwpor.figures import draw_figures
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    draw_figures(
        metrics=snakemake.input.metrics,
        breakdowns=snakemake.input.breakdowns,
        out_dir=snakemake.params.out_dir,
        level=snakemake.params.level,
        headline_por=snakemake.params.headline_por,
    )
