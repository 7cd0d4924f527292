"""The CLIPScore risk-control benchmarks built from the miniature COCO world, in the real formats.

Only the world's val split is used (no encoder or captioner trains on it).

- **mini FOIL-it** (``foilv1.0_{train,test}_2017.json``): each val image's evaluation caption and
  the same caption with one shape noun swapped for another shape's (``swap_shape_noun``), paired
  by ``id`` as FOIL-it pairs them, with ``target_word`` and ``foil_word``.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from condeval.core.io import atomic_path
from condeval.datasets.coco import evaluation_pairs, load_captions
from condeval.datasets.miniworld import swap_shape_noun

__all__ = ["write_mini_foil_it", "FOIL_IT_SPLITS"]

FOIL_IT_SPLITS = ("train", "test")


def _noun_only_swap(words: list[str], rng: np.random.Generator, tries: int = 20) -> tuple[list[str], int] | None:
    """A shape-noun swap that leaves every other word as it is.

    ``swap_shape_noun`` keeps ``a``/``an`` agreeing with the new noun; FOIL-it labels the first
    differing word, so a changed article would be labelled instead of the noun. Such draws are
    redrawn (``tries`` times, then the caption is skipped).
    """
    for _ in range(tries):
        swapped = swap_shape_noun(words, rng)
        if swapped is None:
            return None
        if sum(a != b for a, b in zip(words, swapped[0])) == 1:
            return swapped
    return None


def _foil_document(rows, file_names: dict, split: str) -> dict:
    images = [{"id": int(i), "file_name": file_names[i], "width": 64, "height": 64} for i in sorted({r["image_id"] for r in rows})]
    return {"info": {"description": f"condeval mini FOIL-it ({split})", "version": "1.0"}, "licenses": [], "images": images, "annotations": rows}


def write_mini_foil_it(coco_root: str | os.PathLike, out_dir: str | os.PathLike, *, seed: int, train_fraction: float = 0.5) -> dict[str, Path]:
    """Write ``foilv1.0_{train,test}_2017.json`` from the world's val split.

    Each image's evaluation caption becomes one pair (its annotation id is the pair's ``id``): the
    original, and the foil with one shape noun swapped. Images are split at random (``seed``)
    into train (``train_fraction``) and test. Returns the two files by split.
    """
    coco_root, out_dir = Path(coco_root), Path(out_dir)
    captions = evaluation_pairs(load_captions(coco_root / "annotations" / "captions_val2014.json"))
    file_names = dict(zip(captions["image_id"].to_list(), captions["file_name"].to_list()))
    rng = np.random.default_rng([seed, 7])
    order = rng.permutation(len(captions))
    train_ids = set(captions["image_id"].to_numpy()[order[: int(round(train_fraction * len(captions)))]].tolist())
    rows: dict[str, list[dict]] = {split: [] for split in FOIL_IT_SPLITS}
    for image_id, pair_id, caption in captions.select("image_id", "caption_id", "caption").iter_rows():
        swapped = _noun_only_swap(caption.split(), np.random.default_rng([seed, pair_id]))
        if swapped is None:
            continue
        tokens, k = swapped
        common = {"id": pair_id, "image_id": image_id, "target_word": caption.split()[k], "foil_word": tokens[k]}
        split = "train" if image_id in train_ids else "test"
        rows[split] += [{**common, "caption": caption, "foil": False}, {**common, "caption": " ".join(tokens), "foil": True}]
    paths = {}
    for split in FOIL_IT_SPLITS:
        paths[split] = out_dir / f"foilv1.0_{split}_2017.json"
        with atomic_path(paths[split]) as tmp:
            tmp.write_text(json.dumps(_foil_document(rows[split], file_names, split)))
    return paths
