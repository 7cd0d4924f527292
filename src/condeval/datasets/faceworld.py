"""The miniature face world: procedurally drawn faces whose four conditioning attributes are visible,
written as CelebA (:mod:`condeval.datasets.celeba`).

Each face shows, by construction:

- **Male**: a beard and short hair (absent: no beard, hair falling past the jaw on both sides);
- **Smiling**: an open, upturned mouth with teeth (absent: a short closed line);
- **Blond_Hair**: yellow hair (absent: black, dark brown or auburn hair);
- **Eyeglasses**: two dark rims and a bridge over the eyes.

Nuisance varies independently of them: skin tone, head size and position, a small tilt, the
background's colours and gradient, the lighting direction and pixel noise. The other 36 CelebA
columns are written as the pixels show them (Black_Hair / Brown_Hair from the hair colour, No_Beard,
Mouth_Slightly_Open, Wearing_Lipstick never) or absent (−1), so no label names something the image
does not show. Attributes are drawn independently (each present with probability 0.45), so every one
of the 16 conditions has real faces, the held-out ones included.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from condeval.datasets.celeba import CELEBA_ATTRIBUTES, IMAGE_FOLDER, write_celeba_lists

__all__ = ["Face", "sample_face", "render_face", "write_face_world", "celeba_row"]

_SKIN = [(241, 194, 167), (224, 172, 138), (198, 134, 100), (160, 105, 72), (112, 72, 50)]
_DARK_HAIR = {"Black_Hair": (28, 24, 22), "Brown_Hair": (92, 58, 34), "auburn": (130, 60, 30)}
_BLOND = (226, 196, 92)
#: CelebA's partition shares (train, val, test): 162,770 / 19,867 / 19,962 of 202,599.
PARTITION_SHARES = (0.8034, 0.0981, 0.0985)


@dataclass(frozen=True)
class Face:
    """One face: the four attributes (0/1) and its nuisance draws."""

    male: int
    smiling: int
    blond: int
    glasses: int
    skin: tuple[int, int, int]
    hair: tuple[int, int, int]
    hair_name: str
    scale: float
    dx: float
    dy: float
    tilt: float
    background: tuple[tuple[int, int, int], tuple[int, int, int]]
    light: float

    @property
    def attributes(self) -> tuple[int, int, int, int]:
        """(Male, Smiling, Blond_Hair, Eyeglasses), the order of :data:`condeval.datasets.celeba.ATTRIBUTES`."""
        return (self.male, self.smiling, self.blond, self.glasses)


def sample_face(rng: np.random.Generator, attributes=None, p: float = 0.45) -> Face:
    """A face with the given attributes (default: each present with probability ``p``) and random nuisance."""
    male, smiling, blond, glasses = attributes if attributes is not None else tuple(int(v) for v in rng.random(4) < p)
    hair_name = "blond" if blond else str(rng.choice(list(_DARK_HAIR)))
    base = _BLOND if blond else _DARK_HAIR[hair_name]
    hair = tuple(int(np.clip(c + rng.normal(0, 10), 0, 255)) for c in base)
    skin = tuple(int(np.clip(c + rng.normal(0, 8), 0, 255)) for c in _SKIN[rng.integers(len(_SKIN))])
    background = tuple(tuple(int(v) for v in rng.integers(40, 220, 3)) for _ in range(2))
    return Face(
        int(male),
        int(smiling),
        int(blond),
        int(glasses),
        skin,
        hair,
        hair_name,
        scale=float(rng.uniform(0.85, 1.1)),
        dx=float(rng.normal(0, 0.04)),
        dy=float(rng.normal(0, 0.03)),
        tilt=float(rng.normal(0, 6)),
        background=background,
        light=float(rng.uniform(0, 2 * math.pi)),
    )


def render_face(face: Face, rng: np.random.Generator, side: int = 64) -> Image.Image:
    """Draw ``face`` at 4× the side, rotate by its tilt, downsample, light it and add pixel noise."""
    big = 4 * side
    layer = Image.new("RGBA", (big, big), (0, 0, 0, 0))  # the face alone, rotated over the background
    draw = ImageDraw.Draw(layer)
    cx, cy = big * (0.5 + face.dx), big * (0.54 + face.dy)
    rx, ry = 0.27 * big * face.scale, 0.34 * big * face.scale
    _hair_back(draw, face, cx, cy, rx, ry)
    draw.ellipse([cx - rx, cy - ry, cx + rx, cy + ry], fill=face.skin)
    if face.male:
        _beard(draw, face, cx, cy, rx, ry)
    _hair_top(draw, face, cx, cy, rx, ry)
    _eyes(draw, face, cx, cy, rx, ry)
    _mouth(draw, face, cx, cy, rx, ry)
    layer = layer.rotate(face.tilt, resample=Image.BICUBIC, center=(cx, cy))
    image = _background(face, big)
    image.paste(layer, (0, 0), layer)
    image = image.filter(ImageFilter.GaussianBlur(1.2)).resize((side, side), Image.LANCZOS)
    pixels = np.asarray(image, dtype=np.float32)
    yy, xx = np.mgrid[0:side, 0:side] / side - 0.5
    shade = 1.0 + 0.25 * (np.cos(face.light) * xx + np.sin(face.light) * yy)
    pixels = pixels * shade[..., None] + rng.normal(0, 6, pixels.shape)
    return Image.fromarray(np.clip(pixels, 0, 255).astype(np.uint8))


def _background(face: Face, big: int) -> Image.Image:
    a, b = (np.array(c, dtype=np.float32) for c in face.background)
    t = np.linspace(0, 1, big, dtype=np.float32)[:, None, None]
    return Image.fromarray((a + (b - a) * t * np.ones((1, big, 1), np.float32)).astype(np.uint8))


def _hair_back(draw, face: Face, cx, cy, rx, ry) -> None:
    """Long hair behind the head, past the jaw (faces without the male cue)."""
    if not face.male:
        draw.rounded_rectangle(
            [cx - 1.3 * rx, cy - 1.1 * ry, cx + 1.3 * rx, cy + 0.95 * ry], radius=rx * 0.6, fill=face.hair
        )


def _hair_top(draw, face: Face, cx, cy, rx, ry) -> None:
    """The crown: a cap over the forehead (short for the male cue, with a fringe otherwise)."""
    top = [cx - 1.08 * rx, cy - 1.12 * ry, cx + 1.08 * rx, cy - 0.05 * ry]
    draw.chord(top, 180, 360, fill=face.hair)
    if not face.male:
        draw.rectangle([cx - 1.05 * rx, cy - 0.6 * ry, cx - 0.8 * rx, cy + 0.4 * ry], fill=face.hair)
        draw.rectangle([cx + 0.8 * rx, cy - 0.6 * ry, cx + 1.05 * rx, cy + 0.4 * ry], fill=face.hair)


def _beard(draw, face: Face, cx, cy, rx, ry) -> None:
    """A beard in the hair's colour, darkened, over the jaw."""
    colour = tuple(int(0.7 * c) for c in face.hair)
    draw.chord([cx - 0.98 * rx, cy - 0.35 * ry, cx + 0.98 * rx, cy + 1.0 * ry], 0, 180, fill=colour)
    draw.ellipse([cx - 0.45 * rx, cy + 0.3 * ry, cx + 0.45 * rx, cy + 0.62 * ry], fill=face.skin)  # the mouth's opening


