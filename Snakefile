# condeval: three papers on judging conditional generative models, from raw data to figures.
# One folder of rules per paper track (workflow/rules/<track>/), each with its own config
# section (`crel:`, later `crc:`, `trust:`) and schema (workflow/schemas/<track>.schema.yaml).

# The offline default, unless configs are named on the command line: `--configfile config/paper.yaml`
# then stands alone, rather than being merged into the miniature's settings (which would, e.g., add
# the miniature's captioners to the paper's four).
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"


# The COCO-format data and encoders shared by the image-text tracks (config `coco:`, `encoders:`).
if "coco" in config:

    include: "workflow/rules/shared/common.smk"
    include: "workflow/rules/shared/coco.smk"
    include: "workflow/rules/shared/encoders.smk"
    include: "workflow/rules/shared/features.smk"


include: "workflow/rules/crel/common.smk"
include: "workflow/rules/crel/data.smk"
include: "workflow/rules/crel/train.smk"
include: "workflow/rules/crel/calibrate.smk"
include: "workflow/rules/crel/baselines.smk"
include: "workflow/rules/crel/report.smk"
include: "workflow/rules/crel/ablations.smk"
include: "workflow/rules/crel/scaling.smk"


# CReL on image-to-text (config `crel.image_to_text:`), on the shared COCO data and encoders.
if "image_to_text" in config.get("crel", {}):

    include: "workflow/rules/crel/i2t_common.smk"
    include: "workflow/rules/crel/i2t.smk"
    include: "workflow/rules/crel/i2t_report.smk"


# Conformal risk control for CLIPScore (config `crc:`), on the shared COCO data and CLIP.
if "crc" in config:

    include: "workflow/rules/crc/common.smk"
    include: "workflow/rules/crc/data.smk"
    include: "workflow/rules/crc/sample.smk"
    include: "workflow/rules/crc/evaluate.smk"
    include: "workflow/rules/crc/report.smk"


rule crel:
    """CReL on the synthetic data: Table 1, Figs. 2 and 5, CReL-rho, LGM cost (DVC stage `crel`)."""
    input:
        crel_synthetic_targets(),


rule crel_i2t:
    """CReL on image-to-text (Section 4.2): Table 2, Figs. 3, 4 and 6, reliability cards."""
    input:
        i2t_targets() if "image_to_text" in config.get("crel", {}) else [],


rule crc:
    """Conformal risk control for CLIPScore: Tables 1–5, Fig. 1, word examples (DVC stage `crc`)."""
    input:
        crc_targets() if "crc" in config else [],


rule all:
    """Every track's default targets (`make run`)."""
    input:
        rules.crel.input,
        rules.crel_i2t.input,
        rules.crc.input,
    default_target: True


rule ablations:
    """Appendix C of CReL on the synthetic data (`make ablations`)."""
    input:
        crel_ablation_targets(),


rule scaling:
    """Appendix E of CReL: calibration runtime against the latent dimension (`make scaling`)."""
    input:
        crel_scaling_targets(),
