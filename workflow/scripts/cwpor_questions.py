from debate_audit.cwpor.questions import select_questions
from debate_audit.logging import to_log

with to_log(snakemake.log[0]):
    select_questions(
        snakemake.input.dataset,
        snakemake.output.questions,
        subset=snakemake.params.subset,
        seed=snakemake.params.seed,
    )
