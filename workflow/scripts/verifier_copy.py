from debate_audit.eraudit.verifier.finetune import copy_verifier
from debate_audit.models.loading import ModelRef
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    copy_verifier(
        ModelRef.from_params(snakemake.params.base),
        snakemake.params.out_dir,
        architecture=snakemake.wildcards.architecture,
    )
