from debate_audit.cwpor.calibration import CalibrationSettings, compute_calibration
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    compute_calibration(
        list(snakemake.input.judgments),
        snakemake.output.table,
        snakemake.output.bins,
        snakemake.output.markdown,
        settings=CalibrationSettings(**snakemake.params.settings),
        resamples=snakemake.params.resamples,
        level=snakemake.params.level,
        seed=snakemake.params.seed,
    )
