from debate_audit.eraudit.debate.selection import select_debates
from debate_audit.models.loading import ModelRef
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    select_debates(
        candidates=snakemake.input.candidates,
        pairs=snakemake.input.pairs,
        model=ModelRef.from_params(snakemake.params.model),
        scores_out=snakemake.output.scores,
        selected_out=snakemake.output.selected,
        mode=snakemake.wildcards.debate_mode,
        leak_ngram=snakemake.params.leak_ngram,
        leak_threshold=snakemake.params.leak_threshold,
        hard_terms=list(snakemake.params.hard_terms),
        max_unverified_quote_fraction=snakemake.params.max_unverified_quote_fraction,
        cache=snakemake.params.cache,
        readout=snakemake.params.readout,
        order=snakemake.params.order,
        order_seed=snakemake.params.order_seed,
        honest_candidates=snakemake.input.honest or None,
    )
