"""The latent autoencoders of the text-to-image pipelines: a diffusers ``AutoencoderKL`` (SD3, FLUX)
and a ``VQModel`` MoVQ (Kandinsky 2.2), at tiny sizes, trained here in Lightning on mini-world images.

Both are fully convolutional (no mid-block attention), so they train on random crops of the images
and apply to whole ones. The KL autoencoder's ``scaling_factor`` and ``shift_factor`` are set, as
SD3's are, so that scaled latents of the training images have zero mean and unit variance, which is
what the pipelines assume when they start from unit Gaussian noise. Kandinsky's pipelines apply no
latent scaling (the MoVQ's own latents are the diffusion's data), so the MoVQ's scale is folded into
its weights instead (:func:`fold_movq_scale`): trained here, its latents came out with a standard
deviation of 0.1, a tenth of the noise the decoder UNet starts from, and the UNet drew noise.
"""

from __future__ import annotations

import logging
import os

import numpy as np
import torch

from condeval.core.training import ScheduledModule, TrainRecipe, cosine_schedule
from condeval.generators.channelwise import image_channels

__all__ = [
    "tiny_autoencoder_kl",
    "tiny_movq",
    "AutoencoderModule",
    "train_autoencoder",
    "latent_statistics",
    "fold_movq_scale",
    "image_channels",
]

log = logging.getLogger(__name__)


def tiny_autoencoder_kl(
    image_size: int,
    *,
    channels: tuple[int, ...] = (32, 64, 64),
    latent_channels: int = 4,
    layers_per_block: int = 1,
    image_channels: int = 3,
):
    """An ``AutoencoderKL`` that downsamples by ``2 ** (len(channels) - 1)`` into ``latent_channels`` maps.

    ``use_quant_conv`` is off as in SD3's and FLUX's autoencoders; the mid block has no attention.
    ``image_channels``: 3 for RGB, 6 for RxRx1's sites.
    """
    from diffusers import AutoencoderKL

    return AutoencoderKL(
        in_channels=image_channels,
        out_channels=image_channels,
        latent_channels=latent_channels,
        sample_size=image_size,
        down_block_types=("DownEncoderBlock2D",) * len(channels),
        up_block_types=("UpDecoderBlock2D",) * len(channels),
        block_out_channels=tuple(channels),
        layers_per_block=layers_per_block,
        norm_num_groups=8,
        use_quant_conv=False,
        use_post_quant_conv=False,
        mid_block_add_attention=False,
        shift_factor=0.0,
        scaling_factor=1.0,
    )


def tiny_movq(
    image_size: int,
    *,
    channels: tuple[int, ...] = (32, 64, 64),
    latent_channels: int = 4,
    num_vq_embeddings: int = 256,
    layers_per_block: int = 1,
):
    """A ``VQModel`` as Kandinsky 2.2's MoVQ: spatially normalised decoder (``norm_type="spatial"``, whose
    ``SpatialNorm`` has 32 groups: every width a multiple of 32)."""
    from diffusers import VQModel

    return VQModel(
        in_channels=3,
        out_channels=3,
        latent_channels=latent_channels,
        vq_embed_dim=latent_channels,
        num_vq_embeddings=num_vq_embeddings,
        sample_size=image_size,
        norm_type="spatial",
        down_block_types=("DownEncoderBlock2D",) * len(channels),
        up_block_types=("UpDecoderBlock2D",) * len(channels),
        block_out_channels=tuple(channels),
        layers_per_block=layers_per_block,
        norm_num_groups=8,
        mid_block_add_attention=False,
    )


