from debate_audit.cwpor.debates import generate_debates
from debate_audit.models.loading import ModelRef
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    generate_debates(
        snakemake.input.questions,
        snakemake.output.responses,
        model=snakemake.wildcards.model,
        agents={role: ModelRef.from_params(ref) for role, ref in snakemake.params.agents.items()},
        verbosity=int(snakemake.wildcards.verbosity),
        template=snakemake.params.template,
        max_new_tokens=snakemake.params.max_new_tokens,
        cache=snakemake.params.cache,
    )
