# condeval: reproduce CReL (and later the CLIPScore and trust-score papers) from raw data to figures.
# Entry point; the rules live in workflow/rules/, one file per stage.

configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/data.smk"
include: "workflow/rules/train.smk"
include: "workflow/rules/crel.smk"
include: "workflow/rules/baselines.smk"
include: "workflow/rules/report.smk"
include: "workflow/rules/ablations.smk"
include: "workflow/rules/scaling.smk"


wildcard_constraints:
    dataset="linear|nonlinear",
    alpha=r"0\.\d+|\de-\d+",
    tau=r"0\.\d+|\de-\d+",
    method="crel|feldman|dqr|pcp",
    lgm=LGM_ID,
    seed=r"\d+",
    rseed=r"\d+",
    num_z0=r"\d+",
    table="|".join(ABLATION_TABLES),


rule all:
    input:
        crel_synthetic_targets(),
    default_target: True


rule ablations:
    """Appendix C of CReL on the synthetic data (`make ablations`)."""
    input:
        crel_ablation_targets(),


rule scaling:
    """Appendix E of CReL: calibration runtime against the latent dimension (`make scaling`)."""
    input:
        crel_scaling_targets(),
