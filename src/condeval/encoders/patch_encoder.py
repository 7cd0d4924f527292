"""A saved DINOv3 ViT or SigLIP vision folder read as the trust score's feature: the mean patch token.

``PatchEncoder(path)`` loads ``facebook/dinov3-vitl16-pretrain-lvd1689m``, ``google/siglip-so400m-patch14-224``
(its vision tower) or a tiny folder trained here, all with ``from_pretrained``, in the precision asked
(``dtype``; bfloat16 on a GPU by default). Pixels go through the folder's image processor when it has
one (the hub checkpoints: resize and ImageNet / SigLIP normalisation), read from its
``preprocessor_config.json`` and applied with torch (:class:`~condeval.encoders.preprocess.ImageProcessing`:
the hub's DINOv3 names a processor class that transformers builds only with torchvision). Such a
checkpoint reads RGB: six-channel RxRx1 sites are read as their composite
(:func:`condeval.datasets.rxrx1.composites`, as the official code and CellProfiler's input). A folder
without a processor (the tiny extractors, any channel count) reads each channel scaled to [−1, 1]
(:func:`condeval.encoders.patch_features.pixel_values`), as it was trained. Features are returned as
float32, not normalised: the trust score and KID normalise inside.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from condeval.encoders.inputs import batches
from condeval.encoders.patch_features import mean_patch_features, patch_tokens, pixel_values
from condeval.encoders.preprocess import PROCESSOR_FILE, ImageProcessing

__all__ = ["PatchEncoder"]


class PatchEncoder:
    """Mean-patch features of uint8 images (N, C, H, W) from a saved DINOv3 or SigLIP folder.

    Parameters
    ----------
    path : path-like
        A ``save_pretrained`` folder of a ``DINOv3ViTModel``, ``SiglipVisionModel`` or ``SiglipModel``.
    device : str, optional
        ``"cuda"`` on a GPU; default CPU.
    dtype : {"auto", "bfloat16", "float16", "float32"}, optional
        The model's precision (:func:`condeval.core.devices.torch_dtype`; default auto).
    image_size : int, optional
        Read images at ``image_size`` × ``image_size`` instead of the processor's size (DINOv3 at
        256 px, as the official code; its rotary positions take any multiple of the patch).

    Examples
    --------
    >>> import tempfile, numpy as np, torch
    >>> from condeval.encoders.patch_encoder import PatchEncoder
    >>> from condeval.encoders.patch_features import tiny_dinov3
    >>> _ = torch.manual_seed(0)
    >>> with tempfile.TemporaryDirectory() as folder:       # a random tiny DINOv3 saved as a checkpoint is
    ...     tiny_dinov3(16, width=16, layers=1, heads=2, patch_size=8).save_pretrained(folder)
    ...     encoder = PatchEncoder(folder)                   # loaded like facebook/dinov3-vitl16-pretrain-lvd1689m
    >>> images = np.random.default_rng(0).integers(0, 256, (2, 3, 16, 16), dtype=np.uint8)
    >>> features = encoder.encode(images)                    # the mean of each image's 4 patch tokens
    >>> features.shape, features.dtype, encoder.tokens(images).shape
    ((2, 16), dtype('float32'), (2, 4, 16))
    >>> PatchEncoder("no-such-folder")
    Traceback (most recent call last):
    ...
    FileNotFoundError: no-such-folder: no saved model folder here (no config.json)
    """

    #: What :meth:`encode` returns, as feature shards record it.
    feature = "mean patch token"

    def __init__(
        self,
        path: str | os.PathLike,
        device: str | None = None,
        dtype: str | None = None,
        image_size: int | None = None,
    ):
        from transformers import AutoConfig, AutoModel

        from condeval.core.devices import check_device, log_precision, torch_dtype

        self.path = Path(path)
        if not (self.path / "config.json").is_file():
            raise FileNotFoundError(f"{self.path}: no saved model folder here (no config.json)")
        self.device = check_device(device or "cpu")
        self.dtype = torch_dtype(dtype, self.device)
        model_type = AutoConfig.from_pretrained(str(path)).model_type
        model = AutoModel.from_pretrained(str(path), dtype=self.dtype)
        self.model = (model.vision_model if model_type == "siglip" else model).eval().to(self.device)
        log_precision(self.model, self.path)
        has_processor = (self.path / PROCESSOR_FILE).is_file()
        if image_size is not None and not has_processor:
            raise ValueError(
                f"{self.path}: image_size is for a checkpoint with an image processor; this folder has "
                "none (it reads images at their own size)"
            )
        self.processing = ImageProcessing.from_pretrained(path, image_size) if has_processor else None

    @property
    def identity(self) -> dict:
        from condeval.encoders.shards import model_identity

        return model_identity(self.path)

    @property
    def width(self) -> int:
        return int(self.model.config.hidden_size)

    @property
    def channels(self) -> int:
        """The channels the model reads (its ``num_channels``: 3, or a tiny RxRx1 extractor's 6)."""
        return int(self.model.config.num_channels)

    def _checked(self, images) -> np.ndarray:
        """uint8 images (N, C, H, W) as the model reads them: six-channel sites composed to RGB for an RGB
        checkpoint with a processor; any other channel count the model does not read is refused."""
        from condeval.core.io import image_batch
        from condeval.datasets.rxrx1 import CHANNELS, composites

        images = image_batch(images)
        if self.processing is not None and self.channels == 3 and images.shape[1] == CHANNELS:
            return composites(images)
        if images.shape[1] != self.channels:
            raise ValueError(
                f"{self.path} reads {self.channels}-channel images (N, {self.channels}, H, W); got shape {images.shape}"
            )
        return images

    def _pixels(self, images: np.ndarray) -> torch.Tensor:
        """The model's input on its device and in its dtype."""
        if self.processing is None:
            return pixel_values(images).to(self.device, self.dtype)
        return self.processing(torch.from_numpy(np.ascontiguousarray(images)).to(self.device), self.dtype)

    @torch.no_grad()
    def tokens(self, images, batch_size: int = 256) -> np.ndarray:
        """(N, P, D) float32 patch tokens of uint8 images (N, C, H, W): REPA's alignment targets."""

        images = self._checked(images)
        chunks = [
            patch_tokens(self.model, self._pixels(b)).float().cpu().numpy()
            for b in batches(images, batch_size, "patch tokens")
        ]
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

        images = self._checked(images)
        chunks = [
            mean_patch_features(self.model, self._pixels(batch)).float().cpu().numpy()
            for batch in batches(images, batch_size, "patch features")
        ]
        features = np.concatenate(chunks) if chunks else np.zeros((0, self.width), np.float32)
        if not np.isfinite(features).all():
            raise ValueError(f"{self.path}: non-finite features (row {int(np.argwhere(~np.isfinite(features))[0, 0])})")
        return features.astype(np.float32)
