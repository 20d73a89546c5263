from snakemake.utils import min_version, validate

from debate_audit.tools.config_check import check_config
from debate_audit.runtime.run_config import write_run_config

min_version("9.0")


configfile: "config/config.yaml"


# The schema and every cross-key rule, each error naming its key, before any job is planned; and no key-like
# setting on the command line, which Snakemake's run header would print (runtime/masking.py).
check_config(
    config,
    f"{workflow.basedir}/config/schema.yaml",
    overrides=workflow.config_settings.config,
)
validate(config, "config/schema.yaml")  # fills in the schema's defaults


report: "report/workflow.rst"


# The names the stages share, then the stages. include: runs each file in order in one namespace, so a file's
# top level may use only what the files above it define (a function's body reads names when it is called).
include: "rules/paths.smk"
include: "rules/model_refs.smk"
include: "rules/grid.smk"
include: "rules/job_sizes.smk"
include: "rules/stage_inputs.smk"
include: "rules/models.smk"
include: "rules/data.smk"
include: "rules/cwpor.smk"
include: "rules/cwpor_analysis.smk"
include: "rules/debate.smk"
include: "rules/verifier.smk"
include: "rules/paraphrase.smk"
include: "rules/audit.smk"
include: "rules/audited_models.smk"
include: "rules/browse.smk"


rule all:
    default_target: True
    input:
        ALL_TARGETS,


# An existing directory or unreadable file where an output should be is named before any job runs.
check_outputs(workflow)


# Once per run that has jobs to do (never in a dry run, nor inside a cluster job): the merged config beside
# the results, <RESULTS>/runs/<start time>.yaml and <RESULTS>/config.yaml (src/debate_audit/runtime/run_config.py).
onstart:
    write_run_config(
        config,
        configfiles=workflow.configfiles,
        overlays=workflow.config_settings.configfiles,
        overrides=workflow.config_settings.config,
        results=RESULTS,
    )
