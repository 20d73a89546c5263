from debate_audit.eraudit.verifier.table1 import evaluate_verifier
from debate_audit.models.loading import ModelRef
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    evaluate_verifier(
        pairs=snakemake.input.pairs,
        split=snakemake.input.split,
        model=ModelRef.from_params(snakemake.params.model),
        out=snakemake.output.scores,
        dataset=snakemake.wildcards.dataset,
        verifier=snakemake.params.verifier_name,
        cache=snakemake.params.cache,
        readout=snakemake.params.readout,
        labels=snakemake.params.labels,
    )
