from debate_audit.eraudit.audit.figures import audit_figures
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    audit_figures(
        summaries=list(snakemake.input.summaries),
        records=list(snakemake.input.records),
        steps=list(snakemake.input.steps),
        confidence=list(snakemake.input.confidence),
        epsilon=list(snakemake.input.epsilon),
        pool_reports=list(snakemake.input.pool_reports),
        cr_png=snakemake.output.cr,
        confidence_png=snakemake.output.confidence,
        scatter_png=snakemake.output.scatter,
        epsilon_png=snakemake.output.epsilon,
        bounds_png=snakemake.output.bounds,
        report_md=snakemake.output.report,
        summary_csv=snakemake.output.summary_csv,
        cr_svg=snakemake.output.cr_svg,
        confidence_svg=snakemake.output.confidence_svg,
        scatter_svg=snakemake.output.scatter_svg,
        epsilon_svg=snakemake.output.epsilon_svg,
        bounds_svg=snakemake.output.bounds_svg,
        headline=snakemake.params.headline,
        characteristic=list(snakemake.input.characteristic),
        stability=list(snakemake.input.stability),
        characteristic_png=snakemake.output.characteristic,
        characteristic_svg=snakemake.output.characteristic_svg,
        characteristic_csv=snakemake.output.characteristic_csv,
        brought=snakemake.params.brought,
    )
