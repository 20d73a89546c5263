from debate_audit.eraudit.runtime import runtime_table
from debate_audit.logging import rule_context

with rule_context(snakemake):
    runtime_table(
        benchmarks=snakemake.params.benchmarks,
        files=snakemake.input.benchmarks,
        markdown=snakemake.output.markdown,
        csv=snakemake.output.csv,
        parquet=snakemake.output.parquet,
    )
