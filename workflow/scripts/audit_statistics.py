from debate_audit.eraudit.audit import AuditSettings, audit_statistics
from debate_audit.logging import to_log

with to_log(snakemake.log[0]):
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
