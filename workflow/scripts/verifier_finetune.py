from debate_audit.eraudit.verifier.finetune import FinetuneSettings, finetune_verifier
from debate_audit.models.loading import ModelRef
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    finetune_verifier(
        selected=snakemake.input.selected,
        pairs=snakemake.input.pairs,
        split=snakemake.input.split,
        base=ModelRef.from_params(snakemake.params.base),
        out_dir=snakemake.params.out_dir,
        curve_out=snakemake.output.curve,
        dataset=snakemake.wildcards.dataset,
        variant=snakemake.params.verifier_name,
        settings=FinetuneSettings(**snakemake.params.settings, **snakemake.params.distributed),
        readout=snakemake.params.readout,
        labels=snakemake.params.labels,
        # [] unless verifier.lm_target is adjudication
        adjudications=snakemake.input.adjudications or None,
    )
