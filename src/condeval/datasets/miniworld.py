"""The miniature COCO world: rendered scenes with captions, written in MS-COCO's exact format.

Every track's offline default runs on it: the captions file loads with
:func:`condeval.datasets.coco.load_captions` exactly as the real ``captions_val2014.json`` does.

A scene holds 1-4 objects, each a shape noun, a colour, a size and a position on a textured,
noisy background (JPEG, default 64×64). Each image gets five captions from a small grammar with
synonyms, several templates, relations (left of, above, next to, ...), counts, and human-like
omissions (a caption may name only the salient objects). The generator knows every token's part
of speech (UPOS) and which object it refers to; that goes to a sidecar JSON-lines file, from
which word-level error labels are built later.

Files written under ``root``::

    annotations/captions_{split}2014.json    COCO layout: info, images, licenses, annotations
    annotations/scenes_{split}2014.json      per image: the objects (shape, colour, size, centre)
    annotations/tokens_{split}2014.jsonl     per caption: tokens, UPOS tags, object index or -1
    {split}2014/COCO_{split}2014_%012d.jpg
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from condeval.core.io import atomic_path

__all__ = [
    "SHAPES",
    "COLOURS",
    "SceneObject",
    "plural",
    "vocabulary",
    "noun_shapes",
    "swap_shape_noun",
    "corrupt_caption",
    "Caption",
    "draw_scene",
    "render_scene",
    "captions_for",
    "write_split",
    "images_with_shapes",
]

#: shape -> nouns a caption may use for it (the first is the canonical one).
SHAPES: dict[str, tuple[str, ...]] = {
    "circle": ("circle", "disc"),
    "square": ("square", "box"),
    "triangle": ("triangle",),
    "star": ("star",),
    "cross": ("cross", "plus"),
    "diamond": ("diamond", "rhombus"),
    "ring": ("ring", "donut"),
    "arrow": ("arrow",),
    "bar": ("bar", "stripe"),
    "crescent": ("crescent", "moon"),
    "semicircle": ("semicircle", "dome"),
    "hourglass": ("hourglass",),
}
#: colour -> RGB. Every colour lies well outside the background's range, so every object stands out
#: from the field around it (tests measure it in rendered pixels): mid-gray (128, 128, 128) sat inside
#: 95-160 and was invisible (1.5 RGB units from its surround at worst), so "gray" is a light gray,
#: 78 units from white and at least 115 from the field around it.
COLOURS: dict[str, tuple[int, int, int]] = {
    "red": (220, 30, 30),
    "green": (30, 170, 50),
    "blue": (30, 60, 220),
    "yellow": (235, 220, 40),
    "orange": (245, 140, 20),
    "purple": (140, 40, 180),
    "pink": (245, 130, 190),
    "brown": (130, 80, 30),
    "cyan": (40, 210, 220),
    "white": (245, 245, 245),
    "black": (15, 15, 15),
    "gray": (200, 200, 200),
}
# The background: a smooth colour field drawn from BACKGROUND_RANGE per channel, plus pixel noise.
# A high-contrast field (40–215, noise 12) hid the outlines from a tiny ViT: trained contrastively it
# named colours (99%) but shapes at chance; with a supervised shape label it stayed at chance for
# 1,200 steps. At 95–160 the same CLIP learns shape (and retrieval R@1 0.07 -> 0.17).
BACKGROUND_RANGE = (95, 160)
PIXEL_NOISE = 8.0
# Shapes are told apart by outline, not by corner count: at 64 px, hexagons and octagons drawn in a
# 7-pixel radius are circles to any encoder (a tiny CLIP could not tell them from discs).
SIZES = {"small": 0.13, "large": 0.21}  # radius as a fraction of the image side
# Object centres sit on the centres of an 8 × 8 grid, the patch grid of a ViT with patch 8 at any
# image side. With centres anywhere, each shape met a patch-8 ViT in 64 pixel alignments and a tiny
# one trained *supervised* on lone objects named 18% of shapes after 400 steps (chance 8%); on the
# grid it named 65% (docs/crel/method.md, the miniature image-text setting). Positions still vary (8 per axis) and the
# relations the captions state are unchanged.
POSITION_GRID = 8
_SIZE_WORDS = {"small": ("small", "little", "tiny"), "large": ("large", "big")}
_NUMBERS = {2: "two", 3: "three", 4: "four"}
_BACKGROUNDS = ("noisy", "textured", "blurry")
#: every other word a template or relation may emit.
_FUNCTION_WORDS = (
    "a",
    "an",
    "there",
    "is",
    "are",
    "and",
    "on",
    "background",
    "left",
    "right",
    "of",
    "next",
    "to",
    "above",
    "below",
)


@dataclass(frozen=True)
class SceneObject:
    """One object of a scene; ``x``, ``y`` are its centre in [0, 1] (y grows downwards)."""

    shape: str
    colour: str
    size: str
    x: float
    y: float


@dataclass
class Caption:
    """A caption with, per token, its universal part of speech and the object it names (-1: none)."""

    tokens: list[str]
    pos: list[str]
    objects: list[int]

    @property
    def text(self) -> str:
        return " ".join(self.tokens)


def plural(noun: str) -> str:
    """``box`` -> ``boxes``, ``circle`` -> ``circles`` (the grammar's only inflection)."""
    return noun + ("es" if noun.endswith(("x", "s")) else "s")


def vocabulary() -> list[str]:
    """Every word the caption grammar can emit, sorted: the tokenizers' word list."""
    nouns = [noun for names in SHAPES.values() for noun in names]
    sizes = [word for words in _SIZE_WORDS.values() for word in words]
    words = {*nouns, *map(plural, nouns), *COLOURS, *sizes, *_NUMBERS.values(), *_BACKGROUNDS, *_FUNCTION_WORDS}
    return sorted(words)


# ------------------------------------------------------------------------------------ scenes
def draw_scene(
    rng: np.random.Generator, shapes: Sequence[str] | None = None, grid: int | None = POSITION_GRID
) -> list[SceneObject]:
    """1-4 objects in distinct cells of a 3×3 layout, jittered, then moved to the nearest grid point.

    ``shapes`` limits the objects' shapes (default: all of ``SHAPES``). ``grid``: centres snap to
    the centres of a ``grid`` × ``grid`` lattice (:data:`POSITION_GRID`), never so close to the border
    that the object is cut; ``None`` keeps the jittered position (positions vary continuously).
    """
    shapes = list(SHAPES) if shapes is None else list(shapes)
    n = int(rng.integers(1, 5))
    cells = rng.choice(9, size=n, replace=False)
    objects = []
    for cell in cells:
        row, col = divmod(int(cell), 3)
        shape, colour, size = str(rng.choice(shapes)), str(rng.choice(list(COLOURS))), str(rng.choice(list(SIZES)))
        margin = SIZES[size] + 0.02  # whole objects: never cut by the border
        x = float(np.clip((col + 0.5 + rng.uniform(-0.2, 0.2)) / 3, margin, 1 - margin))
        y = float(np.clip((row + 0.5 + rng.uniform(-0.2, 0.2)) / 3, margin, 1 - margin))
        if grid is not None:
            x, y = _nearest_grid_point(x, grid, margin), _nearest_grid_point(y, grid, margin)
        objects.append(SceneObject(shape=shape, colour=colour, size=size, x=x, y=y))
    return objects


def _nearest_grid_point(position: float, grid: int, margin: float) -> float:
    """The centre of a ``grid``-cell lattice nearest ``position`` among those at least ``margin`` from the border."""
    centres = (np.arange(grid) + 0.5) / grid
    allowed = centres[(centres >= margin) & (centres <= 1 - margin)]
    return float(allowed[np.argmin(np.abs(allowed - position))])


def _polygon(n: int, cx: float, cy: float, r: float, phase: float = -math.pi / 2) -> list[tuple[float, float]]:
    return [
        (cx + r * math.cos(phase + 2 * math.pi * k / n), cy + r * math.sin(phase + 2 * math.pi * k / n))
        for k in range(n)
    ]


def _crescent(cx: float, cy: float, r: float, samples: int = 48) -> list[tuple[float, float]]:
    """Outline of the disc (cx, cy, r) minus the disc (cx + 0.45 r, cy, 0.8 r): a moon opening right."""
    t = np.linspace(0, 2 * np.pi, samples, endpoint=False)
    offset, inner = 0.45 * r, 0.8 * r
    outer = [
        (cx + r * math.cos(a), cy + r * math.sin(a))
        for a in t
        if math.hypot(r * math.cos(a) - offset, r * math.sin(a)) > inner
    ]
    cut = [
        (cx + offset + inner * math.cos(a), cy + inner * math.sin(a))
        for a in t[::-1]
        if math.hypot(offset + inner * math.cos(a), inner * math.sin(a)) < r
    ]
    return outer + cut


def _draw_object(draw: ImageDraw.ImageDraw, obj: SceneObject, side: int) -> None:
    cx, cy, r = obj.x * side, obj.y * side, SIZES[obj.size] * side
    fill = COLOURS[obj.colour]
    box = (cx - r, cy - r, cx + r, cy + r)
    if obj.shape == "circle":
        draw.ellipse(box, fill=fill)
    elif obj.shape == "ring":
        draw.ellipse(box, outline=fill, width=max(2, int(r / 2.5)))
    elif obj.shape == "square":
        draw.rectangle((cx - 0.8 * r, cy - 0.8 * r, cx + 0.8 * r, cy + 0.8 * r), fill=fill)
    elif obj.shape == "bar":
        draw.rectangle((cx - r, cy - 0.35 * r, cx + r, cy + 0.35 * r), fill=fill)
    elif obj.shape == "cross":
        w = 0.33 * r
        draw.rectangle((cx - r, cy - w, cx + r, cy + w), fill=fill)
        draw.rectangle((cx - w, cy - r, cx + w, cy + r), fill=fill)
    elif obj.shape == "star":
        points = [
            p
            for k in range(5)
            for p in (_polygon(5, cx, cy, r)[k], _polygon(5, cx, cy, 0.45 * r, -math.pi / 2 + math.pi / 5)[k])
        ]
        draw.polygon(points, fill=fill)
    elif obj.shape == "crescent":
        draw.polygon(_crescent(cx, cy, r), fill=fill)
    elif obj.shape == "semicircle":
        draw.pieslice(box, 180, 360, fill=fill)
    elif obj.shape == "hourglass":
        w = 0.8 * r
        draw.polygon([(cx - w, cy - r), (cx + w, cy - r), (cx, cy)], fill=fill)
        draw.polygon([(cx - w, cy + r), (cx + w, cy + r), (cx, cy)], fill=fill)
    elif obj.shape == "arrow":
        w = 0.3 * r
        draw.polygon(
            [(cx - r, cy - w), (cx, cy - w), (cx, cy - r), (cx + r, cy), (cx, cy + r), (cx, cy + w), (cx - r, cy + w)],
            fill=fill,
        )
    else:
        sides = {"triangle": 3, "diamond": 4}[obj.shape]
        phase = 0.0 if obj.shape == "diamond" else -math.pi / 2
        draw.polygon(_polygon(sides, cx, cy, r, phase), fill=fill)


def render_scene(objects: list[SceneObject], rng: np.random.Generator, side: int = 64) -> Image.Image:
    """The scene on a textured background (smooth colour field plus pixel noise), objects in order.

    Later objects may partly occlude earlier ones; the background varies in colour and
    brightness so that no caption word can be read off a single pixel statistic.
    """
    coarse = rng.uniform(*BACKGROUND_RANGE, size=(4, 4, 3)).astype(np.uint8)
    background = Image.fromarray(coarse, "RGB").resize((side, side), Image.BICUBIC)
    draw = ImageDraw.Draw(background)
    for obj in objects:
        _draw_object(draw, obj, side)
    image = background.filter(ImageFilter.GaussianBlur(0.6))
    noisy = np.asarray(image, dtype=np.float64) + rng.normal(0, PIXEL_NOISE, size=(side, side, 3))
    return Image.fromarray(np.clip(noisy, 0, 255).astype(np.uint8), "RGB")


# ---------------------------------------------------------------------------------- captions
class _Builder:
    def __init__(self) -> None:
        self.caption = Caption([], [], [])

    def add(self, word: str, pos: str, obj: int = -1) -> _Builder:
        self.caption.tokens.append(word)
        self.caption.pos.append(pos)
        self.caption.objects.append(obj)
        return self


def _noun_phrase(b: _Builder, objects: list[SceneObject], group: list[int], rng: np.random.Generator) -> None:
    """``a small red circle`` or, for a group of alike objects, ``two red circles``."""
    first = objects[group[0]]
    noun = str(rng.choice(SHAPES[first.shape]))
    if len(group) > 1:
        b.add(_NUMBERS[len(group)], "NUM", group[0])
        if rng.random() < 0.8:
            b.add(first.colour, "ADJ", group[0])
        b.add(plural(noun), "NOUN", group[0])
        return
    size_first = rng.random() < 0.5
    if size_first and rng.random() < 0.7:
        b.add("a", "DET").add(str(rng.choice(_SIZE_WORDS[first.size])), "ADJ", group[0])
    else:
        b.add("a", "DET")
    if rng.random() < 0.85:
        b.add(first.colour, "ADJ", group[0])
    b.add(noun, "NOUN", group[0])


def _relation(a: SceneObject, b: SceneObject) -> list[tuple[str, str]]:
    """Words of the relation of ``a`` to ``b`` (left of, right of, above, below, next to)."""
    dx, dy = b.x - a.x, b.y - a.y
    if abs(dx) >= abs(dy):
        words = ["left", "of"] if dx > 0 else ["right", "of"]
        if abs(dx) < 0.4 and abs(dy) < 0.15:
            words = ["next", "to"]
        return [(words[0], "ADV"), (words[1], "ADP")]
    return [("above", "ADP")] if dy > 0 else [("below", "ADP")]


def _groups(objects: list[SceneObject], order: list[int]) -> list[list[int]]:
    """Objects grouped by (shape, colour), in salience order, so alike objects are counted."""
    groups: dict[tuple[str, str], list[int]] = {}
    for i in order:
        groups.setdefault((objects[i].shape, objects[i].colour), []).append(i)
    return list(groups.values())


def captions_for(objects: list[SceneObject], rng: np.random.Generator, n: int = 5) -> list[Caption]:
    """``n`` captions of a scene: templates, synonyms, relations, counts and omissions.

    Salience is size, then position (top-left first); with probability 0.35 a caption names only
    the most salient object(s), as people do.
    """
    order = sorted(range(len(objects)), key=lambda i: (objects[i].size != "large", objects[i].y, objects[i].x))
    captions = []
    for _ in range(n):
        groups = _groups(objects, order)
        if len(groups) > 1 and rng.random() < 0.35:
            groups = groups[: int(rng.integers(1, len(groups)))]
        b = _Builder()
        template = int(rng.integers(0, 3)) if len(groups) >= 2 else int(rng.integers(0, 2))
        if template == 0:
            b.add("there", "PRON").add("is" if len(groups[0]) == 1 else "are", "VERB")
            for k, group in enumerate(groups):
                if k:
                    b.add("and", "CCONJ")
                _noun_phrase(b, objects, group, rng)
        elif template == 1:
            for k, group in enumerate(groups):
                if k:
                    b.add("and", "CCONJ")
                _noun_phrase(b, objects, group, rng)
            b.add("on", "ADP").add("a", "DET").add(str(rng.choice(_BACKGROUNDS)), "ADJ").add("background", "NOUN")
        else:
            _noun_phrase(b, objects, groups[0], rng)
            for word, pos in _relation(objects[groups[0][0]], objects[groups[1][0]]):
                b.add(word, pos)
            _noun_phrase(b, objects, groups[1], rng)
        captions.append(_with_articles(b.caption))
    return captions


def noun_shapes() -> dict[str, tuple[str, bool]]:
    """Every shape noun, singular and plural -> (its shape, whether it is plural)."""
    table = {}
    for shape, nouns in SHAPES.items():
        for noun in nouns:
            table[noun], table[plural(noun)] = (shape, False), (shape, True)
    return table


def swap_shape_noun(
    tokens: list[str], rng: np.random.Generator, shapes: list[str] | None = None
) -> tuple[list[str], int] | None:
    """A copy of ``tokens`` with one shape noun replaced by a noun of another shape (same number).

    The FOIL construction on the mini-world: the result is a fluent caption that is wrong about
    exactly one object. ``shapes`` limits the replacement shapes (default: all). Returns the new
    tokens and the swapped position, or None if the caption names no shape.
    """
    table = noun_shapes()
    positions = [k for k, token in enumerate(tokens) if token in table]
    if not positions:
        return None
    k = int(rng.choice(positions))
    shape, is_plural = table[tokens[k]]
    others = [s for s in (shapes or list(SHAPES)) if s != shape]
    noun = str(rng.choice(SHAPES[str(rng.choice(others))]))
    swapped = list(tokens)
    swapped[k] = plural(noun) if is_plural else noun
    if k > 0 and swapped[k - 1] in ("a", "an"):  # ``a`` / ``an`` agree with an adjacent noun
        swapped[k - 1] = "an" if swapped[k][0] in "aeiou" else "a"
    return swapped, k


def _alternatives(word: str) -> list[str]:
    """Words of the same kind that make ``word`` wrong: another colour, size, count or shape noun
    (of the same number); [] for a word that describes no object."""
    if word in COLOURS:
        return [c for c in COLOURS if c != word]
    for size, words in _SIZE_WORDS.items():
        if word in words:
            return [w for other, ws in _SIZE_WORDS.items() if other != size for w in ws]
    if word in _NUMBERS.values():
        return [n for n in _NUMBERS.values() if n != word]
    table = noun_shapes()
    if word in table:
        shape, is_plural = table[word]
        return [plural(n) if is_plural else n for other, nouns in SHAPES.items() if other != shape for n in nouns]
    return []


def corrupt_caption(tokens: list[str], n_errors: int, rng: np.random.Generator) -> tuple[list[str], list[int]]:
    """A copy of ``tokens`` with up to ``n_errors`` words about objects made wrong, and the error mask.

    The words that can go wrong are those that describe an object: its colour, its size, a count
    or its shape noun; each is replaced by another word of its kind (a noun keeps its number).
    Articles are left as they are. Returns the new tokens and, per token, 1 if it was changed.
    """
    candidates = [k for k, token in enumerate(tokens) if _alternatives(token)]
    chosen = rng.choice(candidates, size=min(n_errors, len(candidates)), replace=False) if candidates else []
    corrupted, errors = list(tokens), [0] * len(tokens)
    for k in sorted(int(c) for c in chosen):
        corrupted[k], errors[k] = str(rng.choice(_alternatives(tokens[k]))), 1
    return corrupted, errors


def _with_articles(caption: Caption) -> Caption:
    """``a`` becomes ``an`` before a vowel sound (``an octagon``, ``an orange ring``)."""
    for k, word in enumerate(caption.tokens[:-1]):
        if word == "a" and caption.tokens[k + 1][0] in "aeiou":
            caption.tokens[k] = "an"
    return caption


# ----------------------------------------------------------------------------------- writing
def write_split(root: str | Path, split: str, n_images: int, seed: int, side: int = 64, first_id: int = 1) -> Path:
    """Render ``n_images`` scenes with five captions each into ``root`` in COCO's layout.

    Deterministic per ``seed`` (each image draws from its own generator, so images are the same
    whatever ``n_images``). Returns the captions file.
    """
    root = Path(root)
    image_dir = root / f"{split}2014"
    image_dir.mkdir(parents=True, exist_ok=True)
    (root / "annotations").mkdir(parents=True, exist_ok=True)
    images, annotations, scenes, token_lines = [], [], {}, []
    caption_id = first_id * 10
    for image_id in range(first_id, first_id + n_images):
        rng = np.random.default_rng([seed, image_id])
        objects = draw_scene(rng)
        file_name = f"COCO_{split}2014_{image_id:012d}.jpg"
        with atomic_path(image_dir / file_name, suffix=".jpg") as tmp:
            render_scene(objects, rng, side).save(tmp, format="JPEG", quality=90)
        images.append(
            {
                "id": image_id,
                "width": side,
                "height": side,
                "file_name": file_name,
                "license": 1,
                "flickr_url": "",
                "coco_url": "",
                "date_captured": "2026-11-23 00:00:00",
            }
        )
        scenes[str(image_id)] = [asdict(o) for o in objects]
        for caption in captions_for(objects, rng):
            annotations.append({"id": caption_id, "image_id": image_id, "caption": caption.text})
            token_lines.append(json.dumps({"id": caption_id, "image_id": image_id, **asdict(caption)}))
            caption_id += 1
    document = {
        "info": {"description": "condeval miniature COCO world", "version": "1.0", "year": 2026, "seed": seed},
        "images": images,
        "licenses": [{"id": 1, "name": "generated", "url": ""}],
        "annotations": annotations,
    }
    captions_path = root / "annotations" / f"captions_{split}2014.json"
    with atomic_path(captions_path, suffix=".json") as tmp:
        tmp.write_text(json.dumps(document))
    with atomic_path(root / "annotations" / f"scenes_{split}2014.json", suffix=".json") as tmp:
        tmp.write_text(json.dumps(scenes, sort_keys=True))
    with atomic_path(root / "annotations" / f"tokens_{split}2014.jsonl", suffix=".jsonl") as tmp:
        tmp.write_text("\n".join(token_lines) + "\n")
    return captions_path


def images_with_shapes(root: str | Path, split: str, shapes: Sequence[str]) -> set[int]:
    """Ids of the split's images that hold at least one object of ``shapes`` (from the scenes sidecar)."""
    from condeval.datasets import DatasetFormatError, read_json

    path = Path(root) / "annotations" / f"scenes_{split}2014.json"
    wanted = set(shapes)
    unknown = wanted - set(SHAPES)
    if unknown:
        raise ValueError(f"unknown shapes {sorted(unknown)}; the mini-world has {list(SHAPES)}")
    try:
        return {
            int(image_id)
            for image_id, objects in read_json(path, dict).items()
            if wanted & {o["shape"] for o in objects}
        }
    except (KeyError, TypeError, ValueError):
        raise DatasetFormatError(f"{path}: every image must map to a list of objects with a 'shape'") from None
