from snakemake.utils import min_version, validate

min_version("9.0")


configfile: "config/config.yaml"


validate(config, "config/schema.yaml")


include: "rules/common.smk"
include: "rules/models.smk"
include: "rules/data.smk"
include: "rules/cwpor.smk"
include: "rules/debate.smk"
include: "rules/verifier.smk"
include: "rules/paraphrase.smk"
include: "rules/audit.smk"


rule all:
    default_target: True
    input:
        ALL_TARGETS,
