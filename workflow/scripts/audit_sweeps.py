from debate_audit.eraudit.audit import AuditSettings, audit_sweeps
from debate_audit.logging import to_log

with to_log(snakemake.log[0]):
    audit_sweeps(
        scores=list(snakemake.input.scores),
        confidence_out=snakemake.output.confidence,
        epsilon_out=snakemake.output.epsilon,
        settings=AuditSettings(**snakemake.params.settings),
        labels=snakemake.params.labels,
    )
