from debate_audit.eraudit.common.readout import resolve_readout_of
from debate_audit.runtime.job import rule_context
from debate_audit.views.inspect_logs import write_logs

with rule_context(snakemake):
    write_logs(
        out_dir=snakemake.output.logs,
        questions=snakemake.input.questions,
        responses=list(snakemake.input.responses),
        judgments=list(snakemake.input.judgments),
        readouts=list(snakemake.input.readouts),
        pairs=dict(zip(snakemake.params.datasets, snakemake.input.pairs)),
        audits=snakemake.params.audits,
        readout={
            arch: resolve_readout_of(mode, directory) for arch, (mode, directory) in snakemake.params.readouts.items()
        },
    )
