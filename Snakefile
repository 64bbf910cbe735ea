# phonetrain: the study as a workflow. Thin by design: compose the sweep (rules/common.smk),
# include one .smk per stage, and ask for the report.
#
#   snakemake --cores 2 all
#   snakemake --cores 2 all --config 'overrides=["sweep=test", "measure.iterations=20"]'
#
# Overrides are Hydra override strings (docs/workflow.md, "Overrides"). Any --cores N is safe: a local
# measurement runs alone on this host (resources, rules/common.smk: "Scheduling").
from snakemake.utils import min_version

min_version("9.0")


include: "rules/common.smk"
include: "rules/build.smk"
include: "rules/gemm.smk"
include: "rules/deploy.smk"
include: "rules/train.smk"
include: "rules/profile.smk"
include: "rules/aggregate.smk"
include: "rules/report.smk"


rule all:
    default_target: True
    input:
        REPORT_FILES,


onstart:
    start_of_study()


onsuccess:
    end_of_study(log)


onerror:
    partial_report(log)
