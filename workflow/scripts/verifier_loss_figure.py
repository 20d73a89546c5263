from debate_audit.eraudit.verifier.curves import plot_loss_curves
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    plot_loss_curves(
        curves=list(snakemake.input.curves),
        png=snakemake.output.png,
        svg=snakemake.output.svg,
        dataset=snakemake.wildcards.dataset,
        title=snakemake.params.title,
    )
