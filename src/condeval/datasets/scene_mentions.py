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
    return _summed(_mention_counts(captions, scenes))


def _summed(counts: dict[str, tuple[np.ndarray, ...]]) -> dict[str, dict[str, float]]:
    """:func:`mention_scores` from :func:`_mention_counts`."""
    return {
        kind: _ratios(*(column.sum() for column in counts[kind])) | {"mentions": int(counts[kind][1].sum())}
        for kind in KINDS
    }


def _mention_counts(captions: Sequence[str], scenes: Sequence[Sequence[dict]]) -> dict[str, tuple[np.ndarray, ...]]:
    """Per kind, four counts per caption: right mentions, mentions, scene values named, scene values."""
    if len(captions) != len(scenes):
        raise ValueError(f"{len(captions)} captions but {len(scenes)} scenes")
    counts = {}
    for kind in KINDS:
        table = np.zeros((len(captions), 4))
        for row, (caption, objects) in enumerate(zip(captions, scenes)):
            named, present = caption_mentions(caption)[kind], {obj[kind] for obj in objects}
            table[row] = sum(word in present for word in named), len(named), len(present & set(named)), len(present)
        counts[kind] = tuple(table.T)
    return counts


def _ratios(right, mentioned, recalled, present) -> dict[str, float]:
    """Precision and recall from summed counts, NaN where nothing is counted."""
    return {
        "precision": float(right / mentioned) if mentioned else float("nan"),
        "recall": float(recalled / present) if present else float("nan"),
    }


def _intervals(counts: tuple[np.ndarray, ...], units) -> dict[str, float]:
    """``precision`` and ``recall``'s 95% intervals over ``units`` (one id per caption), each drawn whole."""
    from condeval.core.conformal import unit_bootstrap_interval, unit_index

    unit_of_caption = unit_index(units, "units", "caption")
    n_units = int(unit_of_caption.max()) + 1
    per_unit = [np.bincount(unit_of_caption, weights=column, minlength=n_units) for column in counts]
    out = {}
    for key in ("precision", "recall"):

        def statistic(drawn: np.ndarray, key: str = key) -> float:
            return _ratios(*(drawn @ column for column in per_unit))[key]

        out[f"{key}_low"], out[f"{key}_high"] = unit_bootstrap_interval(statistic, n_units)
    return out


def grounding(
    captions: Sequence[str], scenes: Sequence[Sequence[dict]], seed: int = 0, units=None
) -> dict[str, dict[str, float]]:
    """:func:`mention_scores` beside the same captions scored against shuffled scenes (the prior's score).

    The shuffle is a random derangement: no caption keeps its own image's scene. Returns, per kind,
    ``precision``, ``recall``, ``mentions``, ``precision_shuffled`` and ``recall_shuffled``, and the 95%
    intervals of precision and recall over ``units`` (each caption's image id, the captions of one image
    drawn together; each caption its own without): ``precision_low``, ``precision_high``, ``recall_low``,
    ``recall_high``.
    """
    if len(scenes) < 2:
        raise ValueError("shuffling needs at least two captions")
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(scenes))
    while np.any(order == np.arange(len(scenes))):  # a derangement: redraw (about e tries)
        order = rng.permutation(len(scenes))
    counts = _mention_counts(captions, scenes)  # once: the scores and their intervals read the same counts
    own, shuffled = _summed(counts), mention_scores(captions, [scenes[k] for k in order])
    units = np.arange(len(captions)) if units is None else units
    return {
        kind: {
            **own[kind],
            **_intervals(counts[kind], units),
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