def _eyes(draw, face: Face, cx, cy, rx, ry) -> None:
    for side in (-1, 1):
        ex, ey = cx + side * 0.42 * rx, cy - 0.12 * ry
        er = 0.1 * rx
        draw.ellipse([ex - er, ey - er, ex + er, ey + er], fill=(30, 30, 40))
        if face.glasses:
            gr = 0.3 * rx
            draw.ellipse([ex - gr, ey - gr, ex + gr, ey + gr], outline=(15, 15, 15), width=max(3, int(0.07 * rx)))
    if face.glasses:
        draw.line(
            [cx - 0.12 * rx, cy - 0.14 * ry, cx + 0.12 * rx, cy - 0.14 * ry],
            fill=(15, 15, 15),
            width=max(3, int(0.06 * rx)),
        )


def _mouth(draw, face: Face, cx, cy, rx, ry) -> None:
    my = cy + 0.45 * ry
    if face.smiling:
        box = [cx - 0.42 * rx, my - 0.22 * ry, cx + 0.42 * rx, my + 0.16 * ry]
        draw.chord(box, 0, 180, fill=(120, 20, 30))
        draw.chord(
            [box[0] + 0.08 * rx, box[1] + 0.02 * ry, box[2] - 0.08 * rx, box[3] - 0.08 * ry],
            0,
            180,
            fill=(245, 245, 240),
        )
    else:
        draw.line([cx - 0.22 * rx, my, cx + 0.22 * rx, my], fill=(120, 40, 45), width=max(3, int(0.06 * rx)))


def celeba_row(face: Face) -> np.ndarray:
    """The face's 40 CelebA values in {−1, 1}: what its pixels show, every other attribute absent."""
    shown = {
        "Male": face.male,
        "Smiling": face.smiling,
        "Blond_Hair": face.blond,
        "Eyeglasses": face.glasses,
        "Black_Hair": face.hair_name == "Black_Hair",
        "Brown_Hair": face.hair_name == "Brown_Hair",
        "No_Beard": not face.male,
        "Mouth_Slightly_Open": face.smiling,
    }
    return np.array([1 if shown.get(name, False) else -1 for name in CELEBA_ATTRIBUTES], dtype=np.int8)


def write_face_world(root: str | Path, n_images: int, seed: int, side: int = 64) -> Path:
    """Write ``n_images`` faces as CelebA under ``root``: JPEGs in ``img_align_celeba/`` and both lists,
    partitions in CelebA's proportions (in file order, as CelebA's are). Deterministic per seed."""
    from condeval.core.io import atomic_path

    root = Path(root)
    rng = np.random.default_rng(seed)
    names, rows = [], []
    for k in range(1, n_images + 1):
        face = sample_face(rng)
        name = f"{k:06d}.jpg"
        with atomic_path(root / IMAGE_FOLDER / name) as tmp:
            render_face(face, rng, side).save(tmp, format="JPEG", quality=92)
        names.append(name)
        rows.append(celeba_row(face))
    bounds = np.cumsum(PARTITION_SHARES)[:2] * n_images
    partitions = [int(np.searchsorted(bounds, k, side="right")) for k in range(n_images)]
    write_celeba_lists(root, names, np.stack(rows), partitions)
    return root
