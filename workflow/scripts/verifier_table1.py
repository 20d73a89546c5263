from debate_audit.eraudit.verifier.table1 import build_table1
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    build_table1(
        evals=list(snakemake.input.scores),
        out=snakemake.output.table,
        markdown=snakemake.output.markdown,
        csv=snakemake.output.csv,
    )
