# The benchmarks of the CLIPScore risk-control track, as caption tables (one per benchmark).
#
#   (crc.miniature) crc_mini_*  ->  release files in their real formats under crc.data
#   crc_captions: the release files through the real loaders -> results/crc/captions/<benchmark>.parquet,
#                 and the rows they dropped, by file and reason -> results/crc/captions/<benchmark>.dropped.json
#
# With `crc.miniature`, mini FOIL-it, FOIL-nocaps, RichHF-18K and the judgment sets are written
# from the COCO world's val split (FOIL-it, judgments) or new scenes (FOIL-nocaps, RichHF-18K).
if "miniature" in CRC:

    rule crc_mini_foil_it:
        """FOIL-it's two files from the world's val split: each evaluation caption and its one-noun foil."""
        input:
            captions=coco_captions("val"),
        output:
            train=str(Path(CRC_DATA["foil_it"]["file"]).with_name("foilv1.0_train_2017.json")),
            test=str(Path(CRC_DATA["foil_it"]["file"]).with_name("foilv1.0_test_2017.json")),
        params:
            seed=CRC["miniature"]["seed"],
            images=canonical(CRC["miniature"]["foil_it"]) if "foil_it" in CRC["miniature"] else None,
        log:
            "logs/crc/mini_foil_it.log",
        conda:
            "../../../envs/analysis.yaml"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=10,
        script:
            "../../scripts/crc/mini_foil_it.py"

    rule crc_mini_foil_nocaps:
        """FOIL-nocaps' record list and images: new scenes in the in, near and out domains."""
        output:
            annotations=CRC_DATA["foil_nocaps"]["file"],
            images=directory(str(Path(CRC_DATA["foil_nocaps"]["file"]).with_name("images"))),
        params:
            sizes=canonical(CRC["miniature"]["foil_nocaps"]),
            novel_shapes=NOVEL_SHAPES,
            image_size=COCO["miniworld"]["image_size"],
            seed=CRC["miniature"]["seed"],
        log:
            "logs/crc/mini_foil_nocaps.log",
        conda:
            "../../../envs/analysis.yaml"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=10,
        script:
            "../../scripts/crc/mini_foil_nocaps.py"

    rule crc_mini_rich_hf:
        """RichHF-18K's TFRecords, the Pick-a-Pic prompt table and the images of new scenes."""
        output:
            calibration=CRC_DATA["rich_hf"]["calibration"],
            test=CRC_DATA["rich_hf"]["test"],
            prompts=CRC_DATA["rich_hf"]["prompts"],
            images=directory(CRC_DATA["rich_hf"]["images"]),
        params:
            sizes=canonical(CRC["miniature"]["rich_hf"]),
            image_size=COCO["miniworld"]["image_size"],
            seed=CRC["miniature"]["seed"],
        log:
            "logs/crc/mini_rich_hf.log",
        conda:
            "../../../envs/analysis.yaml"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=10,
        script:
            "../../scripts/crc/mini_rich_hf.py"

    rule crc_mini_judgments:
        """Flickr8k-Expert and Polaris files: val images, candidates with 0–3 errors, noisy ratings."""
        input:
            captions=coco_captions("val"),
        output:
            **{name: section["file"] for name, section in CRC_DATA["judgments"].items()},
        params:
            n_images=CRC["miniature"]["judgment_images"],
            seed=CRC["miniature"]["seed"],
        log:
            "logs/crc/mini_judgments.log",
        conda:
            "../../../envs/analysis.yaml"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=10,
        script:
            "../../scripts/crc/mini_judgments.py"


rule crc_captions:
    """One benchmark through its real loader: captions, word labels or human scores, subsets."""
    input:
        unpack(crc_caption_inputs),
    output:
        table="results/crc/captions/{benchmark}.parquet",
        dropped="results/crc/captions/{benchmark}.dropped.json",
    wildcard_constraints:
        **CRC_WILDCARDS,
    params:
        benchmark=crc_caption_params,
    log:
        "logs/crc/captions_{benchmark}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/crc/captions.py"
