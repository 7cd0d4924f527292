# Helpers of the trust-score track (config `trust:`): its validated section, the release file that
# stands for each dataset folder, and where an extractor comes from.
from condeval.datasets.celeba_prompts import PROMPTED_DATASETS as TRUST_PROMPTED_DATASETS  # noqa: E402

TRUST = track_config("trust")
TRUST_DATASETS = list(TRUST["datasets"])
TRUST_EXTRACTORS = ["dinov3", "siglip"]
# Datasets scored by Appendix J's CLIP alignment too (those with prompts, when a `clip` is configured).
TRUST_CLIP_DATASETS = [d for d in TRUST_DATASETS if "clip" in TRUST and d in TRUST_PROMPTED_DATASETS]
TRUST_WILDCARDS = {
    "dataset": "|".join(TRUST_DATASETS),
    "extractor": "|".join(TRUST_EXTRACTORS + (["clip"] if TRUST_CLIP_DATASETS else [])),
}
# The file each release is read through; written last by a miniature rule, so it stands for the folder.
_RELEASE_FILE = {"celeba": "list_attr_celeba.txt", "rxrx1": "metadata.csv"}


def trust_release(dataset):
    """The release file that stands for dataset's folder (CelebA's attribute list, RxRx1's metadata.csv)."""
    return f"{TRUST['datasets'][dataset]['root']}/{_RELEASE_FILE[dataset]}"


def trust_release_path(dataset):
    """What a job reads a release through: the release file the miniature's rule writes, or the folder
    itself (a real release, placed by hand or by its fetch rule)."""
    section = TRUST["datasets"][dataset]
    return trust_release(dataset) if "miniature" in section else section["root"]


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
    """An extractor (or the `clip`) as an input: the manifest of the one trained here, or the configured folder."""
    section = TRUST["clip"] if extractor == "clip" else TRUST["extractors"][extractor]
    if "path" in section:
        return section["path"].replace("{dataset}", dataset)
    return saved_manifest(f"results/trust/{dataset}/extractors/{extractor}")


def trust_extractor_input(wildcards):
    return trust_extractor(wildcards.dataset, wildcards.extractor)


def trust_extractor_loading(extractor):
    """How a job loads an extractor (or the `clip`): its precision and, for DINOv3 and SigLIP from the hub,
    the side it reads images at (trust.extractors.<extractor>.dtype, .image_size)."""
    section = TRUST["clip"] if extractor == "clip" else TRUST["extractors"][extractor]
    return canonical({key: section[key] for key in ("dtype", "image_size") if key in section})


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
    """What `snakemake trust` builds: the extractors' and generators' signal, Section 5.1's tables and figures,
    and (with their config sections) the morphology readouts and the scores during generation."""
    signal = [
        path
        for dataset in TRUST_DATASETS
        for path in (f"results/trust/{dataset}/extractor_signal.json", f"reports/trust/{dataset}/extractor_signal.md")
    ]
    if not TRUST_VARIANTS:
        return signal
    scored = [(d, r) for d in TRUST_DATASETS for r in TRUST_REGIMES if trust_variants(d, r)]
    figures = [f"reports/trust/{d}/{r}/deciles.png" for d, r in scored]
    # Fig. 7 plots against the Hamming distance to the support, which is 0 for every condition on full support
    figures += [f"reports/trust/{d}/{r}/graded_shift.png" for d, r in scored if r == "held_out"]
    generators = [f"reports/trust/{d}/{r}/generator_signal.md" for d, r in scored]
    morphology = [
        f"reports/trust/rxrx1/{r}/morphology_{kind}"
        for d, r in scored
        if d == "rxrx1" and "morphology" in TRUST
        for kind in ("table.md", "deciles.png")
    ]
    translated = [
        f"reports/trust/{d}/{r}/during_generation.{kind}"
        for d, r in scored
        if set(trust_variants(d, r))
        & set(TRUST.get("translator", {}).get("variants", []) + TRUST.get("translator", {}).get("aligned", []))
        for kind in ("md", "png")
    ]
    return signal + ["reports/trust/selection_table.md"] + figures + generators + morphology + translated


