from debate_audit.eraudit.debate.gcg import GCGSettings
from debate_audit.eraudit.debate.gcg_pool import optimise_range
from debate_audit.models.loading import ModelRef
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    optimise_range(
        candidates=snakemake.input.candidates,
        pairs=snakemake.input.pairs,
        model=ModelRef.from_params(snakemake.params.model),
        records_out=snakemake.output.records,
        part=int(snakemake.wildcards.part),
        parts=int(snakemake.wildcards.parts),
        settings=GCGSettings.from_config(snakemake.params.settings),
        readout=snakemake.params.readout,
        order=snakemake.params.order,
        order_seed=snakemake.params.order_seed,
        cache=snakemake.params.cache,
        batch_size=snakemake.params.batch_size,
    )
