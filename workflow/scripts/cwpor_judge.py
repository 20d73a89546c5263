from debate_audit.cwpor.judge import judge_files
from debate_audit.models.loading import ModelRef
from debate_audit.runtime.job import rule_context


def files(paths):
    """A path, or the list of a job gathering a model's word limits (cwpor.job_split)."""
    return [paths] if isinstance(paths, str) else list(paths)


with rule_context(snakemake):
    judge_files(
        snakemake.input.questions,
        list(zip(files(snakemake.input.responses), files(snakemake.output.judgments), strict=True)),
        judge=ModelRef.from_params(snakemake.params.judge),
        template=snakemake.params.template,
        max_new_tokens=snakemake.params.max_new_tokens,
        cache=snakemake.params.cache,
    )
