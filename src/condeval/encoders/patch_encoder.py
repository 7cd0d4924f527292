"""A saved DINOv3 ViT or SigLIP vision folder read as the trust score's feature: the mean patch token.

``PatchEncoder(path)`` loads ``facebook/dinov3-vitl16-pretrain-lvd1689m``, ``google/siglip-so400m-patch14-224``
(its vision tower) or a tiny folder trained here, all with ``from_pretrained``. Pixels go through the
folder's image processor when it has one (the hub checkpoints: resize and ImageNet / SigLIP
normalisation, RGB only); a folder without one (the tiny extractors, any channel count) reads each
channel scaled to [−1, 1] (:func:`condeval.encoders.patch_features.pixel_values`), as it was trained.
Features are returned as computed, not normalised: the trust score and KID normalise inside.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from condeval.encoders.patch_features import mean_patch_features, patch_tokens, pixel_values

__all__ = ["PatchEncoder"]

_PROCESSOR_FILE = "preprocessor_config.json"


class PatchEncoder:
    """Mean-patch features of uint8 images (N, C, H, W) from a saved DINOv3 or SigLIP folder.

    Parameters
    ----------
    path : path-like
        A ``save_pretrained`` folder of a ``DINOv3ViTModel``, ``SiglipVisionModel`` or ``SiglipModel``.
    device : str, optional
        ``"cuda"`` on a GPU; default CPU.
    """

    #: What :meth:`encode` returns, as feature shards record it.
    feature = "mean patch token"

    def __init__(self, path: str | os.PathLike, device: str | None = None):
        from transformers import AutoConfig, AutoModel

        from condeval.core.devices import check_device

        self.path = Path(path)
        if not (self.path / "config.json").is_file():
            raise FileNotFoundError(f"{self.path}: no saved model folder here (no config.json)")
        self.device = check_device(device or "cpu")
        model_type = AutoConfig.from_pretrained(str(path)).model_type
        model = AutoModel.from_pretrained(str(path))
        self.model = (model.vision_model if model_type == "siglip" else model).eval().to(self.device)
        self.image_processor = None
        if (self.path / _PROCESSOR_FILE).exists():
            from transformers import AutoImageProcessor

            self.image_processor = AutoImageProcessor.from_pretrained(str(path))

    @property
    def identity(self) -> dict:
        from condeval.encoders.shards import model_identity

        return model_identity(self.path)

    @property
    def width(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def channels(self) -> int:
        """The channels an image must have (the model's ``num_channels``: 3, or RxRx1's 6)."""
        return int(self.model.config.num_channels)

    def _checked(self, images) -> np.ndarray:
        from condeval.core.io import image_batch

        images = image_batch(images)
        if images.shape[1] != self.channels:
            raise ValueError(f"{self.path} reads {self.channels}-channel images (N, {self.channels}, H, W); got "
                             f"shape {images.shape}")  # fmt: skip
        return images

    def _pixels(self, images: np.ndarray) -> torch.Tensor:
        if self.image_processor is None:
            return pixel_values(images)
        if images.shape[1] != 3:
            raise ValueError(f"{self.path}: its image processor reads RGB; got {images.shape[1]} channels")
        return self.image_processor(list(images.transpose(0, 2, 3, 1)), return_tensors="pt")["pixel_values"]

    @torch.no_grad()
    def tokens(self, images, batch_size: int = 256) -> np.ndarray:
        """(N, P, D) float32 patch tokens of uint8 images (N, C, H, W): REPA's alignment targets."""
        from condeval.encoders.features import _batches

        images = self._checked(images)
        chunks = [patch_tokens(self.model, self._pixels(b).to(self.device)).float().cpu().numpy()
                  for b in _batches(images, batch_size, "patch tokens")]  # fmt: skip
        if not chunks:
            raise ValueError("tokens needs at least one image (the token count is read from an image)")
        return np.concatenate(chunks).astype(np.float32)

    @torch.no_grad()
    def encode(self, images, batch_size: int = 256) -> np.ndarray:
        """(N, D) float32 mean-patch features of uint8 images (N, C, H, W).

        Raises
        ------
        ValueError
            On a wrong shape or dtype, or features that are not finite.
        """
        from condeval.encoders.features import _batches

        images = self._checked(images)
        chunks = [
            mean_patch_features(self.model, self._pixels(batch).to(self.device)).float().cpu().numpy()
            for batch in _batches(images, batch_size, "patch features")
        ]  # fmt: skip
        features = np.concatenate(chunks) if chunks else np.zeros((0, self.width), np.float32)
        if not np.isfinite(features).all():
            raise ValueError(f"{self.path}: non-finite features (row {int(np.argwhere(~np.isfinite(features))[0, 0])})")
        return features.astype(np.float32)
