from debate_audit.eraudit.audit.power import AuditDesign, CharacteristicSettings, audit_power
from debate_audit.runtime.job import rule_context

with rule_context(snakemake):
    audit_power(
        deltas=snakemake.input.deltas,
        records=snakemake.input.records,
        generators=snakemake.input.generators,
        characteristic_out=snakemake.output.characteristic,
        stability_out=snakemake.output.stability,
        design=AuditDesign(**snakemake.params.design),
        test_pools=snakemake.params.test_pools,
        settings=CharacteristicSettings(**snakemake.params.characteristic),
        labels=snakemake.params.labels,
    )
