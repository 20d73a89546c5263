from debate_audit.eraudit.table1 import build_table1
from debate_audit.logging import to_log

with to_log(snakemake.log[0]):
    build_table1(
        evals=list(snakemake.input.scores),
        out=snakemake.output.table,
        markdown=snakemake.output.markdown,
        csv=snakemake.output.csv,
    )
