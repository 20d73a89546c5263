from debate_audit.data.pairs import prepare_quality_h
from debate_audit.logging import to_log

with to_log(snakemake.log[0]):
    prepare_quality_h(
        snakemake.params.pairs,
        snakemake.params.stories,
        snakemake.output.table,
        snakemake.output.rejected,
    )
