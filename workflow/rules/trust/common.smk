# Helpers of the trust-score track (config `trust:`): its validated section, wildcard constraints and
# input functions. Which generators a run trains, what each job reads and the config checks live in
# condeval.trust.design (unit-tested there); these functions bind a job's wildcards to it.
from condeval.trust import design as trust_design  # noqa: E402
from condeval.trust.data import ATTRIBUTE_NAMES as TRUST_ATTRIBUTES, image_channels  # noqa: E402

TRUST = track_config("trust")
trust_design.check_config(TRUST)
TRUST_DATASETS = list(TRUST["datasets"])
TRUST_EXTRACTORS = ["dinov3", "siglip"]
TRUST_CLIP_DATASETS = trust_design.clip_datasets(TRUST)
TRUST_REGIMES = trust_design.regimes(TRUST)
TRUST_VARIANTS = list(TRUST.get("generators", {}))
TRUST_WILDCARDS = {
    "dataset": "|".join(TRUST_DATASETS),
    "extractor": "|".join(TRUST_EXTRACTORS + (["clip"] if TRUST_CLIP_DATASETS else [])),
}


def trust_release(dataset):
    """The release file that stands for dataset's folder (CelebA's attribute list, RxRx1's metadata.csv)."""
    return f"{TRUST['datasets'][dataset]['root']}/{trust_design.RELEASE_FILES[dataset]}"


def trust_release_path(dataset):
    return trust_design.release_path(TRUST, dataset)


def trust_release_input(wildcards):
    return trust_release_path(wildcards.dataset)


def trust_subset(dataset):
    """RxRx1's held-out pairs and queried subset sizes (CelebA: none)."""
    return canonical(TRUST["datasets"][dataset].get("subset", {}))


def trust_root(wildcards):
    """The job's dataset's release folder (trust.datasets.<dataset>.root)."""
    return TRUST["datasets"][wildcards.dataset]["root"]


def trust_dataset_subset(wildcards):
    """The job's dataset's :func:`trust_subset`."""
    return trust_subset(wildcards.dataset)


def trust_attribute_names(wildcards):
    """The job's dataset's attribute names."""
    return list(TRUST_ATTRIBUTES[wildcards.dataset])


def trust_repa_params(wildcards):
    """The job's variant's `repa` section ({} for the vanilla model)."""
    return canonical(TRUST["generators"][wildcards.variant].get("repa", {}))


def trust_extractor_train_params(wildcards):
    """The job's extractor's `train` section."""
    return canonical(TRUST["extractors"][wildcards.extractor]["train"])


def trust_miniature_params(wildcards):
    """The job's dataset's `miniature` section (the world a miniature is drawn from)."""
    return canonical(TRUST["datasets"][wildcards.dataset]["miniature"])


def trust_extractor(dataset, extractor):
    return trust_design.extractor_input(TRUST, dataset, extractor)


def trust_extractor_input(wildcards):
    return trust_extractor(wildcards.dataset, wildcards.extractor)


def trust_extractor_loading(extractor):
    return canonical(trust_design.extractor_loading(TRUST, extractor))


def trust_extractor_loading_param(wildcards):
    return trust_extractor_loading(wildcards.extractor)


def trust_sample_loading(wildcards):
    """:func:`trust_extractor_loading` of every space a variant's samples are scored in."""
    return {e: trust_extractor_loading(e) for e in trust_sample_extractors(wildcards.dataset, wildcards.variant)}


def trust_repa_loading(wildcards):
    """:func:`trust_extractor_loading` of the extractor a REPA variant aligns to (none for the others)."""
    repa = TRUST["generators"][wildcards.variant].get("repa")
    return trust_extractor_loading(repa["extractor"]) if repa else {}


def trust_real_features(dataset, extractor):
    return f"results/trust/{dataset}/features/real-{extractor}.safetensors"


def trust_targets():
    return trust_design.targets(TRUST)


def trust_variants(dataset, regime):
    return trust_design.variants(TRUST, dataset, regime)


def trust_regime_variants(wildcards):
    """The job's :func:`trust_variants`."""
    return trust_variants(wildcards.dataset, wildcards.regime)


def trust_variant_extractors(wildcards):
    """The job's :func:`trust_sample_extractors`."""
    return trust_sample_extractors(wildcards.dataset, wildcards.variant)


def variant_files(pattern, variants_of, wildcards):
    """``pattern`` (the job's wildcards and ``{variant}``) for each variant ``variants_of(wildcards)`` names."""
    return [pattern.format(**wildcards, variant=variant) for variant in variants_of(wildcards)]


def per_variant(pattern, variants_of=trust_regime_variants):
    """An input function: :func:`variant_files` of ``pattern``, one file per variant of the job's regime."""
    return functools.partial(variant_files, pattern, variants_of)


def trust_generator_train_params(wildcards):
    """The job's generator's resolved training settings, canonical."""
    return canonical(trust_generator_training(wildcards.variant, wildcards.regime, wildcards.dataset))


