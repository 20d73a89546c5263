from debate_audit.eraudit.debate.gcg import GCGSettings, optimise_candidates
from debate_audit.models.loading import ModelRef
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    optimise_candidates(
        candidates=snakemake.input.candidates,
        pairs=snakemake.input.pairs,
        model=ModelRef.from_params(snakemake.params.model),
        pool_out=snakemake.output.pool,
        suffixes_out=snakemake.output.suffixes,
        settings=GCGSettings.from_config(snakemake.params.settings),
        pool=snakemake.params.pool,
        readout=snakemake.params.readout,
        order=snakemake.params.order,
        order_seed=snakemake.params.order_seed,
        cache=snakemake.params.cache,
        batch_size=snakemake.params.batch_size,
    )
