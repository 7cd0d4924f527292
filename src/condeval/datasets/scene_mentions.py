"""Do generated captions describe their image? Colour and shape mentions scored against the scene truth.

The mini-world knows every image's objects (``annotations/scenes_{split}2014.json``), so a caption's
colour words and shape nouns can be checked one by one: a mention is right when the image holds an
object of that colour (or shape). Precision is the share of mentions that are right; recall the share
of the scene's colours (shapes) that a caption names. The same captions scored against other images'
scenes give the baseline a captioner reaches by ignoring the image and following the caption prior.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from condeval.datasets.miniworld import COLOURS, noun_shapes

__all__ = ["caption_mentions", "mention_scores", "grounding", "read_scenes"]

KINDS = ("colour", "shape")


def caption_mentions(caption: str) -> dict[str, list[str]]:
    """The colours and shapes a caption names, in order, one entry per word (``boxes`` -> ``square``)."""
    nouns = noun_shapes()
    words = caption.lower().split()
    return {"colour": [w for w in words if w in COLOURS], "shape": [nouns[w][0] for w in words if w in nouns]}


def mention_scores(captions: Sequence[str], scenes: Sequence[Sequence[dict]]) -> dict[str, dict[str, float]]:
    """Micro-averaged precision and recall of colour and shape mentions of ``captions[i]`` against ``scenes[i]``.

    ``scenes[i]`` are the objects of caption i's image (dicts with ``colour`` and ``shape``).
    Precision: right mentions over all mentions (a colour named twice counts twice). Recall: the
    scene's distinct colours (shapes) a caption names, over all of them, summed over captions.
    A kind no caption mentions has precision NaN.
    """
    if len(captions) != len(scenes):
        raise ValueError(f"{len(captions)} captions but {len(scenes)} scenes")
    scores = {}
    for kind in KINDS:
        right = mentioned = recalled = present_total = 0
        for caption, objects in zip(captions, scenes):
            named, present = caption_mentions(caption)[kind], {obj[kind] for obj in objects}
            right += sum(word in present for word in named)
            mentioned += len(named)
            recalled += len(present & set(named))
            present_total += len(present)
        scores[kind] = {
            "mentions": mentioned,
            "precision": right / mentioned if mentioned else float("nan"),
            "recall": recalled / present_total if present_total else float("nan"),
        }
    return scores


def grounding(captions: Sequence[str], scenes: Sequence[Sequence[dict]], seed: int = 0) -> dict[str, dict[str, float]]:
    """:func:`mention_scores` beside the same captions scored against shuffled scenes (the prior's score).

    The shuffle is a random derangement: no caption keeps its own image's scene. Returns, per kind,
    ``precision``, ``recall``, ``mentions``, ``precision_shuffled`` and ``recall_shuffled``.
    """
    if len(scenes) < 2:
        raise ValueError("shuffling needs at least two captions")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(scenes))
    while np.any(order == np.arange(len(scenes))):  # a derangement: redraw (about e tries)
        order = rng.permutation(len(scenes))
    own, shuffled = mention_scores(captions, scenes), mention_scores(captions, [scenes[k] for k in order])
    return {
        kind: {
            **own[kind],
            "precision_shuffled": shuffled[kind]["precision"],
            "recall_shuffled": shuffled[kind]["recall"],
        }
        for kind in KINDS
    }


def read_scenes(root: str | os.PathLike, split: str) -> dict[int, list[dict]]:
    """Image id -> objects, from ``{root}/annotations/scenes_{split}2014.json`` written by the mini-world."""
    from condeval.datasets import DatasetFormatError, read_json

    path = Path(root) / "annotations" / f"scenes_{split}2014.json"
    scenes = read_json(path, dict)
    for image_id, objects in scenes.items():
        if (
            not image_id.isdigit()
            or not isinstance(objects, list)
            or not all(isinstance(o, dict) and {"colour", "shape"} <= set(o) for o in objects)
        ):
            raise DatasetFormatError(
                f"{path}: image {image_id} must map to a list of objects with 'colour' and 'shape'"
            )
    return {int(image_id): objects for image_id, objects in scenes.items()}
