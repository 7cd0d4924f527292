"""The trust track's jobs as GPU work (``condeval.core.resources``), from the ``trust:`` config.

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
