from debate_audit.runtime.job import rule_context
from debate_audit.views.browse import write_browser

with rule_context(snakemake):
    write_browser(
        snakemake.output.page,
        questions=snakemake.input.questions,
        responses=list(snakemake.input.responses),
        judgments=list(snakemake.input.judgments),
        eraudit=snakemake.params.eraudit,
        headline=snakemake.params.headline,
    )
