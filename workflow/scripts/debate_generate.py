from debate_audit.eraudit.debate.debates import DebateSettings, generate_debates
from debate_audit.models.loading import ModelRef
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    generate_debates(
        pairs=snakemake.input.pairs,
        split=snakemake.input.split,
        model=ModelRef.from_params(snakemake.params.model),
        out=snakemake.output.candidates,
        dataset=snakemake.wildcards.dataset,
        mode=snakemake.wildcards.debate_mode,
        settings=DebateSettings(**snakemake.params.settings),
        splits=list(snakemake.params.splits),
        max_items=snakemake.params.max_items,
        cache=snakemake.params.cache,
    )
