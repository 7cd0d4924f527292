# condeval: reproduce CReL (and later the CLIPScore and trust-score papers) from raw data to figures.
# Entry point; the rules live in workflow/rules/, one file per stage.

configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/crel.smk"
include: "workflow/rules/baselines.smk"
include: "workflow/rules/report.smk"


wildcard_constraints:
    dataset="linear|nonlinear",
    alpha=r"0\.\d+|\de-\d+",
    tau=r"0\.\d+|\de-\d+",
    method="crel|feldman|dqr|pcp",


rule all:
    input:
        crel_synthetic_targets(),
    default_target: True
