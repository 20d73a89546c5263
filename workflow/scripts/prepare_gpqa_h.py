from debate_audit.data.pairs import prepare_gpqa_h
from debate_audit.logging import to_log

with to_log(snakemake.log[0]):
    prepare_gpqa_h(
        snakemake.params.pairs,
        snakemake.params.contexts,
        snakemake.output.table,
        snakemake.output.rejected,
    )
