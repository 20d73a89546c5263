from debate_audit.eraudit.table1 import evaluate_verifier
from debate_audit.logging import to_log

with to_log(snakemake.log[0]):
    evaluate_verifier(
        pairs=snakemake.input.pairs,
        split=snakemake.input.split,
        model_dir=snakemake.params.model_dir,
        out=snakemake.output.scores,
        dataset=snakemake.wildcards.dataset,
        verifier=snakemake.params.verifier_name,
        cache=snakemake.params.cache,
        batch_size=snakemake.params.batch_size,
        device=snakemake.params.device,
        readout=snakemake.params.readout,
        dtype=snakemake.params.dtype,
        labels=snakemake.params.labels,
    )
