from debate_audit.eraudit.debate.release import import_release
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    import_release(
        list(snakemake.params.rows),
        snakemake.input.pairs,
        snakemake.output.selected,
        snakemake.output.rejected,
        dataset=snakemake.wildcards.dataset,
        mode=snakemake.wildcards.debate_mode,
    )
