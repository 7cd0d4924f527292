"""An RGB ``AutoencoderKL`` applied to each channel of a multichannel image as grey: how the trust-score
paper's official code puts RxRx1's six fluorescence channels through the frozen ``sd-vae-ft-mse``.

Encoding repeats each channel into the three RGB inputs and concatenates the channels' latents
(six channels × 4 latent channels = 24); decoding splits them back, decodes each group to RGB and takes
the mean of the three outputs as the channel (the reading here: the code's decoder output is grey in
RGB, and the mean is the least arbitrary channel of it). The wrapper is a diffusers model, so a
generator pipeline saves and loads it as its ``vae`` like any ``AutoencoderKL``; the denoiser just sees
24 latent channels. :func:`load_autoencoder` opens either kind of folder.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
from diffusers import AutoencoderKL, ConfigMixin, ModelMixin  # ModelMixin here: diffusers' loader looks it up
from diffusers.configuration_utils import register_to_config
from diffusers.models.autoencoders.autoencoder_kl import AutoencoderKLOutput
from diffusers.models.autoencoders.vae import DecoderOutput, DiagonalGaussianDistribution

__all__ = ["ChannelwiseAutoencoderKL", "ModelMixin", "load_autoencoder", "image_channels"]


def image_channels(vae) -> int:
    """The channels of the images an autoencoder reads and draws: an ``AutoencoderKL``'s or ``VQModel``'s
    ``in_channels``, a :class:`ChannelwiseAutoencoderKL`'s ``image_channels``."""
    config = vae.config
    return int(config["image_channels"] if "image_channels" in config else config["in_channels"])


class ChannelwiseAutoencoderKL(ModelMixin, ConfigMixin):
    """Each of ``image_channels`` channels through one RGB ``AutoencoderKL`` as grey (module description).

    Parameters
    ----------
    image_channels : int
        Channels of the images (RxRx1: 6).
    rgb : dict
        The RGB autoencoder's config (``AutoencoderKL.from_config``).
    scaling_factor, shift_factor : float
        The RGB autoencoder's, which the pipelines read from this model's config.
    """

    @register_to_config
    def __init__(
        self, image_channels: int = 6, rgb: dict | None = None, scaling_factor: float = 1.0, shift_factor: float = 0.0
    ):
        super().__init__()
        self.autoencoder = AutoencoderKL.from_config(rgb or {})

    @classmethod
    def wrapping(cls, vae: AutoencoderKL, image_channels: int) -> ChannelwiseAutoencoderKL:
        """The wrapper of a loaded RGB ``vae`` (its weights copied)."""
        if vae.config.in_channels != 3 or vae.config.out_channels != 3:
            raise ValueError(
                f"a channelwise autoencoder wraps an RGB one; this one has {vae.config.in_channels} inputs"
            )
        rgb = {k: v for k, v in vae.config.items() if not k.startswith("_")}
        wrapper = cls(
            image_channels,
            rgb=rgb,
            scaling_factor=vae.config.scaling_factor,
            shift_factor=vae.config.shift_factor or 0.0,
        )
        wrapper.autoencoder.load_state_dict(vae.state_dict())
        return wrapper.to(vae.device, vae.dtype)

    @property
    def latent_channels(self) -> int:
        return self.config.image_channels * self.autoencoder.config.latent_channels

    def encode(self, images: torch.Tensor, return_dict: bool = True):
        """The posterior over the channels' concatenated latents, of images (B, image_channels, H, W)."""
        if images.ndim != 4 or images.shape[1] != self.config.image_channels:
            raise ValueError(f"images must be (B, {self.config.image_channels}, H, W); got {tuple(images.shape)}")
        means, logvars = [], []
        for channel in images.unbind(dim=1):  # one RGB batch at a time: the memory of an RGB encode
            posterior = self.autoencoder.encode(channel[:, None].expand(-1, 3, -1, -1)).latent_dist
            means.append(posterior.mean)
            logvars.append(posterior.logvar)
        posterior = DiagonalGaussianDistribution(torch.cat(means + logvars, dim=1))
        return AutoencoderKLOutput(latent_dist=posterior) if return_dict else (posterior,)

    def decode(self, latents: torch.Tensor, return_dict: bool = True):
        """Images (B, image_channels, H, W) of latents (B, image_channels × latent channels, h, w)."""
        if latents.ndim != 4 or latents.shape[1] != self.latent_channels:
            raise ValueError(f"latents must be (B, {self.latent_channels}, h, w); got {tuple(latents.shape)}")
        groups = latents.split(self.autoencoder.config.latent_channels, dim=1)
        images = torch.stack([self.autoencoder.decode(group).sample.mean(dim=1) for group in groups], dim=1)
        return DecoderOutput(sample=images) if return_dict else (images,)


def load_autoencoder(folder: str | os.PathLike):
    """The autoencoder saved in ``folder``: an ``AutoencoderKL`` or a :class:`ChannelwiseAutoencoderKL`,
    by the ``_class_name`` of its ``config.json``."""
    folder = Path(folder)
    config = folder / "config.json"
    if not config.is_file():
        raise FileNotFoundError(f"{folder}: no config.json, so no saved autoencoder")
    name = json.loads(config.read_text()).get("_class_name")
    classes = {"AutoencoderKL": AutoencoderKL, "ChannelwiseAutoencoderKL": ChannelwiseAutoencoderKL}
    if name not in classes:
        raise ValueError(f"{config}: _class_name {name!r} is not an autoencoder here ({sorted(classes)})")
    return classes[name].from_pretrained(str(folder))
