"""The trust track's design, from the ``trust:`` config: which generators a run trains, what each job reads,
the config checks its DAG relies on, and each job as GPU work (``condeval.core.resources``).

The workflow's input functions (``workflow/rules/trust/common.smk``) bind a job's wildcards to these; each
takes the section as a plain dict, so it is tested without Snakemake.

The generators are SiT-style transformers over 2 x 2 patches of an 8x-downsampling autoencoder's
latents; a block of width d holds about 18 d^2 parameters (attention and MLP 12 d^2, adaLN's
modulation 6 d^2, as DiT-B/2's 130M at 12 blocks of 768). REPA's targets and the latents are cached
once before training (``condeval.generators.attribute_training``), so a training step runs the
generator only; that one pass (an autoencoder encoding and a ViT-L forward per image) is left out,
under 1% of the paper's training.
"""

from __future__ import annotations

from condeval.core.resources import (
    INFERENCE_BYTES_PER_TOKEN,
    TRAINING_BYTES_PER_ACTIVATION,
    GpuWork,
    forward_flops,
    image_bytes,
    training_flops,
    vae_decode_flops,
)

__all__ = [
    "RELEASE_IMAGES",
    "EXTRACTOR_WIDTHS",
    "generator_parameters",
    "generator_tokens",
    "training_work",
    "sampling_work",
    "block_work",
    "translator_work",
    "RELEASE_FILES",
    "MODEL_FACTORIES",
    "regimes",
    "check_config",
    "release_path",
    "variants",
    "runs",
    "generator_training",
    "per_condition",
    "queried_conditions",
    "samples_per_shard",
    "autoencoder_settings",
    "autoencoder_input",
    "extractor_input",
    "extractor_loading",
    "clip_datasets",
    "scoring_extractor",
    "sample_extractors",
    "during_generation_variants",
    "targets",
]

#: The images of each release (CelebA's img_align_celeba, RxRx1's sites): a training support's upper bound.
RELEASE_IMAGES = {"celeba": 202_599, "rxrx1": 125_510}

#: Parameters per block per squared width (attention and MLP 12, adaLN modulation 6).
BLOCK_PARAMETERS_PER_WIDTH2 = 18
#: The translator's target width: SigLIP so400m's features.
SIGLIP_WIDTH = 1152
#: Token widths of the paper's REPA teachers (DINOv3 ViT-L/16, SigLIP so400m), for the row cache's size.
EXTRACTOR_WIDTHS = {"dinov3": 1024, "siglip": SIGLIP_WIDTH}


def generator_parameters(transformer: dict) -> float:
    """A generator's parameters from its ``transformer`` settings (``layers``, ``heads``, ``head_dim``)."""
    width = transformer["heads"] * transformer.get("head_dim", 16)
    return BLOCK_PARAMETERS_PER_WIDTH2 * transformer["layers"] * width**2


