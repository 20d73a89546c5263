from debate_audit.cwpor.calibration import CalibrationSettings
from debate_audit.cwpor.tables import write_tables
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    write_tables(
        metrics=snakemake.input.metrics,
        calibration=snakemake.input.calibration,
        calibration_settings=CalibrationSettings(**snakemake.params.calibration),
        judgments=list(snakemake.input.judgments),
        responses=list(snakemake.input.responses),
        questions=snakemake.input.questions,
        summary_md=snakemake.output.summary_md,
        summary_csv=snakemake.output.summary_csv,
        examples_md=snakemake.output.examples,
        level=snakemake.params.level,
        headline_por=snakemake.params.headline_por,
        example_categories=snakemake.params.example_categories,
        examples_per_category=snakemake.params.examples_per_category,
    )
