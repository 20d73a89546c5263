from debate_audit.eraudit.table1 import evaluate_verifier
from debate_audit.logging import rule_context

with rule_context(snakemake):
    evaluate_verifier(
        pairs=snakemake.input.pairs,
        split=snakemake.input.split,
        model_dir=snakemake.params.model_dir,
        out=snakemake.output.scores,
        dataset=snakemake.wildcards.dataset,
        verifier=snakemake.wildcards.verifier,
        cache=snakemake.params.cache,
        batch_size=snakemake.params.batch_size,
        device=snakemake.params.device,
        readout=snakemake.params.readout,
        dtype=snakemake.params.dtype,
    )
