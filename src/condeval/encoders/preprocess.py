"""A checkpoint's image processor, read from its ``preprocessor_config.json`` and applied with torch alone.

transformers 5 builds the hub's ``DINOv3ViTImageProcessorFast`` (``facebook/dinov3-vitl16-pretrain-lvd1689m``)
only with torchvision, which no torch 2.13 CPU build has. :class:`ImageProcessing` reads the values a
processor file holds (resize, resampling filter, centre crop, rescale, mean and std) and applies them
to uint8 tensors on the model's device, as the Fast processors do (torchvision's resize with
antialiasing, which is ``torch.nn.functional.interpolate(..., antialias=True)``), so the CPU here and a
GPU node read the same folder the same way, with or without torchvision.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

import torch
import torch.nn.functional as F

__all__ = ["ImageProcessing", "PROCESSOR_FILE"]

PROCESSOR_FILE = "preprocessor_config.json"
#: PIL's resampling codes, as processor files store them, and the torch interpolation each is.
_RESAMPLE = {0: "nearest", 2: "bilinear", 3: "bicubic"}


def _side_pair(value, where: str) -> tuple[int, int] | None:
    """``{"height", "width"}``, one int, or ``None``: (height, width); ``shortest_edge`` is read elsewhere."""
    if value is None:
        return None
    if isinstance(value, int):
        return value, value
    if isinstance(value, dict) and {"height", "width"} <= set(value):
        return int(value["height"]), int(value["width"])
    raise ValueError(f"{where}: a size of {value!r} is neither an int nor {{height, width}}")


@dataclass(frozen=True)
class ImageProcessing:
    """Resize, centre crop, rescale and normalise uint8 images (N, 3, H, W), on their device.

    Attributes
    ----------
    size : tuple of int or None
        (height, width) to resize to; ``None`` with ``shortest_edge`` set, or no resize.
    shortest_edge : int or None
        Resize so that the shorter side has this length (aspect kept), as CLIP's processors.
    crop : tuple of int or None
        (height, width) of the centre crop after resizing.
    resample : str
        ``nearest``, ``bilinear`` or ``bicubic``.
    rescale : float
        Factor from uint8 values (the processors' 1/255).
    mean, std : tuple of float
        Per-channel normalisation after rescaling.
    """

    size: tuple[int, int] | None
    shortest_edge: int | None
    crop: tuple[int, int] | None
    resample: str
    rescale: float
    mean: tuple[float, ...]
    std: tuple[float, ...]

    @classmethod
    def from_pretrained(cls, folder: str | os.PathLike, side: int | None = None) -> ImageProcessing:
        """The processing ``folder``'s ``preprocessor_config.json`` describes; ``side`` replaces its
        resize and drops its crop (a square ``side`` × ``side`` input, e.g. DINOv3 at 256 px as the
        trust score's official code reads it).

        Raises
        ------
        FileNotFoundError, ValueError
            Naming the file: no processor file, a resampling filter or size it cannot read.
        """
        path = Path(folder) / PROCESSOR_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{folder}: no {PROCESSOR_FILE} (the checkpoint's image processor)")
        values = json.loads(path.read_text())
        resample = values.get("resample", 2)
        if resample not in _RESAMPLE:
            raise ValueError(
                f"{path}: resample {resample!r} is none of PIL's {sorted(_RESAMPLE)} (nearest, bilinear, bicubic)"
            )
        size = values.get("size") if values.get("do_resize", True) else None
        shortest = size.get("shortest_edge") if isinstance(size, dict) else None
        crop = values.get("crop_size") if values.get("do_center_crop") else None
        if side is not None:
            size, shortest, crop = side, None, None
        rescale = float(values.get("rescale_factor", 1 / 255)) if values.get("do_rescale", True) else 1.0
        mean, std = (
            values.get(key, default) if values.get("do_normalize", True) else default
            for key, default in (("image_mean", [0.0] * 3), ("image_std", [1.0] * 3))
        )
        return cls(
            size=None if shortest else _side_pair(size, str(path)),
            shortest_edge=shortest,
            crop=_side_pair(crop, str(path)),
            resample=_RESAMPLE[resample],
            rescale=rescale,
            mean=tuple(map(float, mean)),
            std=tuple(map(float, std)),
        )

    @property
    def output_size(self) -> tuple[int, int] | None:
        """(height, width) of what :meth:`__call__` returns, when it does not depend on the input."""
        return self.crop or self.size

    def _resize(self, pixels: torch.Tensor) -> torch.Tensor:
        height, width = pixels.shape[-2:]
        if self.shortest_edge is not None:
            scale = self.shortest_edge / min(height, width)
            target = (max(1, int(height * scale)), max(1, int(width * scale)))  # transformers floors the long side
        elif self.size is not None:
            target = self.size
        else:
            return pixels
        if target == (height, width):
            return pixels
        antialias = self.resample != "nearest"
        resized = F.interpolate(
            pixels,
            size=target,
            mode=self.resample,
            antialias=antialias,
            **({} if self.resample == "nearest" else {"align_corners": False}),
        )
        return resized.round().clamp(0, 255)  # the processors resize uint8 images into uint8 (bicubic overshoots)

    def _centre_crop(self, pixels: torch.Tensor) -> torch.Tensor:
        if self.crop is None:
            return pixels
        height, width = pixels.shape[-2:]
        crop_h, crop_w = self.crop
        top, left = max(0, (height - crop_h) // 2), max(0, (width - crop_w) // 2)
        return pixels[..., top : top + crop_h, left : left + crop_w]

    def __call__(self, images: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """Pixel values (N, 3, h, w) in ``dtype`` of uint8 images (N, 3, H, W) (a tensor on any device)."""
        if images.ndim != 4 or images.shape[1] != len(self.mean):
            raise ValueError(f"expects uint8 images (N, {len(self.mean)}, H, W); got shape {tuple(images.shape)}")
        pixels = self._centre_crop(self._resize(images.float()))
        mean = torch.tensor(self.mean, device=pixels.device)[:, None, None]
        std = torch.tensor(self.std, device=pixels.device)[:, None, None]
        return ((pixels * self.rescale - mean) / std).to(dtype)
