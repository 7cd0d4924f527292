# The trust track's generators: one attribute-conditioned diffusion pipeline per dataset, regime and
# variant (vanilla, REPA-DINOv3, REPA-SigLIP), and their samples per queried condition.
#
#   trust_autoencoder (the AutoencoderKL every generator of a dataset shares; or trust_channelwise_autoencoder:
#   a configured RGB one taking each channel as grey, the official code's RxRx1)
#   -> trust_train_generator (regime's support only; REPA reads its extractor's patch tokens)
#   -> trust_generate (per condition shard: PNGs + manifest)  ->  trust_sample_features (its extractors)


rule trust_autoencoder:
    """The AutoencoderKL of a dataset's generators (it stands for the paper's frozen sd-vae-ft-mse)."""
    input:
        table="results/trust/{dataset}/real.parquet",
    output:
        model=directory("results/trust/{dataset}/autoencoder"),
        manifest=saved_manifest("results/trust/{dataset}/autoencoder"),
    wildcard_constraints:
        **TRUST_WILDCARDS,
    params:
        root=trust_root,
        train=trust_autoencoder_params,
        image_size=TRUST["image_size"],
        seed=TRUST["seed"],
    log:
        "logs/trust/autoencoder_{dataset}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    priority: 20
    resources:
        mem_mb=4000,
        runtime=60,
        gpu=0,
    script:
        "../../scripts/trust/train_autoencoder.py"


rule trust_channelwise_autoencoder:
    """A configured RGB AutoencoderKL wrapped to take each of the dataset's channels as grey (the official code's
    RxRx1 through sd-vae-ft-mse: 6 x 4 latent channels)."""
    input:
        rgb=trust_rgb_autoencoder_path,
    output:
        model=directory("results/trust/{dataset}/autoencoder-channelwise"),
        manifest=saved_manifest("results/trust/{dataset}/autoencoder-channelwise"),
    wildcard_constraints:
        **TRUST_WILDCARDS,
    log:
        "logs/trust/autoencoder_channelwise_{dataset}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        mem_mb=4000,
        runtime=10,
        gpu=0,
    script:
        "../../scripts/trust/channelwise_autoencoder.py"


rule trust_train_generator:
    """One generator trained on the regime's training support (REPA variants align to their extractor)."""
    input:
        unpack(trust_generator_train_inputs),
    output:
        model=directory("results/trust/{dataset}/{regime}/generators/{variant}"),
        manifest=saved_manifest("results/trust/{dataset}/{regime}/generators/{variant}"),
    wildcard_constraints:
        **TRUST_WILDCARDS,
    params:
        root=trust_root,
        train=trust_generator_train_params,
        repa=trust_repa_params,
        subset=trust_dataset_subset,
        image_size=TRUST["image_size"],
        extractor_loading=trust_repa_loading,
        chunk_size=chunk_items(TRUST["batch_size"]),
        seed=TRUST["seed"],
    log:
        "logs/trust/train_generator_{dataset}_{regime}_{variant}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    priority: 15
    retries: parts_retries(trust_training_work, trust_run_wildcards())
    resources:
        **gpu_resources(trust_training_work),
        gpu=0,
    script:
        "../../scripts/trust/train_generator.py"


rule trust_generate:
    """Samples of one shard of the queried conditions through the pipeline's __call__, seeded per sample."""
    input:
        conditions="results/trust/{dataset}/conditions.parquet",
        model=saved_manifest("results/trust/{dataset}/{regime}/generators/{variant}"),
    output:
        images=directory(TRUST_SAMPLE_FOLDER),
        manifest=TRUST_SAMPLES,
    wildcard_constraints:
        **TRUST_WILDCARDS,
    params:
        sampling=trust_sampling_params,
        seed=TRUST["seed"],
        chunk_size=chunk_items(TRUST["sampling"]["batch_size"]),
    log:
        "logs/trust/generate_{dataset}_{regime}_{variant}_shard-{shard}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        **gpu_resources(trust_sampling_work),
        gpu=0,
    script:
        "../../scripts/trust/generate.py"


rule trust_sample_features:
    """One shard of samples in every space it is scored in (mean-patch features or CLIP embeddings, ids:
    sample_id): the PNGs are read once, each extractor writes <extractor>.safetensors in the shard's folder."""
    input:
        unpack(trust_sample_feature_inputs),
    output:
        features=directory(TRUST_SAMPLE_FEATURES),
        manifest=saved_manifest(TRUST_SAMPLE_FEATURES),
    wildcard_constraints:
        **TRUST_WILDCARDS,
    params:
        names=trust_attribute_names,
        extractors=trust_variant_extractors,
        loading=trust_sample_loading,
        batch_size=TRUST["batch_size"],
        chunk_size=chunk_items(TRUST["batch_size"]),
    log:
        "logs/trust/sample_features_{dataset}_{regime}_{variant}_shard-{shard}.log",
    conda:
        "../../../envs/torch.yaml"
    threads: 1
    resources:
        **gpu_resources(trust_sample_feature_work),
        gpu=0,
    script:
        "../../scripts/trust/sample_features.py"
