from debate_audit.eraudit.audit import score_checkpoint
from debate_audit.logging import rule_context

with rule_context(snakemake):
    score_checkpoint(
        pairs=snakemake.input.pairs,
        paraphrases=list(snakemake.input.pools),
        reports=list(snakemake.input.reports),
        model_dir=snakemake.params.model_dir,
        out=snakemake.output.scores,
        dataset=snakemake.wildcards.dataset,
        checkpoint=snakemake.wildcards.checkpoint,
        batch_size=snakemake.params.batch_size,
        device=snakemake.params.device,
        readout=snakemake.params.readout,
        dtype=snakemake.params.dtype,
        cache=snakemake.params.cache,
    )
