# condeval: three papers on judging conditional generative models, from raw data to figures.
# One folder of rules per paper track (workflow/rules/<track>/), each with its own config
# section (`crel:`, `crc:`, later `trust:`) and schema (workflow/schemas/<track>.schema.yaml).
# A track's rules are included only when its section is present, so a config holding one track
# runs on its own; shared rules (workflow/rules/shared/) name no track's outputs.

# The offline default, unless configs are named on the command line: `--configfile config/paper.yaml`
# then stands alone, rather than being merged into the miniature's settings (which would, e.g., add
# the miniature's captioners to the paper's four).
if not workflow.overwrite_configfiles:

    configfile: "config/config.yaml"


include: "workflow/rules/common.smk"
# Raw data in (config `fetch:`, the paper config): localrules that download each dataset and checkpoint first.
include: "workflow/rules/shared/fetch.smk"


# The COCO-format data and encoders shared by the image-text tracks (config `coco:`, `encoders:`).
if "coco" in config:

    include: "workflow/rules/shared/common.smk"


# Each track's helpers first: they declare what the shared rules produce for them (e.g. the
# generated captions whose features shared/features.smk extracts) before those rules are defined.
if "crel" in config:

    include: "workflow/rules/crel/common.smk"

    # CReL on image-to-text (config `crel.image_to_text:`), on the shared COCO data and encoders.
    if "image_to_text" in config["crel"]:

        include: "workflow/rules/crel/i2t_common.smk"


# CReL on text-to-image (config `crel.text_to_image:`), on the shared COCO data, CLIP and DINOv2.
if "text_to_image" in config.get("crel", {}):

    include: "workflow/rules/crel/t2i_common.smk"


# Conformal risk control for CLIPScore (config `crc:`), on the shared COCO data and CLIP.
if "crc" in config:

    include: "workflow/rules/crc/common.smk"


# The trust score under compositional shift (config `trust:`), on CelebA and RxRx1 (or their miniatures).
if "trust" in config:

    include: "workflow/rules/trust/common.smk"


if "coco" in config:

    include: "workflow/rules/shared/coco.smk"
    include: "workflow/rules/shared/encoders.smk"
    include: "workflow/rules/shared/features.smk"


if "crel" in config:

    include: "workflow/rules/crel/data.smk"
    include: "workflow/rules/crel/train.smk"
    include: "workflow/rules/crel/calibrate.smk"
    include: "workflow/rules/crel/baselines.smk"
    include: "workflow/rules/crel/report.smk"
    include: "workflow/rules/crel/ablations.smk"
    include: "workflow/rules/crel/scaling.smk"

    declare_targets("crel", crel_synthetic_targets())
    declare_targets("ablations", crel_ablation_targets())
    declare_targets("scaling", crel_scaling_targets())
    if "image_to_text" in config["crel"]:

        include: "workflow/rules/crel/i2t.smk"
        include: "workflow/rules/crel/i2t_report.smk"

        declare_targets("crel_i2t", i2t_targets())
        declare_targets("crel_i2t_num_z0", i2t_num_z0_targets())


if "text_to_image" in config.get("crel", {}):

    include: "workflow/rules/crel/t2i.smk"

    declare_targets("crel_t2i", t2i_targets())
    declare_targets("crel_t2i_num_z0", t2i_num_z0_targets())


if "crc" in config:

    include: "workflow/rules/crc/data.smk"
    include: "workflow/rules/crc/sample.smk"
    include: "workflow/rules/crc/evaluate.smk"
    include: "workflow/rules/crc/report.smk"

    declare_targets("crc", crc_targets())


if "trust" in config:

    include: "workflow/rules/trust/data.smk"
    include: "workflow/rules/trust/extractors.smk"
    include: "workflow/rules/trust/generators.smk"
    include: "workflow/rules/trust/evaluate.smk"

    if "morphology" in config["trust"] and "rxrx1" in config["trust"]["datasets"]:

        include: "workflow/rules/trust/morphology_common.smk"
        include: "workflow/rules/trust/morphology.smk"

    if "translator" in config["trust"]:

        include: "workflow/rules/trust/translator_common.smk"
        include: "workflow/rules/trust/translator.smk"

    declare_targets("trust", trust_targets())


# Every rule is defined: refuse, in one message, configured data and checkpoints that are missing and no rule writes.
check_configured_inputs()


rule crel:
    """CReL on the synthetic data: Table 1, Figs. 2 and 5, CReL-rho, LGM cost (DVC stage `crel`)."""
    input:
        target_inputs("crel", section="crel"),


rule crel_i2t:
    """CReL on image-to-text (Section 4.2): Table 2, Figs. 3 and 4, reliability cards (Fig. 6: crel_i2t_num_z0)."""
    input:
        target_inputs("crel_i2t", section="crel.image_to_text"),


rule crel_t2i:
    """CReL on text-to-image (Section 4.3): Table 3, Fig. 11, the generators' signal (Fig. 7: crel_t2i_num_z0)."""
    input:
        target_inputs("crel_t2i", section="crel.text_to_image"),


rule crel_i2t_num_z0:
    """Opt-in ablation: Fig. 6, CReL-rho against num_z0 (crel.image_to_text.num_z0_curve)."""
    input:
        target_inputs("crel_i2t_num_z0", section="crel.image_to_text"),


rule crel_t2i_num_z0:
    """Opt-in ablation: Fig. 7, CReL-rho against num_z0 (crel.text_to_image.num_z0_curve)."""
    input:
        target_inputs("crel_t2i_num_z0", section="crel.text_to_image"),


rule crc:
    """Conformal risk control for CLIPScore: Tables 1–5, Fig. 1, word examples (DVC stage `crc`)."""
    input:
        target_inputs("crc", section="crc"),


rule trust:
    """The trust score: Section 5.1's tables and figures, CellProfiler's morphology and scoring during generation."""
    input:
        target_inputs("trust", section="trust"),


rule all:
    """Every configured track's default targets (`make run`)."""
    input:
        default_targets("crel", "crel_i2t", "crel_t2i", "crc", "trust"),
    default_target: True


rule ablations:
    """Appendix C of CReL on the synthetic data (`make ablations`)."""
    input:
        target_inputs("ablations", section="crel"),


rule scaling:
    """Appendix E of CReL: calibration runtime against the latent dimension (`make scaling`)."""
    input:
        target_inputs("scaling", section="crel"),
