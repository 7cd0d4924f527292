# condeval: three papers on judging conditional generative models, from raw data to figures.
# One folder of rules per paper track (workflow/rules/<track>/), each with its own config
# section (`crel:`, later `crc:`, `trust:`) and schema (workflow/schemas/<track>.schema.yaml).

configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
include: "workflow/rules/crel/common.smk"
include: "workflow/rules/crel/data.smk"
include: "workflow/rules/crel/train.smk"
include: "workflow/rules/crel/calibrate.smk"
include: "workflow/rules/crel/baselines.smk"
include: "workflow/rules/crel/report.smk"
include: "workflow/rules/crel/ablations.smk"
include: "workflow/rules/crel/scaling.smk"


rule crel:
    """CReL on the synthetic data: Table 1, Figs. 2 and 5, CReL-rho, LGM cost (DVC stage `crel`)."""
    input:
        crel_synthetic_targets(),


rule all:
    """Every track's default targets (`make run`)."""
    input:
        rules.crel.input,
    default_target: True


rule ablations:
    """Appendix C of CReL on the synthetic data (`make ablations`)."""
    input:
        crel_ablation_targets(),


rule scaling:
    """Appendix E of CReL: calibration runtime against the latent dimension (`make scaling`)."""
    input:
        crel_scaling_targets(),
