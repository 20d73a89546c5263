from debate_audit.eraudit.audit.runtime import runtime_table
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    runtime_table(
        benchmarks=snakemake.params.benchmarks,
        files=snakemake.input.benchmarks,
        device_times=snakemake.input.device_times,
        records=snakemake.input.records,
        gpu_csv=snakemake.output.gpu_csv,
        gpu_parquet=snakemake.output.gpu_parquet,
        markdown=snakemake.output.markdown,
        csv=snakemake.output.csv,
        parquet=snakemake.output.parquet,
    )
