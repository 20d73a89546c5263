from debate_audit.cwpor.questions import select_questions
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    select_questions(
        snakemake.input.dataset,
        snakemake.output.questions,
        subset=snakemake.params.subset,
        seed=snakemake.params.seed,
    )
