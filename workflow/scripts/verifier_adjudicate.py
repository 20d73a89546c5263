from debate_audit.eraudit.verifier.adjudication import AdjudicationSettings, adjudicate_transcripts
from debate_audit.models.loading import ModelRef
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    adjudicate_transcripts(
        selected=snakemake.input.selected,
        pairs=snakemake.input.pairs,
        split=snakemake.input.split,
        model=ModelRef.from_params(snakemake.params.model),
        out=snakemake.output.adjudications,
        rejected_out=snakemake.output.rejected,
        settings=AdjudicationSettings(**snakemake.params.settings),
        cache=snakemake.params.cache,
    )