class AutoencoderModule(ScheduledModule):
    """Lightning wrapper: reconstruction (L1 + MSE) plus ``kl_weight`` · KL (``AutoencoderKL``) or the
    VQ commitment loss (``VQModel``) on batches of images in [-1, 1], (B, 3, H, W).

    The MoVQ is trained on the path Kandinsky 2.2's pipeline decodes by: the denoised latents go to
    ``decode(..., force_not_quantize=True)``, so the decoder learns unquantised latents, and the
    commitment loss keeps them near the codebook.

    Training batches are cut to a random ``crop``-pixel square (the same for the whole batch): the
    models are convolutional, so a crop costs a fraction of a whole image and teaches the same filters.
    """

    def __init__(
        self,
        kind: str,
        config: dict,
        schedule: dict | None = None,
        kl_weight: float = 1e-6,
        crop: int | None = None,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.model = _autoencoder_class(kind).from_config(config)

    def _crop(self, images: torch.Tensor) -> torch.Tensor:
        crop, side = self.hparams.crop, images.shape[-1]
        if not crop or crop >= side:
            return images
        top, left = (int(v) for v in torch.randint(0, side - crop + 1, (2,)))
        return images[..., top : top + crop, left : left + crop]

    def _loss(self, batch, training: bool) -> torch.Tensor:
        (images,) = batch
        images = self._crop(images) if training else images
        if self.hparams.kind == "kl":
            posterior = self.model.encode(images).latent_dist
            latents = posterior.sample() if training else posterior.mode()
            regulariser = self.hparams.kl_weight * posterior.kl().mean() / images[0].numel()
            decoded = self.model.decode(latents).sample
        else:  # decoded as Kandinsky's pipeline decodes: the latents themselves (force_not_quantize)
            latents = self.model.encode(images).latents
            _, commit_loss, _ = self.model.quantize(latents)
            decoded, regulariser = self.model.decode(latents, force_not_quantize=True).sample, commit_loss.mean()
        error = decoded - images
        return error.abs().mean() + error.square().mean() + regulariser


def _autoencoder_class(kind: str):
    from diffusers import AutoencoderKL, VQModel

    classes = {"kl": AutoencoderKL, "vq": VQModel}
    if kind not in classes:
        raise ValueError(f"autoencoder kind must be one of {sorted(classes)}, got {kind!r}")
    return classes[kind]


@torch.no_grad()
def latent_statistics(vae, images: torch.Tensor, batch_size: int = 256) -> tuple[float, float]:
    """(mean, standard deviation) of the latents of ``images``: an ``AutoencoderKL``'s latent means
    or a ``VQModel``'s unquantised latents."""

    def encode(chunk):
        encoded = vae.encode(chunk)
        return encoded.latent_dist.mode() if hasattr(encoded, "latent_dist") else encoded.latents

    latents = torch.cat([encode(chunk) for chunk in images.split(batch_size)])
    return float(latents.mean()), float(latents.std())


@torch.no_grad()
def fold_movq_scale(movq, factor: float):
    """Multiply a ``VQModel``'s latents by ``factor`` without changing what it reconstructs.

    The encoder's last convolution (and the codebook) scale by ``factor``; every convolution that
    reads the latent divides by it: ``post_quant_conv`` and the ``conv_y`` / ``conv_b`` of the
    decoder's spatial norms (biases unchanged, since each of these is linear in the latent).
    ``decode(encode(x).latents * 1)`` is unchanged, up to float rounding. Returns ``movq``.
    """
    from diffusers.models.attention_processor import SpatialNorm

    movq.quant_conv.weight.mul_(factor)
    movq.quant_conv.bias.mul_(factor)
    movq.quantize.embedding.weight.mul_(factor)
    readers = [movq.post_quant_conv]
    readers += [
        conv for norm in movq.decoder.modules() if isinstance(norm, SpatialNorm) for conv in (norm.conv_y, norm.conv_b)
    ]
    for conv in readers:
        conv.weight.div_(factor)
    return movq


def train_autoencoder(
    images: np.ndarray,
    out_dir: str | os.PathLike,
    recipe: TrainRecipe,
    *,
    kind: str,
    model: dict,
    crop: int | None = None,
    kl_weight: float = 1e-6,
) -> dict:
    """Train a tiny ``AutoencoderKL`` (``kind="kl"``) or MoVQ ``VQModel`` (``"vq"``) and ``save_pretrained`` it.

    Parameters
    ----------
    images : ndarray
        Training images in [-1, 1], float32 (N, C, H, W) (C: the model's ``image_channels``); the first
        ``recipe.held_out`` validate.
    out_dir : path-like
        Folder receiving the model (``AutoencoderKL.from_pretrained(out_dir)`` loads it).
    recipe : condeval.core.training.TrainRecipe
        Epochs, batch size, peak learning rate (warm-up then cosine decay), held-out images, seed, where it
        runs and the run's fingerprint (a changed setting trains afresh instead of resuming).
    kind : {"kl", "vq"}
    model : dict
        Keyword arguments of :func:`tiny_autoencoder_kl` or :func:`tiny_movq`.
    crop : int, optional
        Side of the random training crop (whole images when ``None``).
    kl_weight : float
        Weight of the KL term (``"kl"`` only), per pixel value.

    Returns
    -------
    dict
        The training summary, with the ``scaling_factor`` and ``shift_factor`` set (``"kl"``) or the
        latent mean and the standard deviation folded into the weights (``"vq"``).
    """
    import pytorch_lightning as pl

    from condeval.core.io import image_batch
    from condeval.core.resources import optimizer_steps
    from condeval.encoders.train import train_and_export

    pl.seed_everything(recipe.seed, workers=True, verbose=False)
    images = image_batch(images, kind="signed")
    side = images.shape[-1]
    build = tiny_autoencoder_kl if kind == "kl" else tiny_movq
    config = dict(build(side, **model).config)
    image_batch(images, kind="signed", channels=config["in_channels"])
    steps = optimizer_steps(len(images) - recipe.held_out, recipe.batch_size, recipe.epochs)
    module = AutoencoderModule(
        kind, config, schedule=cosine_schedule(recipe.lr, steps, max(1, steps // 20)), kl_weight=kl_weight, crop=crop
    )
    summary = train_and_export(module, (images,), out_dir, recipe)
    summary.update(_normalise_latents(out_dir, kind, images[recipe.held_out : recipe.held_out + 2048]))
    return summary


def _normalise_latents(out_dir: str | os.PathLike, kind: str, images: np.ndarray) -> dict:
    """Unit-variance latents for the saved model: ``shift_factor`` and ``scaling_factor`` in an
    ``AutoencoderKL``'s config (SD3's normalisation, applied by the pipelines), the scale folded into
    a MoVQ's weights (:func:`fold_movq_scale`; its mean, about 0, is left)."""
    from condeval.core.io import atomic_directory

    model = _autoencoder_class(kind).from_pretrained(str(out_dir)).eval()
    mean, std = latent_statistics(model, torch.as_tensor(images))
    if kind == "kl":
        model.register_to_config(shift_factor=mean, scaling_factor=1.0 / std)
        normalised = {"shift_factor": mean, "scaling_factor": 1.0 / std}
    else:
        fold_movq_scale(model, 1.0 / std)
        normalised = {"latent_mean": mean, "latent_std_folded": std}
    with atomic_directory(out_dir) as folder:
        model.save_pretrained(folder)
    log.info("latents normalised: %s", normalised)
    return normalised
