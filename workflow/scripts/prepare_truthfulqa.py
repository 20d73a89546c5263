from debate_audit.data.truthfulqa import prepare_truthfulqa
from debate_audit.logging import to_log

with to_log(snakemake.log[0]):
    prepare_truthfulqa(
        snakemake.output.table,
        snakemake.output.rejected,
        path=snakemake.params.path,
        hf_id=snakemake.params.hf_id,
        revision=snakemake.params.revision,
    )
