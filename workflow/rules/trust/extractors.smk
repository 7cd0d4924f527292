# The trust track's feature spaces: DINOv3 (scoring and KID) and SigLIP (REPA's second teacher), as
# mean patch tokens; with a `clip`, CLIP image embeddings of CelebA for Appendix J's alignment scorer.
#
#   trust_train_extractor (a `train:` extractor; renders of the miniature world)
#   -> trust_real_features (every real row)  ->  trust_extractor_signal (linear probes per attribute)


rule trust_train_extractor:
    """A tiny DINOv3ViTModel or SiglipVisionModel trained on renders of the dataset's miniature world."""
    input:
        release=trust_release_input,
    output:
        model=directory("results/trust/{dataset}/extractors/{extractor}"),
        manifest=saved_manifest("results/trust/{dataset}/extractors/{extractor}"),
    wildcard_constraints:
        dataset=TRUST_WILDCARDS["dataset"],
        extractor="|".join(TRUST_EXTRACTORS),
    params:
        train=trust_extractor_train_params,
        world=trust_miniature_params,
        image_size=TRUST["image_size"],
        seed=TRUST["seed"],
    log:
        "logs/trust/train_{extractor}_{dataset}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    priority: 20
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=0,
    script:
        "../../scripts/trust/train_extractor.py"


rule trust_train_clip:
    """A tiny CLIPModel trained on face renders and their condition prompts (Appendix J's CLIP alignment)."""
    output:
        model=directory("results/trust/{dataset}/extractors/clip"),
        manifest=saved_manifest("results/trust/{dataset}/extractors/clip"),
    wildcard_constraints:
        dataset="|".join(TRUST_CLIP_DATASETS) or "none",
    params:
        train=canonical(TRUST.get("clip", {}).get("train", {})),
        image_size=TRUST["image_size"],
        seed=TRUST["seed"],
    log:
        "logs/trust/train_clip_{dataset}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    priority: 20
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=0,
    script:
        "../../scripts/trust/train_clip.py"


rule trust_real_features:
    """Mean-patch features of every real row of a release (ids: the rows of real.parquet)."""
    input:
        table="results/trust/{dataset}/real.parquet",
        extractor=trust_extractor_input,
    output:
        features=trust_real_features("{dataset}", "{extractor}"),
    wildcard_constraints:
        **TRUST_WILDCARDS,
    params:
        root=trust_root,
        image_size=TRUST["image_size"],
        batch_size=TRUST["batch_size"],
        chunk_size=chunk_items(TRUST["batch_size"]),
        loading=trust_extractor_loading_param,
    log:
        "logs/trust/real_features_{extractor}_{dataset}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        **gpu_resources(trust_real_feature_work),
        gpu=0,
    script:
        "../../scripts/trust/real_features.py"


rule trust_extractor_signal:
    """Each extractor's per-attribute linear-probe accuracy on real rows outside training, beside chance."""
    input:
        table="results/trust/{dataset}/real.parquet",
        features=expand(trust_real_features("{{dataset}}", "{extractor}"), extractor=TRUST_EXTRACTORS),
    output:
        signal="results/trust/{dataset}/extractor_signal.json",
        markdown=report(
            "reports/trust/{dataset}/extractor_signal.md",
            caption="../../report/trust/extractor_signal.rst",
            category="Trust score",
            subcategory="{dataset}",
            labels={"dataset": "{dataset}", "table": "extractor signal"},
        ),
    wildcard_constraints:
        **TRUST_WILDCARDS,
    params:
        extractors=TRUST_EXTRACTORS,
        probe=canonical(TRUST["probe"]),
        seed=TRUST["seed"],
    log:
        "logs/trust/extractor_signal_{dataset}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=10,
    script:
        "../../scripts/trust/extractor_signal.py"