def generator_tokens(image_size: int) -> int:
    """Tokens per image: 2 x 2 patches of the 8x-downsampled latent."""
    return (image_size // 16) ** 2


def training_work(
    train: dict, image_size: int, support: int, latent_channels: int = 4, extractor_width: int = 0
) -> GpuWork:
    """One ``trust_train_generator`` job's GPU work; resumable (the job stops at its deadline and the next
    resumes), so a partition's time limit splits it over several jobs.

    Parameters
    ----------
    train : dict
        The job's resolved training settings (``steps`` or ``epochs``, ``batch_size``, ``transformer``).
    image_size : int
        The side images are read at.
    support : int
        The images of the training support (an epoch's length when ``train`` counts epochs).
    latent_channels : int
        Channels of the autoencoder's latent (RxRx1's channel-wise one: each image channel's).
    extractor_width : int
        A REPA generator's teacher's token width (:data:`EXTRACTOR_WIDTHS`); 0 for a vanilla one.

    Its scratch is the row cache (:func:`condeval.generators.attribute_training.cached_rows`): each
    image's float32 latent and, for REPA, its teacher's float16 tokens aligned to the generator's.
    """
    parameters, tokens = generator_parameters(train["transformer"]), generator_tokens(image_size)
    row_bytes = 4 * latent_channels * (image_size // 8) ** 2 + 2 * tokens * extractor_width
    transformer = train["transformer"]
    images = train["steps"] * train["batch_size"] if "steps" in train else train["epochs"] * support
    width = transformer["heads"] * transformer.get("head_dim", 16)
    activations = TRAINING_BYTES_PER_ACTIVATION * train["batch_size"] * tokens * width * transformer["layers"]
    length = f"{train['steps']:,} steps" if "steps" in train else f"{train['epochs']} epochs of {support:,}"
    return GpuWork(
        parameters,
        images * training_flops(parameters, tokens),
        "bfloat16",
        trained_parameters=parameters,
        activation_bytes=activations,
        basis=f"{length} at batch {train['batch_size']}",
        written_bytes=4 * parameters,
        scratch_bytes=support * row_bytes,
        resumable=True,
    )


def sampling_work(
    transformer: dict,
    image_size: int,
    steps: int,
    batch_size: int,
    samples: int,
    decoded_channels: int = 1,
    image_channels: int = 3,
) -> GpuWork:
    """One ``trust_generate`` job's GPU work: ``samples`` images of ``image_channels`` and ``steps`` unguided
    steps, each decoded ``decoded_channels`` times (RxRx1's channel-wise autoencoder decodes each channel alone)."""
    parameters, tokens = generator_parameters(transformer), generator_tokens(image_size)
    per_sample = steps * forward_flops(parameters, tokens) + decoded_channels * vae_decode_flops(image_size)
    return GpuWork(
        parameters,
        samples * per_sample,
        "auto",
        activation_bytes=batch_size * tokens * INFERENCE_BYTES_PER_TOKEN,
        basis=f"{samples:,} samples x {steps} steps",
        written_bytes=samples * image_bytes(image_size, image_channels),
    )


def _blocks_parameters(transformer: dict, layer: int) -> float:
    return generator_parameters(transformer) * min(layer, transformer["layers"]) / transformer["layers"]


def block_work(transformer: dict, layer: int, image_size: int, images: int, passes: int, batch_size: int) -> GpuWork:
    """GPU work of ``images`` images each run ``passes`` times through the generator up to block ``layer``
    (``trust_real_trajectory``: real images noised to each scoring step; ``trust_trajectory`` passes every step)."""
    parameters, tokens = generator_parameters(transformer), generator_tokens(image_size)
    flops = images * passes * forward_flops(_blocks_parameters(transformer, layer), tokens)
    return GpuWork(
        parameters,
        flops,
        "auto",
        activation_bytes=batch_size * tokens * INFERENCE_BYTES_PER_TOKEN,
        basis=f"{images:,} images x {passes} passes to block {layer}",
    )


def translator_work(transformer: dict, translator: dict, image_size: int, support: int) -> GpuWork:
    """One ``trust_train_translator`` job's GPU work: the block's tokens of ``support`` images at each noise
    level ``t``, and ``epochs`` of the MLP (width -> hidden -> SigLIP's width) on every token of those pairs."""
    width = transformer["heads"] * transformer.get("head_dim", 16)
    mlp = width * translator["hidden"] + translator["hidden"] * SIGLIP_WIDTH
    tokens, pairs = generator_tokens(image_size), support * len(translator["t"])
    flops = pairs * forward_flops(_blocks_parameters(transformer, translator["layer"]), tokens)
    flops += translator["epochs"] * pairs * training_flops(mlp, tokens)
    return GpuWork(
        generator_parameters(transformer) + mlp,
        flops,
        "auto",
        trained_parameters=mlp,
        activation_bytes=translator["batch_size"] * tokens * INFERENCE_BYTES_PER_TOKEN,
        basis=f"{pairs:,} pairs x {translator['epochs']} epochs",
    )


# --- The DAG: which generators a run trains, what each job reads, the config checks before any job. ---

#: The file each release is read through; written last by a miniature rule, so it stands for the folder.
RELEASE_FILES = {"celeba": "list_attr_celeba.txt", "rxrx1": "metadata.csv"}

#: What the trained models' `model` keywords reach (extractors by name, the CLIP, the autoencoders), and what
#: the workflow passes them itself.
MODEL_FACTORIES = {
    "dinov3": ("condeval.encoders.patch_features:tiny_dinov3", ("image_size",)),
    "siglip": ("condeval.encoders.patch_features:tiny_siglip_vision", ("image_size",)),
    "clip": ("condeval.encoders.clip:ClipSizes", ("max_length",)),
    "autoencoder": ("condeval.generators.autoencoders:tiny_autoencoder_kl", ("image_size", "image_channels")),
}


def regimes(trust: dict) -> list[str]:
    """The support regimes of the run (``trust.regimes``; held-out by default)."""
    return list(trust.get("regimes", ["held_out"]))


def check_config(trust: dict) -> None:
    """Cross-key checks the schema cannot express, before any job: every ``regimes`` list names a regime of
    ``trust.regimes``; REPA's aligned block and the translator's read block are blocks of the denoiser (1-based);
    every dataset with generators has an autoencoder; no trained model's ``model`` names a keyword its factory
    does not take.

    Raises
    ------
    ValueError
        Naming the config key.
    """
    from condeval.core.config import check_keywords

    known = regimes(trust)
    regime_lists = {
        f"trust.generators.{v}.regimes": s.get("regimes", []) for v, s in trust.get("generators", {}).items()
    }
    regime_lists |= {f"trust.datasets.{d}.regimes": s.get("regimes", []) for d, s in trust["datasets"].items()}
    for key, named in regime_lists.items():
        unknown = sorted(set(named) - set(known))
        if unknown:
            raise ValueError(f"config key '{key}' names {unknown}, not in 'trust.regimes' {known}")
    _check_blocks(trust)
    for dataset in trust["datasets"] if trust.get("generators") else []:
        if "autoencoder" not in trust["datasets"][dataset] and "autoencoder" not in trust:
            raise ValueError(
                f"config key 'trust.autoencoder' is missing: the generators of {dataset} need it (or trust.datasets.{dataset}.autoencoder)"
            )
    for key, (kind, model) in _trained_models(trust).items():
        check_keywords(key, model, *MODEL_FACTORIES[kind])


def _check_blocks(trust: dict) -> None:
    layers = trust.get("generator_training", {}).get("transformer", {}).get("layers")
    generators = trust.get("generators", {})
    blocks = {f"trust.generators.{v}.repa.depth": s["repa"]["depth"] for v, s in generators.items() if "repa" in s}
    blocks |= {"trust.translator.layer": trust["translator"]["layer"]} if "translator" in trust else {}
    for key, block in blocks.items():
        if layers is not None and block > layers:
            raise ValueError(
                f"config key '{key}' is block {block}, past the denoiser's "
                f"trust.generator_training.transformer.layers ({layers}); blocks are 1-based"
            )


def _trained_models(trust: dict) -> dict[str, tuple[str, dict]]:
    """Each `model` mapping of a model the run trains, by config key: (its factory's kind, the mapping)."""
    trained = {
        f"trust.extractors.{name}.train.model": (name, s["train"]["model"])
        for name, s in trust.get("extractors", {}).items()
        if "train" in s and name in MODEL_FACTORIES
    }
    if "train" in trust.get("clip", {}):
        trained["trust.clip.train.model"] = ("clip", trust["clip"]["train"]["model"])
    autoencoders = {"trust.autoencoder": trust.get("autoencoder", {})} | {
        f"trust.datasets.{d}.autoencoder": s.get("autoencoder", {}) for d, s in trust["datasets"].items()
    }
    trained |= {f"{key}.model": ("autoencoder", s["model"]) for key, s in autoencoders.items() if "model" in s}
    return trained


def release_path(trust: dict, dataset: str) -> str:
    """What a job reads a release through: the release file the miniature's rule writes (it stands for the
    folder), or the folder itself (a real release, placed by hand or by its fetch rule)."""
    section = trust["datasets"][dataset]
    return f"{section['root']}/{RELEASE_FILES[dataset]}" if "miniature" in section else section["root"]


def variants(trust: dict, dataset: str, regime: str) -> list[str]:
    """The generators trained on ``dataset`` in ``regime``: each generator's and each dataset's ``regimes``
    (by default every one of ``trust.regimes``) must name it."""
    if regime not in trust["datasets"][dataset].get("regimes", regimes(trust)):
        return []
    generators = trust.get("generators", {})
    return [variant for variant, settings in generators.items() if regime in settings.get("regimes", regimes(trust))]


def runs(trust: dict) -> list[dict[str, str]]:
    """Every (dataset, regime, variant) that is trained, sampled and scored."""
    return [
        {"dataset": dataset, "regime": regime, "variant": variant}
        for dataset in trust["datasets"]
        for regime in regimes(trust)
        for variant in variants(trust, dataset, regime)
    ]


def generator_training(trust: dict, variant: str, regime: str, dataset: str) -> dict:
    """A generator's training settings: the variant's own or the shared ones, with the dataset's overrides,
    then the regime's; a length in either unit (``epochs`` or ``steps``) replaces the inherited one."""
    train = dict(trust["generators"][variant].get("train", trust["generator_training"]))
    regime_overrides = train.pop("regimes", {})
    for overrides in (trust["datasets"][dataset].get("generator_training", {}), regime_overrides.get(regime, {})):
        if {"epochs", "steps"} & overrides.keys():
            train = {key: value for key, value in train.items() if key not in ("epochs", "steps")}
        train |= overrides
    return train


def per_condition(trust: dict, dataset: str) -> int:
    """Samples per queried condition of a dataset: its own ``per_condition``, else ``sampling.per_condition``."""
    return trust["datasets"][dataset].get("per_condition", trust["sampling"]["per_condition"])


def queried_conditions(trust: dict, dataset: str) -> int:
    """The conditions asked of a dataset's generators: RxRx1's seen and unseen pairs, else every attribute tuple."""
    from condeval.trust.data import ATTRIBUTE_NAMES

    section = trust["datasets"][dataset]
    return 2 * section["subset"]["n_each"] if "subset" in section else 2 ** len(ATTRIBUTE_NAMES[dataset])


def samples_per_shard(trust: dict, dataset: str) -> int:
    """The samples one shard of a generator's samples holds (the last may hold fewer)."""
    shards = trust.get("sampling", {}).get("shards", 1)
    return -(-queried_conditions(trust, dataset) * per_condition(trust, dataset) // shards)


def autoencoder_settings(trust: dict, dataset: str) -> dict:
    """The dataset's own ``autoencoder`` section, else the track's."""
    return trust["datasets"][dataset].get("autoencoder", trust.get("autoencoder", {}))


def autoencoder_input(trust: dict, dataset: str) -> str:
    """A dataset's autoencoder as an input: a configured folder, the manifest of its channel-wise wrapping, or
    the manifest of the one trained here."""
    from condeval.core.io import MANIFEST_SUFFIX

    settings = autoencoder_settings(trust, dataset)
    if settings.get("channelwise"):
        return f"results/trust/{dataset}/autoencoder-channelwise{MANIFEST_SUFFIX}"
    return settings["path"] if "path" in settings else f"results/trust/{dataset}/autoencoder{MANIFEST_SUFFIX}"


def _extractor_section(trust: dict, extractor: str) -> dict:
    return trust["clip"] if extractor == "clip" else trust["extractors"][extractor]


def extractor_input(trust: dict, dataset: str, extractor: str) -> str:
    """An extractor (or the ``clip``) as an input: its configured folder (``{dataset}`` filled), or the
    manifest of the one trained here."""
    from condeval.core.io import MANIFEST_SUFFIX

    section = _extractor_section(trust, extractor)
    if "path" in section:
        return section["path"].replace("{dataset}", dataset)
    return f"results/trust/{dataset}/extractors/{extractor}{MANIFEST_SUFFIX}"


def extractor_loading(trust: dict, extractor: str) -> dict:
    """How a job loads an extractor (or the ``clip``): its precision and, for DINOv3 and SigLIP from the hub,
    the side it reads images at (``trust.extractors.<extractor>.dtype``, ``.image_size``)."""
    section = _extractor_section(trust, extractor)
    return {key: section[key] for key in ("dtype", "image_size") if key in section}


def clip_datasets(trust: dict) -> list[str]:
    """Datasets scored by Appendix J's CLIP alignment too: those with prompts, when a ``clip`` is configured."""
    from condeval.datasets.celeba_prompts import PROMPTED_DATASETS

    return [d for d in trust["datasets"] if "clip" in trust and d in PROMPTED_DATASETS]


def scoring_extractor(trust: dict, variant: str) -> str:
    """The space a variant's samples are scored in: DINOv3 for the vanilla model, a REPA model's teacher."""
    repa = trust["generators"][variant].get("repa")
    return repa["extractor"] if repa else "dinov3"


def sample_extractors(trust: dict, dataset: str, variant: str) -> list[str]:
    """The spaces a variant's samples are scored in: its scoring extractor, DINOv3 (KID's) and, for a dataset
    with prompts, the CLIP (Appendix J)."""
    extractors = {scoring_extractor(trust, variant), "dinov3"}
    return sorted(extractors | ({"clip"} if dataset in clip_datasets(trust) else set()))


def during_generation_variants(trust: dict, dataset: str, regime: str) -> list[str]:
    """The generators scored during generation: through a translator, their aligned features, or both."""
    translator = trust.get("translator", {})
    scored = set(translator.get("variants", [])) | set(translator.get("aligned", []))
    return [v for v in variants(trust, dataset, regime) if v in scored]


def targets(trust: dict) -> list[str]:
    """What ``snakemake trust`` builds: the extractors' and generators' signal, Section 5.1's tables and
    figures, and (with their config sections) the morphology readouts and the scores during generation."""
    signal = [
        path
        for dataset in trust["datasets"]
        for path in (f"results/trust/{dataset}/extractor_signal.json", f"reports/trust/{dataset}/extractor_signal.md")
    ]
    if not trust.get("generators"):
        return signal
    scored = [(d, r) for d in trust["datasets"] for r in regimes(trust) if variants(trust, d, r)]
    figures = [f"reports/trust/{d}/{r}/deciles.png" for d, r in scored]
    # Fig. 7 plots against the Hamming distance to the support, which is 0 for every condition on full support
    figures += [f"reports/trust/{d}/{r}/graded_shift.png" for d, r in scored if r == "held_out"]
    generators = [f"reports/trust/{d}/{r}/generator_signal.md" for d, r in scored]
    morphology = [
        f"reports/trust/rxrx1/{r}/morphology_{kind}"
        for d, r in scored
        if d == "rxrx1" and "morphology" in trust
        for kind in ("table.md", "deciles.png")
    ]
    translated = [
        f"reports/trust/{d}/{r}/during_generation.{kind}"
        for d, r in scored
        if during_generation_variants(trust, d, r)
        for kind in ("md", "png")
    ]
    return signal + ["reports/trust/selection_table.md"] + figures + generators + morphology + translated
