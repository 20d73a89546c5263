from debate_audit.eraudit.audit import audit_sweeps
from debate_audit.logging import to_log

with to_log(snakemake.log[0]):
    audit_sweeps(
        scores=list(snakemake.input.scores),
        confidence_out=snakemake.output.confidence,
        epsilon_out=snakemake.output.epsilon,
        test_pools=snakemake.params.test_pools,
        targets=snakemake.params.targets,
        kappa=snakemake.params.kappa,
        epsilon=snakemake.params.epsilon,
        epsilon_percentile=snakemake.params.epsilon_percentile,
        eta=snakemake.params.eta,
        tau=snakemake.params.tau,
        tv_r=snakemake.params.tv_r,
        confidence_levels=snakemake.params.confidence_levels,
        sweep_epsilons=snakemake.params.sweep_epsilons,
        sweep_epsilon_percentiles=snakemake.params.sweep_epsilon_percentiles,
    )
