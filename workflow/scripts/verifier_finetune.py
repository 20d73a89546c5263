from debate_audit.eraudit.finetune import FinetuneSettings, finetune_verifier
from debate_audit.logging import to_log

with to_log(snakemake.log[0]):
    finetune_verifier(
        selected=snakemake.input.selected,
        pairs=snakemake.input.pairs,
        split=snakemake.input.split,
        base_dir=snakemake.params.base_dir,
        out_dir=snakemake.params.out_dir,
        curve_out=snakemake.output.curve,
        dataset=snakemake.wildcards.dataset,
        variant=snakemake.wildcards.variant,
        settings=FinetuneSettings(**snakemake.params.settings),
        device=snakemake.params.device,
        readout=snakemake.params.readout,
        # [] unless verifier.lm_target is adjudication
        adjudications=snakemake.input.adjudications or None,
    )
