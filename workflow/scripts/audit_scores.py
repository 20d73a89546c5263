from debate_audit.eraudit.audit.scoring import score_checkpoint
from debate_audit.models.loading import ModelRef
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    score_checkpoint(
        pairs=snakemake.input.pairs,
        paraphrases=list(snakemake.input.pools),
        reports=list(snakemake.input.reports),
        model=ModelRef.from_params(snakemake.params.model),
        out=snakemake.output.scores,
        device_time_out=snakemake.output.device_time,
        dataset=snakemake.wildcards.dataset,
        checkpoint=snakemake.params.verifier_name,
        readout=snakemake.params.readout,
        cache=snakemake.params.cache,
        labels=snakemake.params.labels,
        # models you bring (rules/audited_models.smk): their fine-tuning is not this workflow's
        trained_here=snakemake.params.get("trained_here", True),
    )
