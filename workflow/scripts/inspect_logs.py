from debate_audit.runtime.job import rule_context
from debate_audit.views.inspect_logs import write_logs

with rule_context(snakemake):
    write_logs(
        cwpor=snakemake.output.cwpor,
        verifiers=snakemake.output.verifiers,
        audit=snakemake.output.audit,
        questions=snakemake.input.questions,
        responses=list(snakemake.input.responses),
        judgments=list(snakemake.input.judgments),
        readouts=list(snakemake.input.readouts),
        pairs=dict(zip(snakemake.params.datasets, snakemake.input.pairs)),
        audits=snakemake.params.audits,
    )
