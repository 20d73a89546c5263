from debate_audit.cwpor.judge import judge_debates
from debate_audit.models.loading import ModelRef
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    judge_debates(
        snakemake.input.questions,
        snakemake.input.responses,
        snakemake.output.judgments,
        judge=ModelRef.from_params(snakemake.params.judge),
        template=snakemake.params.template,
        max_new_tokens=snakemake.params.max_new_tokens,
        cache=snakemake.params.cache,
    )
