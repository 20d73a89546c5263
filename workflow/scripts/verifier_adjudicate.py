from debate_audit.eraudit.adjudication import AdjudicationSettings, adjudicate_transcripts
from debate_audit.logging import to_log

with to_log(snakemake.log[0]):
    adjudicate_transcripts(
        selected=snakemake.input.selected,
        pairs=snakemake.input.pairs,
        split=snakemake.input.split,
        model_dir=snakemake.params.model_dir,
        out=snakemake.output.adjudications,
        rejected_out=snakemake.output.rejected,
        settings=AdjudicationSettings(**snakemake.params.settings),
        cache=snakemake.params.cache,
        spec=snakemake.params.spec,
    )