def trust_sampling_params(wildcards):
    """The sampling settings with the job's dataset's samples per condition."""
    return canonical(TRUST["sampling"] | {"per_condition": trust_per_condition(wildcards.dataset)})


def trust_regime_sample_features(wildcards):
    """Every sample features shard of every generator of the job's regime."""
    return [
        shard
        for variant in trust_variants(wildcards.dataset, wildcards.regime)
        for shard in trust_sample_feature_shards(wildcards.dataset, wildcards.regime, variant)
    ]


def trust_runs():
    return trust_design.runs(TRUST)


def trust_run_wildcards():
    """:func:`trust_runs` as the wildcards objects of their jobs (attributes)."""
    return [types.SimpleNamespace(**run) for run in trust_runs()]


TRUST_SHARDS = TRUST.get("sampling", {}).get("shards", 1)
TRUST_WILDCARDS |= {
    "regime": "|".join(TRUST_REGIMES),
    "variant": "|".join(TRUST_VARIANTS) or "none",
    "shard": r"\d+",
}
# One shard of samples of one generator: PNGs per condition and their manifest (condeval.trust.samples).
TRUST_SAMPLE_FOLDER = "results/trust/{dataset}/{regime}/samples/{variant}/shard-{shard}"
TRUST_SAMPLES = f"{TRUST_SAMPLE_FOLDER}.parquet"
# One shard's features in every space they are scored in: <extractor>.safetensors (condeval.trust.samples).
TRUST_SAMPLE_FEATURES = "results/trust/{dataset}/{regime}/features/{variant}/shard-{shard}"


def trust_per_condition(dataset):
    return trust_design.per_condition(TRUST, dataset)


def trust_dataset_per_condition(wildcards):
    """The job's dataset's :func:`trust_per_condition`."""
    return trust_per_condition(wildcards.dataset)


def trust_autoencoder_settings(dataset):
    return trust_design.autoencoder_settings(TRUST, dataset)


def trust_autoencoder_params(wildcards):
    """The job's dataset's autoencoder settings, canonical."""
    return canonical(trust_autoencoder_settings(wildcards.dataset))


def trust_rgb_autoencoder_path(wildcards):
    """The RGB autoencoder a channel-wise one wraps (its `path`)."""
    return trust_autoencoder_settings(wildcards.dataset)["path"]


def trust_autoencoder(dataset):
    return trust_design.autoencoder_input(TRUST, dataset)


def trust_generator_train_inputs(wildcards):
    """What training one generator reads: the real table, the dataset's autoencoder and, for REPA, its extractor."""
    inputs = {
        "table": f"results/trust/{wildcards.dataset}/real.parquet",
        "autoencoder": trust_autoencoder(wildcards.dataset),
    }
    repa = TRUST["generators"][wildcards.variant].get("repa")
    if repa:
        inputs["extractor"] = trust_extractor(wildcards.dataset, repa["extractor"])
    return inputs


def trust_generator_training(variant, regime, dataset):
    return trust_design.generator_training(TRUST, variant, regime, dataset)


def trust_extractor_size(dataset, extractor):
    """An extractor's stated or stored parameters (None: one trained here, not yet made)."""
    key = "trust.clip" if extractor == "clip" else f"trust.extractors.{extractor}"
    section = TRUST["clip"] if extractor == "clip" else TRUST["extractors"][extractor]
    return model_size(f"{key}.path", section["path"].replace("{dataset}", dataset)) if "path" in section else None


