from snakemake.utils import min_version, validate


min_version("9.0")


configfile: "config/config.yaml"


validate(config, "config/schema.yaml")


include: "rules/common.smk"
include: "rules/models.smk"
include: "rules/data.smk"


rule all:
    input:
        ALL_TARGETS,
    default_target: True