from condeval.trust.data import ATTRIBUTE_NAMES as TRUST_ATTRIBUTES, image_channels  # noqa: E402
from condeval.trust import design as trust_design  # noqa: E402

TRUST_REGIMES = list(TRUST.get("regimes", ["held_out"]))
TRUST_VARIANTS = list(TRUST.get("generators", {}))
_regime_lists = {f"trust.generators.{v}.regimes": s.get("regimes", []) for v, s in TRUST.get("generators", {}).items()}
_regime_lists |= {f"trust.datasets.{d}.regimes": s.get("regimes", []) for d, s in TRUST["datasets"].items()}
for _key, _regimes in _regime_lists.items():
    _unknown = sorted(set(_regimes) - set(TRUST_REGIMES))
    if _unknown:
        raise ValueError(f"config key '{_key}' names {_unknown}, not in 'trust.regimes' {TRUST_REGIMES}")


def _check_blocks():
    """REPA's aligned block and the translator's read block must be blocks of the denoiser (1-based)."""
    layers = TRUST.get("generator_training", {}).get("transformer", {}).get("layers")
    generators = TRUST.get("generators", {})
    blocks = {f"trust.generators.{v}.repa.depth": s["repa"]["depth"] for v, s in generators.items() if "repa" in s}
    blocks |= {"trust.translator.layer": TRUST["translator"]["layer"]} if "translator" in TRUST else {}
    for key, block in blocks.items():
        if layers is not None and block > layers:
            raise ValueError(
                f"config key '{key}' is block {block}, past the denoiser's "
                f"trust.generator_training.transformer.layers ({layers}); blocks are 1-based"
            )


_check_blocks()


def trust_variants(dataset, regime):
    """The generators trained on ``dataset`` in ``regime``: each generator's and each dataset's `regimes`
    (by default every one of `trust.regimes`) must name it."""
    if regime not in TRUST["datasets"][dataset].get("regimes", TRUST_REGIMES):
        return []
    generators = TRUST.get("generators", {})
    return [variant for variant, settings in generators.items() if regime in settings.get("regimes", TRUST_REGIMES)]


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
    """Every (dataset, regime, variant) that is trained, sampled and scored."""
    return [
        {"dataset": dataset, "regime": regime, "variant": variant}
        for dataset in TRUST_DATASETS
        for regime in TRUST_REGIMES
        for variant in trust_variants(dataset, regime)
    ]


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


for _dataset in TRUST_DATASETS if TRUST.get("generators") else []:
    if "autoencoder" not in TRUST["datasets"][_dataset] and "autoencoder" not in TRUST:
        raise ValueError(
            f"config key 'trust.autoencoder' is missing: the generators of {_dataset} need it (or trust.datasets.{_dataset}.autoencoder)"
        )

#: What the trained models' `model` keywords reach (extractors by name, the CLIP, the autoencoders), and
#: what the workflow passes them itself.
TRUST_MODEL_FACTORIES = {
    "dinov3": ("condeval.encoders.patch_features:tiny_dinov3", ("image_size",)),
    "siglip": ("condeval.encoders.patch_features:tiny_siglip_vision", ("image_size",)),
    "clip": ("condeval.encoders.clip:tiny_clip_config", ("tokenizer", "image_size", "max_length")),
    "autoencoder": ("condeval.generators.autoencoders:tiny_autoencoder_kl", ("image_size", "image_channels")),
}
_trained = {
    f"trust.extractors.{name}.train.model": (name, s["train"]["model"])
    for name, s in TRUST.get("extractors", {}).items()
    if "train" in s and name in TRUST_MODEL_FACTORIES
}
if "train" in TRUST.get("clip", {}):
    _trained["trust.clip.train.model"] = ("clip", TRUST["clip"]["train"]["model"])