def trust_feature_work(dataset, extractors, items):
    """GPU work of ``items`` images of ``dataset`` through each extractor's image tower, (side/16)² + 1 tokens."""
    tokens = (TRUST["image_size"] // 16) ** 2 + 1
    encoders = [(trust_extractor_size(dataset, extractor), "image", tokens) for extractor in extractors]
    return encoding_work(encoders, items, TRUST["batch_size"])


def trust_real_feature_work(wildcards):
    """One trust_real_features job's GPU work: the whole release (at most) through one extractor."""
    dataset = wildcards.dataset
    return trust_feature_work(dataset, [wildcards.extractor], trust_design.RELEASE_IMAGES[dataset])


def trust_sample_feature_work(wildcards):
    """One trust_sample_features job's GPU work: a shard of samples through every space it is scored in."""
    dataset = wildcards.dataset
    samples = trust_design.samples_per_shard(TRUST, dataset)
    return trust_feature_work(dataset, trust_sample_extractors(dataset, wildcards.variant), samples)


def trust_trajectory_work(wildcards):
    """One trust_trajectory job's GPU work: trust_generate's shard drawn again, every step to the block."""
    dataset, sampling = wildcards.dataset, TRUST["sampling"]
    samples = trust_design.samples_per_shard(TRUST, dataset)
    transformer = trust_generator_training(wildcards.variant, wildcards.regime, dataset)["transformer"]
    return trust_design.block_work(
        transformer,
        transformer["layers"],
        TRUST["image_size"],
        samples,
        sampling["num_inference_steps"],
        sampling["batch_size"],
    )


def trust_real_trajectory_work(wildcards):
    """One trust_real_trajectory job's GPU work: the release (at most) noised to each scoring step, to the block."""
    dataset, translator = wildcards.dataset, TRUST["translator"]
    transformer = trust_generator_training(wildcards.variant, wildcards.regime, dataset)["transformer"]
    return trust_design.block_work(
        transformer,
        translator["layer"],
        TRUST["image_size"],
        trust_design.RELEASE_IMAGES[dataset],
        len(translator["steps"]),
        TRUST["batch_size"],
    )


def trust_translator_work(wildcards):
    """One trust_train_translator job's GPU work (condeval.trust.design.translator_work) on the release, at most."""
    dataset = wildcards.dataset
    transformer = trust_generator_training(wildcards.variant, wildcards.regime, dataset)["transformer"]
    return trust_design.translator_work(
        transformer, TRUST["translator"], TRUST["image_size"], trust_design.RELEASE_IMAGES[dataset]
    )


def trust_training_work(wildcards):
    """One trust_train_generator job's GPU work (condeval.trust.design.training_work): the release at most,
    its row cache holding a REPA teacher's tokens."""
    dataset = wildcards.dataset
    train = trust_generator_training(wildcards.variant, wildcards.regime, dataset)
    repa = TRUST["generators"][wildcards.variant].get("repa")
    width = (
        trust_design.EXTRACTOR_WIDTHS.get(repa["extractor"], max(trust_design.EXTRACTOR_WIDTHS.values())) if repa else 0
    )
    latent_channels = 4 * (image_channels(dataset) if trust_autoencoder_settings(dataset).get("channelwise") else 1)
    return trust_design.training_work(
        train, TRUST["image_size"], trust_design.RELEASE_IMAGES[dataset], latent_channels, width
    )


def trust_queried_conditions(dataset):
    return trust_design.queried_conditions(TRUST, dataset)


def trust_sampling_work(wildcards):
    """One trust_generate job's GPU work (condeval.trust.design.sampling_work): a shard of the samples."""
    dataset, sampling = wildcards.dataset, TRUST["sampling"]
    samples = trust_design.samples_per_shard(TRUST, dataset)
    train = trust_generator_training(wildcards.variant, wildcards.regime, dataset)
    channels = image_channels(dataset) if trust_autoencoder_settings(dataset).get("channelwise") else 1
    return trust_design.sampling_work(
        train["transformer"],
        TRUST["image_size"],
        sampling["num_inference_steps"],
        sampling["batch_size"],
        samples,
        channels,
        image_channels(dataset),
    )


def trust_scoring_extractor(variant):
    return trust_design.scoring_extractor(TRUST, variant)


def trust_sample_extractors(dataset, variant):
    return trust_design.sample_extractors(TRUST, dataset, variant)


def trust_sample_feature_inputs(wildcards):
    """A samples shard's manifest and every extractor its features are written in."""
    extractors = trust_sample_extractors(wildcards.dataset, wildcards.variant)
    return {"samples": TRUST_SAMPLES.format(**wildcards)} | {
        extractor: trust_extractor(wildcards.dataset, extractor) for extractor in extractors
    }


def trust_sample_feature_shards(dataset, regime, variant):
    """The manifests of a variant's samples shards' feature folders (``sample_feature_files`` picks a space's
    files): a folder compares only by modification time, and a pulled run would redo every job reading it."""
    return [
        saved_manifest(TRUST_SAMPLE_FEATURES.format(dataset=dataset, regime=regime, variant=variant, shard=s))
        for s in range(TRUST_SHARDS)
    ]


def trust_feature_spaces(wildcards):
    """The extractor of each space a scoring job reads: the variant's scoring space and KID's (DINOv3)."""
    return {"scoring": trust_scoring_extractor(wildcards.variant), "kid": "dinov3"}


def trust_selection_inputs(wildcards):
    """The real table and features (scoring space and DINOv3, KID's space), the samples' features, the conditions."""
    d, r, v = wildcards.dataset, wildcards.regime, wildcards.variant
    scoring = trust_scoring_extractor(v)
    return {
        "table": f"results/trust/{d}/real.parquet",
        "conditions": f"results/trust/{d}/conditions.parquet",
        "real_scoring": trust_real_features(d, scoring),
        "real_kid": trust_real_features(d, "dinov3"),
        "sample_features": trust_sample_feature_shards(d, r, v),
    } | trust_clip_inputs(d)


def trust_clip_inputs(dataset):
    """Appendix J's CLIP alignment: the CLIP (its text tower embeds the prompts) and the real image embeddings
    (the samples' are in their feature folders); nothing for a dataset without prompts or a config without `clip`."""
    if dataset not in TRUST_CLIP_DATASETS:
        return {}
    return {
        "clip": trust_extractor(dataset, "clip"),
        "real_clip": trust_real_features(dataset, "clip"),
    }
