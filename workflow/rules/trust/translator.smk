# Section 5.2 and Appendix L: the trust score during generation, through a translator from the denoiser's
# block tokens to SigLIP's space (config `trust.translator`), for the generators it names; and, for the REPA
# generators in `aligned`, through their own aligned features (Appendix L.1's baseline).
#
#   trust_train_translator (pairs from noised real support images)  ->  translators/<variant>
#   trust_trajectory (the samples of trust_generate drawn again; the block's tokens and/or the REPA-aligned
#                     features kept at each scoring step)
#   trust_real_trajectory (the real support images noised to each scoring step's level, the same features kept:
#                          the per-step thresholds, `thresholds: per_step`)
#   -> trust_during_generation (per path and step: score, P95-real, KID; steps saved)
#   -> trust_during_generation_report (Appendix L.2's table, Fig. 4, Appendix L.1's support-shift table)


rule trust_train_translator:
    """The translator from the generator's block tokens (noised real support images, every t) to SigLIP; the
    real images outside the support translated (no scorer here: a scorer edit retrains no translator)."""
    input:
        table="results/trust/{dataset}/real.parquet",
        release=trust_release_input,
        model=saved_manifest("results/trust/{dataset}/{regime}/generators/{variant}"),
        siglip=trust_real_features("{dataset}", "siglip"),
    output:
        model=directory(TRANSLATOR_FOLDER),
        manifest=saved_manifest(TRANSLATOR_FOLDER),
        signal=f"{TRANSLATOR_FOLDER}.json",
        held_out=f"{TRANSLATOR_FOLDER}-held-out.safetensors",
    wildcard_constraints:
        **TRUST_WILDCARDS,
    params:
        translator=translator_settings(*TRANSLATOR_TRAINING),
        root=trust_root,
        subset=trust_dataset_subset,
        image_size=TRUST["image_size"],
        chunk_size=chunk_items(TRUST["batch_size"]),
        held_out_check=TRUST["translator"]["held_out_check"],
        seed=TRUST["seed"],
    log:
        "logs/trust/train_translator_{dataset}_{regime}_{variant}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        **gpu_resources(trust_translator_work),
        gpu=0,
    script:
        "../../scripts/trust/train_translator.py"


rule trust_trajectory:
    """trust_generate's samples drawn again (same seeds, latents only), the block's tokens (translator) and the
    REPA-aligned features (aligned) kept at each scoring step."""
    input:
        conditions="results/trust/{dataset}/conditions.parquet",
        model=saved_manifest("results/trust/{dataset}/{regime}/generators/{variant}"),
    output:
        features=directory(TRAJECTORY),
        manifest=saved_manifest(TRAJECTORY),
    wildcard_constraints:
        **TRUST_WILDCARDS,
    params:
        sampling=trust_sampling_params,
        translator=translator_settings("layer", "steps"),
        keep=trajectory_paths,
        seed=TRUST["seed"],
    log:
        "logs/trust/trajectory_{dataset}_{regime}_{variant}_shard-{shard}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        **gpu_resources(trust_trajectory_work),
        gpu=0,
    script:
        "../../scripts/trust/trajectory.py"


rule trust_real_trajectory:
    """The real support images on the samples' path at each scoring step (noised to the step's level, the
    block's tokens and/or the REPA-aligned features kept): the per-step thresholds' calibration rows."""
    input:
        table="results/trust/{dataset}/real.parquet",
        release=trust_release_input,
        model=saved_manifest("results/trust/{dataset}/{regime}/generators/{variant}"),
    output:
        features=directory(REAL_TRAJECTORY),
        manifest=saved_manifest(REAL_TRAJECTORY),
    wildcard_constraints:
        **TRUST_WILDCARDS,
    params:
        num_inference_steps=TRUST["sampling"]["num_inference_steps"],
        translator=translator_settings("layer", "steps"),
        keep=trajectory_paths,
        root=trust_root,
        subset=trust_dataset_subset,
        image_size=TRUST["image_size"],
        chunk_size=chunk_items(TRUST["batch_size"]),
        seed=TRUST["seed"],
    log:
        "logs/trust/real_trajectory_{dataset}_{regime}_{variant}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        **gpu_resources(trust_real_trajectory_work),
        gpu=0,
    script:
        "../../scripts/trust/real_trajectory.py"


rule trust_during_generation:
    """Per path and scoring step: translated features scored by trust fitted on real SigLIP support features,
    and REPA-aligned features by trust fitted in their extractor's space; P95-real selection, KID in DINOv3's
    space against the post-generation oracle, steps saved."""
    input:
        unpack(trust_selection_inputs),
        unpack(during_generation_inputs),
        real_siglip=trust_real_features("{dataset}", "siglip"),
        trajectory=trajectory_manifests,
    output:
        steps="results/trust/{dataset}/{regime}/during_generation/{variant}.parquet",
    wildcard_constraints:
        **TRUST_WILDCARDS,
    params:
        spaces=trust_feature_spaces,
        translator=translator_settings("steps", "thresholds"),
        keep=trajectory_paths,
        sampling=canonical(TRUST["sampling"]),
        scorer=canonical(TRUST["scorer"]),
        selection=canonical(TRUST["selection"]),
        per_condition=trust_dataset_per_condition,
        subset=trust_dataset_subset,
        seed=TRUST["seed"],
    log:
        "logs/trust/during_generation_{dataset}_{regime}_{variant}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=30,
    script:
        "../../scripts/trust/during_generation.py"


rule trust_during_generation_report:
    """Appendix L.2's per-step table and Fig. 4 (KID gain and Accept% per scoring step against post generation),
    Appendix L.1's support-shift table (translator and REPA-aligned paths), the translators' check."""
    input:
        table="results/trust/{dataset}/real.parquet",
        real_siglip=trust_real_features("{dataset}", "siglip"),
        steps=per_variant(
            "results/trust/{dataset}/{regime}/during_generation/{variant}.parquet", trust_during_generation_variants
        ),
        signals=per_variant("results/trust/{dataset}/{regime}/translators/{variant}.json", trust_translator_variants),
        held_out=per_variant(
            "results/trust/{dataset}/{regime}/translators/{variant}-held-out.safetensors", trust_translator_variants
        ),
    output:
        table=report(
            "reports/trust/{dataset}/{regime}/during_generation.md",
            caption="../../report/trust/during_generation.rst",
            category="Trust score",
            subcategory="{dataset}",
            labels={"dataset": "{dataset}", "regime": "{regime}", "table": "during generation (Appendix L.2)"},
        ),
        figure=report(
            "reports/trust/{dataset}/{regime}/during_generation.png",
            caption="../../report/trust/during_generation.rst",
            category="Trust score",
            subcategory="{dataset}",
            labels={"dataset": "{dataset}", "regime": "{regime}", "figure": "during generation (Fig. 4)"},
        ),
    wildcard_constraints:
        **TRUST_WILDCARDS,
    params:
        variants=trust_during_generation_variants,
        translated=trust_translator_variants,
        scorer=canonical(TRUST["scorer"]),
        subset=trust_dataset_subset,
        seed=TRUST["seed"],
    log:
        "logs/trust/during_generation_report_{dataset}_{regime}.log",
    conda:
        "../../../envs/analysis.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=5,
    script:
        "../../scripts/trust/during_generation_report.py"
