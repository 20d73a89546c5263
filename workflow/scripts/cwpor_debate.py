from debate_audit.cwpor.debates import WordLimit, debates_at_limits
from debate_audit.models.loading import ModelRef
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    budgets = snakemake.params.max_new_tokens
    if isinstance(budgets, dict):  # one job per model (cwpor.job_split): outputs in the order of the word limits
        limits = [
            WordLimit(v, budgets[v], out) for v, out in zip(sorted(budgets), snakemake.output.responses, strict=True)
        ]
    else:
        limits = [WordLimit(int(snakemake.wildcards.verbosity), budgets, snakemake.output.responses)]
    debates_at_limits(
        snakemake.input.questions,
        limits,
        model=snakemake.wildcards.model,
        agents={role: ModelRef.from_params(ref) for role, ref in snakemake.params.agents.items()},
        template=snakemake.params.template,
        cache=snakemake.params.cache,
    )
