from debate_audit.eraudit.paraphrase.pools import PoolSettings, build_pool
from debate_audit.models.loading import ModelRef
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    build_pool(
        pairs=snakemake.input.pairs,
        split=snakemake.input.split,
        dataset=snakemake.wildcards.dataset,
        pool=snakemake.params.pool,
        generator=ModelRef.from_params(snakemake.params.model),
        out=snakemake.output.paraphrases,
        rejected=snakemake.output.rejected,
        report=snakemake.output.report,
        settings=PoolSettings.from_config(
            snakemake.params.settings,
            snakemake.params.min_similarity,
            prompt=snakemake.params.prompt,
            filter=snakemake.params.filter,
            truncated=snakemake.params.truncated,
        ),
        splits=snakemake.params.splits,
        max_pairs=snakemake.params.max_pairs,
        cache=snakemake.params.cache,
    )