_autoencoders = {"trust.autoencoder": TRUST.get("autoencoder", {})} | {
    f"trust.datasets.{d}.autoencoder": TRUST["datasets"][d].get("autoencoder", {}) for d in TRUST_DATASETS
}
_trained |= {f"{key}.model": ("autoencoder", s["model"]) for key, s in _autoencoders.items() if "model" in s}
for _key, (_kind, _model) in _trained.items():
    check_keywords(_key, _model, *TRUST_MODEL_FACTORIES[_kind])


def trust_per_condition(dataset):
    """Samples per queried condition of a dataset: its own `per_condition`, else `sampling.per_condition`."""
    return TRUST["datasets"][dataset].get("per_condition", TRUST["sampling"]["per_condition"])


def trust_dataset_per_condition(wildcards):
    """The job's dataset's :func:`trust_per_condition`."""
    return trust_per_condition(wildcards.dataset)


def trust_autoencoder_settings(dataset):
    """The dataset's own `autoencoder` section, else the track's."""
    return TRUST["datasets"][dataset].get("autoencoder", TRUST.get("autoencoder", {}))


def trust_autoencoder_params(wildcards):
    """The job's dataset's autoencoder settings, canonical."""
    return canonical(trust_autoencoder_settings(wildcards.dataset))


def trust_rgb_autoencoder_path(wildcards):
    """The RGB autoencoder a channel-wise one wraps (its `path`)."""
    return trust_autoencoder_settings(wildcards.dataset)["path"]


def trust_autoencoder(dataset):
    """A dataset's autoencoder as an input: a configured folder, the manifest of its channelwise wrapping,
    or the manifest of the one trained here."""
    settings = trust_autoencoder_settings(dataset)
    if settings.get("channelwise"):
        return saved_manifest(f"results/trust/{dataset}/autoencoder-channelwise")
    return settings["path"] if "path" in settings else saved_manifest(f"results/trust/{dataset}/autoencoder")


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
    """A generator's training settings: the variant's own or the shared ones, with the dataset's overrides,
    then the regime's."""
    train = dict(TRUST["generators"][variant].get("train", TRUST["generator_training"]))
    regimes = train.pop("regimes", {})
    for overrides in (TRUST["datasets"][dataset].get("generator_training", {}), regimes.get(regime, {})):
        if {"epochs", "steps"} & overrides.keys():  # a length replaces the inherited one, in either unit
            train = {key: value for key, value in train.items() if key not in ("epochs", "steps")}
        train |= overrides
    return train


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
    samples = -(-trust_queried_conditions(dataset) * trust_per_condition(dataset) // TRUST_SHARDS)
    return trust_feature_work(dataset, trust_sample_extractors(dataset, wildcards.variant), samples)


def trust_trajectory_work(wildcards):
    """One trust_trajectory job's GPU work: trust_generate's shard drawn again, every step to the block."""
    dataset, sampling = wildcards.dataset, TRUST["sampling"]
    samples = -(-trust_queried_conditions(dataset) * trust_per_condition(dataset) // TRUST_SHARDS)
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
    """The conditions asked of a dataset's generators: RxRx1's seen and unseen pairs, else every attribute tuple."""
    section = TRUST["datasets"][dataset]
    return 2 * section["subset"]["n_each"] if "subset" in section else 2 ** len(TRUST_ATTRIBUTES[dataset])


def trust_sampling_work(wildcards):
    """One trust_generate job's GPU work (condeval.trust.design.sampling_work): a shard of the samples."""
    dataset, sampling = wildcards.dataset, TRUST["sampling"]
    samples = -(-trust_queried_conditions(dataset) * trust_per_condition(dataset) // TRUST_SHARDS)
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
    """The space a variant's samples are scored in: DINOv3 for the vanilla model, a REPA model's teacher."""
    repa = TRUST["generators"][variant].get("repa")
    return repa["extractor"] if repa else "dinov3"


def trust_sample_extractors(dataset, variant):
    """The spaces a variant's samples are scored in: its scoring extractor, DINOv3 (KID's) and, for a dataset
    with prompts, the CLIP (Appendix J)."""
    extractors = {trust_scoring_extractor(variant), "dinov3"} | ({"clip"} if dataset in TRUST_CLIP_DATASETS else set())
    return sorted(extractors)


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
