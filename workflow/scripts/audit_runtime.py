from debate_audit.eraudit.audit_figures import runtime_table
from debate_audit.logging import to_log

with to_log(snakemake.log[0]):
    runtime_table(
        benchmarks=snakemake.params.benchmarks,
        files=snakemake.input.benchmarks,
        markdown=snakemake.output.markdown,
        csv=snakemake.output.csv,
        parquet=snakemake.output.parquet,
    )
