from debate_audit.eraudit.audit.sweeps import audit_sweeps
from debate_audit.eraudit.audit.verdicts import AuditSettings
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    audit_sweeps(
        scores=list(snakemake.input.scores),
        confidence_out=snakemake.output.confidence,
        epsilon_out=snakemake.output.epsilon,
        settings=AuditSettings(**snakemake.params.settings),
        labels=snakemake.params.labels,
    )
