from debate_audit.eraudit.audit.verdicts import AuditSettings, audit_statistics
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    audit_statistics(
        scores=list(snakemake.input.scores),
        split=snakemake.input.split,
        deltas_out=snakemake.output.deltas,
        records_out=snakemake.output.records,
        generators_out=snakemake.output.generators,
        steps_out=snakemake.output.steps,
        summary_out=snakemake.output.summary,
        settings=AuditSettings(**snakemake.params.settings),
        labels=snakemake.params.labels,
    )
