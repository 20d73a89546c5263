from debate_audit.cwpor.rebuttal import generate_rebuttals
from debate_audit.models.loading import ModelRef
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    generate_rebuttals(
        snakemake.input.questions,
        snakemake.input.round1,
        snakemake.output.debate,
        model=snakemake.wildcards.model,
        protocol_name=snakemake.wildcards.protocol,
        verbosity=int(snakemake.wildcards.verbosity),
        agents={role: ModelRef.from_params(ref) for role, ref in snakemake.params.agents.items()},
        template=snakemake.params.template,
        rebuttal=snakemake.params.rebuttal,
        max_new_tokens=snakemake.params.max_new_tokens,
        cache=snakemake.params.cache,
    )
