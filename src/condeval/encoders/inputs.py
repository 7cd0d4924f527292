"""What the encoders take in: image and text lists checked by position, images as RGB, batches with a
progress bar, unit feature rows out. Below :mod:`condeval.encoders.features`, :mod:`~condeval.encoders.dino`
and :mod:`~condeval.encoders.patch_encoder`, which all read their inputs through it.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

import numpy as np
import torch
from PIL import Image

from condeval.core.io import read_image
from condeval.core.logs import progress
from condeval.metrics import as_numpy, unit_rows

__all__ = ["ArrayImages", "ResizedImage", "batches", "image_list", "rgb_images", "text_list", "unit_feature_rows"]


def batches(items: Sequence, batch_size: int, desc: str):
    """Consecutive slices of ``items``, ``batch_size`` long, with a progress bar named ``desc``."""
    for start in progress(range(0, len(items), batch_size), desc=desc, unit="batch"):
        yield items[start : start + batch_size]


def unit_feature_rows(features: torch.Tensor) -> np.ndarray:
    """An encoder's output rows, L2-normalised, as float32 numpy on the CPU."""
    return unit_rows(features.float()).cpu().numpy().astype(np.float32)


def image_list(images) -> list:
    """``images`` as a list of PIL images or image file paths, refused by position otherwise.

    One path is refused rather than read as a sequence of characters; an array is pointed to the
    encoders' ``encode``, which takes uint8 (N, 3, H, W).
    """
    if isinstance(images, (str, bytes, os.PathLike, Image.Image)):
        what = "one PIL image" if isinstance(images, Image.Image) else f"one path {str(images)!r}"
        raise TypeError(f"images must be a sequence of PIL images or file paths; got {what} (wrap it in a list)")
    images = list(images)
    bad = next((i for i, image in enumerate(images) if not isinstance(image, (str, os.PathLike, Image.Image))), None)
    if bad is not None:
        raise TypeError(
            f"images[{bad}] must be a PIL image or a file path; got {type(images[bad]).__name__} "
            "(uint8 arrays (N, 3, H, W) go through encode)"
        )
    return images


class ResizedImage(os.PathLike):
    """An image file that the encoders read at ``side`` × ``side`` (RGB, Lanczos) when its batch is read, so
    that many images are compared at a generator's size without holding them all resized in memory.

    Parameters
    ----------
    path : path-like
    side : int
    """

    def __init__(self, path: str | os.PathLike, side: int):
        self.path, self.side = os.fspath(path), int(side)

    def __fspath__(self) -> str:
        return self.path

    def __repr__(self) -> str:
        return f"ResizedImage({self.path!r}, {self.side})"

    def open(self) -> Image.Image:
        """The image, RGB, at ``side`` × ``side``."""
        return _rgb(read_image(self.path), self.path).resize((self.side, self.side), Image.LANCZOS)


#: PIL's 16-bit modes, read as 8 bits by value / 257 (``convert("RGB")`` clips them at 255: a white image).
SIXTEEN_BIT_MODES = ("I;16", "I;16L", "I;16B", "I;16N")


def rgb_images(batch: Sequence) -> list[Image.Image]:
    """RGB PIL images of a batch of PIL images or file paths (files opened here, one batch at a time).

    16-bit images (:data:`SIXTEEN_BIT_MODES`, e.g. a 16-bit PNG) are scaled to 8 bits. 32-bit integer
    and float images (modes ``I`` and ``F``) carry no range PIL can read, so they are refused: convert
    them to 8 bits first.
    """
    return [
        i.open() if isinstance(i, ResizedImage) else _rgb(read_image(i) if isinstance(i, (str, os.PathLike)) else i, i)
        for i in batch
    ]


def _rgb(image: Image.Image, source) -> Image.Image:
    if image.mode in SIXTEEN_BIT_MODES:
        image = Image.fromarray(np.round(np.asarray(image, dtype=np.float64) / 257.0).astype(np.uint8), "L")
    elif image.mode in ("I", "F"):
        where = source if isinstance(source, (str, os.PathLike)) else "an image"
        raise ValueError(
            f"{where}: a 32-bit {'float' if image.mode == 'F' else 'integer'} image (PIL mode "
            f"{image.mode}) has no range to read as 8 bits; convert it to uint8 first"
        )
    return image.convert("RGB")


def text_list(texts, name: str = "texts", hint: str = "wrap it in a list") -> list[str]:
    """``texts`` as a list of str, refused by position otherwise (one str is not read character by
    character); ``name`` and ``hint`` word the message."""
    if isinstance(texts, str):
        raise TypeError(f"{name} must be a sequence of str; got one str {texts!r} ({hint})")
    texts = list(texts)
    bad = next((i for i, text in enumerate(texts) if not isinstance(text, str)), None)
    if bad is not None:
        raise TypeError(f"{name}[{bad}] must be a str; got {type(texts[bad]).__name__}")
    return texts


class ArrayImages:
    """``encode``: uint8 RGB arrays (N, 3, H, W), the layout of
    :meth:`condeval.encoders.patch_encoder.PatchEncoder.encode`, through the encoder's ``image_features``."""

    def encode(self, images, batch_size: int = 128) -> np.ndarray:
        """Unit-norm image features of uint8 RGB images (N, 3, H, W)."""
        images = as_numpy(images)
        if images.ndim != 4 or images.shape[1] != 3 or images.dtype != np.uint8:
            raise ValueError(f"{self.path}: encodes uint8 RGB images (N, 3, H, W); got {images.dtype} {images.shape}")
        return self.image_features([Image.fromarray(image.transpose(1, 2, 0)) for image in images], batch_size)
