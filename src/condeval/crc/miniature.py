"""The CLIPScore risk-control benchmarks built from the miniature COCO world, in the real formats.

Only the world's val split is used (no encoder or captioner trains on it).

- **mini FOIL-it** (``foilv1.0_{train,test}_2017.json``): each val image's evaluation caption and
  the same caption with one shape noun swapped for another shape's (``swap_shape_noun``), paired
  by ``id`` as FOIL-it pairs them, with ``target_word`` and ``foil_word``.
- **mini FOIL-nocaps** (``nocaps-val-foil.json`` and ``images/``): new scenes in three domains by
  the world's *novel* shapes, which no encoder trains on (``coco.miniworld.novel_shapes``): in =
  seen shapes only, near = both, out = novel shapes only; each scene's first caption is the
  baseline, its foil swaps one shape noun, the other four captions are the references.
- **mini RichHF-18K** (``{train,dev,test}.tfrecord`` and a Pick-a-Pic-style prompt table): new
  scenes rendered from their true description, while the prompt has 0–3 of its object words made
  wrong (``corrupt_caption``); the per-word labels (0 = misaligned) come from the generator.
- **mini human ratings** in the Flickr8k-Expert (``flickr8k.json``) and Polaris (Parquet) formats:
  val images with candidate captions carrying 0–3 errors, rated 4 − errors by three raters with
  noise (Flickr8k, 1–4) and their mean mapped to [0, 1] (Polaris).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import polars as pl

from condeval.core.io import atomic_path, write_parquet
from condeval.datasets import read_json
from condeval.datasets.coco import evaluation_pairs, load_captions
from condeval.datasets.foil import NOCAPS_DOMAINS
from condeval.datasets.miniworld import SHAPES, captions_for, corrupt_caption, draw_scene, render_scene, swap_shape_noun
from condeval.datasets.rich_hf import write_rich_hf

__all__ = [
    "write_mini_foil_it",
    "write_mini_foil_nocaps",
    "write_mini_rich_hf",
    "write_mini_judgments",
    "FOIL_IT_SPLITS",
    "RICH_HF_SPLITS",
    "MINI_JUDGMENT_FILES",
    "noun_only_swap",
    "rated_candidates",
]

RICH_HF_SPLITS = ("train", "dev", "test")

FOIL_IT_SPLITS = ("train", "test")

#: The judgment sets the miniature writes, by name: their file names.
MINI_JUDGMENT_FILES = {"flickr8k": "flickr8k.json", "polaris": "polaris.parquet"}


def noun_only_swap(words: list[str], rng: np.random.Generator, tries: int = 20) -> tuple[list[str], int] | None:
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


def _foil_document(rows, images_by_id: dict, split: str) -> dict:
    images = [images_by_id[i] for i in sorted({r["image_id"] for r in rows})]
    return {
        "info": {"description": f"condeval mini FOIL-it ({split})", "version": "1.0"},
        "licenses": [],
        "images": images,
        "annotations": rows,
    }


def write_mini_foil_it(
    coco_root: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    seed: int,
    train_fraction: float = 0.5,
    images: Mapping[str, int] | None = None,
) -> dict[str, Path]:
    """Write ``foilv1.0_{train,test}_2017.json`` from the world's val split.

    Each image's evaluation caption becomes one pair (its annotation id is the pair's ``id``): the
    original, and the foil with one shape noun swapped. Images are split at random (``seed``)
    into train (``train_fraction``) and test, or, with ``images`` (``{"train": n, "test": m}``),
    the first n images of that order are train, the next m test and the rest unused. Returns the
    two files by split.

    Raises
    ------
    ValueError
        If ``images`` asks for more images than the val split has.
    """
    coco_root, out_dir = Path(coco_root), Path(out_dir)
    captions_json = coco_root / "annotations" / "captions_val2014.json"
    captions = evaluation_pairs(load_captions(captions_json))
    # FOIL-it lists its images as COCO does (id, file name, width, height): the world's own records.
    images_by_id = {
        image["id"]: {k: image[k] for k in ("id", "file_name", "width", "height")}
        for image in read_json(captions_json, dict)["images"]
    }
    rng = np.random.default_rng([seed, 7])
    order = captions["image_id"].to_numpy()[rng.permutation(len(captions))]
    n_train = images["train"] if images else int(round(train_fraction * len(order)))
    n_test = images["test"] if images else len(order) - n_train
    if n_train + n_test > len(order):
        raise ValueError(f"{captions_json}: {n_train} train and {n_test} test images asked, {len(order)} there")
    split_of = dict.fromkeys(order[:n_train].tolist(), "train")
    split_of.update(dict.fromkeys(order[n_train : n_train + n_test].tolist(), "test"))
    rows: dict[str, list[dict]] = {split: [] for split in FOIL_IT_SPLITS}
    for image_id, pair_id, caption in captions.select("image_id", "caption_id", "caption").iter_rows():
        split = split_of.get(image_id)
        swapped = None if split is None else noun_only_swap(caption.split(), np.random.default_rng([seed, pair_id]))
        if swapped is None:
            continue
        tokens, k = swapped
        common = {"id": pair_id, "image_id": image_id, "target_word": caption.split()[k], "foil_word": tokens[k]}
        rows[split] += [
            {**common, "caption": caption, "foil": False},
            {**common, "caption": " ".join(tokens), "foil": True},
        ]
    paths = {}
    for split in FOIL_IT_SPLITS:
        paths[split] = out_dir / f"foilv1.0_{split}_2017.json"
        with atomic_path(paths[split]) as tmp:
            tmp.write_text(json.dumps(_foil_document(rows[split], images_by_id, split)))
    return paths


def _domain_scene(domain: str, novel: list[str], rng: np.random.Generator, tries: int = 1000):
    """A scene of one FOIL-nocaps domain: seen shapes only (in), novel only (out), or both (near)."""
    seen = [shape for shape in SHAPES if shape not in novel]
    if domain != "near":
        return draw_scene(rng, seen if domain == "in" else novel)
    for _ in range(tries):
        objects = draw_scene(rng)
        shapes = {o.shape for o in objects}
        if shapes & set(novel) and shapes - set(novel):
            return objects
    raise RuntimeError(f"no near-domain scene in {tries} draws; novel shapes {novel}")


def write_mini_foil_nocaps(
    out_dir: str | os.PathLike, sizes: dict[str, int], novel_shapes: list[str], *, seed: int, side: int = 64
) -> Path:
    """Write ``nocaps-val-foil.json`` (FOIL-nocaps' record list) and its ``images/``.

    ``sizes`` gives the number of scenes per domain (in, near, out); ``novel_shapes`` are the
    shapes the encoders never trained on. Returns the JSON file.
    """
    if not novel_shapes:
        raise ValueError(
            "the mini FOIL-nocaps needs novel shapes (coco.miniworld.novel_shapes) for its near and out domains"
        )
    out_dir = Path(out_dir)
    records = []
    for number, domain in enumerate(NOCAPS_DOMAINS):
        for index in range(sizes.get(domain, 0)):
            rng = np.random.default_rng([seed, 17, number, index])
            objects = _domain_scene(domain, list(novel_shapes), rng)
            image_path = f"images/{domain}-{index:06d}.jpg"
            with atomic_path(out_dir / image_path, suffix=".jpg") as tmp:
                render_scene(objects, rng, side).save(tmp, format="JPEG", quality=90)
            baseline, *references = [caption.text for caption in captions_for(objects, rng)]
            swapped = noun_only_swap(baseline.split(), rng)
            if swapped is None:
                continue
            tokens, k = swapped
            records.append(
                {
                    "image_path": image_path,
                    "references": references,
                    "baseline": baseline,
                    "foil": " ".join(tokens),
                    "replacement": [baseline.split()[k], tokens[k]],
                    "domain": domain,
                }
            )
    path = out_dir / "nocaps-val-foil.json"
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(records))
    return path


def write_mini_rich_hf(
    out_dir: str | os.PathLike, sizes: dict[str, int], *, seed: int, side: int = 64, max_errors: int = 3
) -> dict[str, Path]:
    """Write ``{split}.tfrecord`` (RichHF-18K's records), ``images/<uid>.jpg`` and ``pickapic.parquet``.

    Each record is a new scene (never seen in training), rendered from its objects; its prompt is
    one caption of the scene with 0..``max_errors`` object words made wrong. Only the splits named
    in ``sizes`` are written. Returns the files.
    """
    out_dir = Path(out_dir)
    prompts, paths = [], {}
    for number, split in enumerate(RICH_HF_SPLITS):
        if split not in sizes:
            continue
        records = []
        for index in range(sizes[split]):
            rng = np.random.default_rng([seed, 11, number, index])
            objects = draw_scene(rng)
            uid = f"mini-{split}-{index:06d}"
            with atomic_path(out_dir / "images" / f"{uid}.jpg", suffix=".jpg") as tmp:
                render_scene(objects, rng, side).save(tmp, format="JPEG", quality=90)
            caption = captions_for(objects, rng, n=1)[0]
            words, errors = corrupt_caption(caption.tokens, int(rng.integers(0, max_errors + 1)), rng)
            records.append(
                {
                    "filename": f"{uid}.jpg",
                    "prompt_misalignment_label": " ".join(str(1 - e) for e in errors),
                    "misalignment_score": float(sum(errors)),
                }
            )
            prompts.append(
                {"caption": " ".join(words), "image_0_uid": uid, "image_1_uid": f"{uid}-unrated", "split": split}
            )
        paths[split] = out_dir / f"{split}.tfrecord"
        write_rich_hf(paths[split], records)
    paths["prompts"] = out_dir / "pickapic.parquet"
    write_parquet(pl.DataFrame(prompts), paths["prompts"])
    return paths


def rated_candidates(
    tokens: list[str], rng: np.random.Generator, raters: int, max_errors: int
) -> list[tuple[str, list[float]]]:
    """Candidates with 0..max_errors wrong words, each rated 4 − errors by ``raters`` noisy raters (1–4)."""
    candidates = []
    for n_errors in range(max_errors + 1):
        words, errors = corrupt_caption(tokens, n_errors, rng)
        truth = 4 - sum(errors)
        candidates.append((" ".join(words), np.clip(np.rint(truth + rng.normal(0, 0.6, raters)), 1, 4).tolist()))
    return candidates


def write_mini_judgments(
    coco_root: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    n_images: int,
    seed: int,
    raters: int = 3,
    max_errors: int = 3,
) -> dict[str, Path]:
    """Write ``flickr8k.json`` (Flickr8k-Expert's format) and ``polaris.parquet`` (Polaris' table).

    The first ``n_images`` val images go to Flickr8k, the next ``n_images`` to Polaris; candidates
    are the evaluation caption with 0..``max_errors`` errors, the references the image's other captions.
    """
    coco_root, out_dir = Path(coco_root), Path(out_dir)
    captions = load_captions(coco_root / "annotations" / "captions_val2014.json")
    pairs = evaluation_pairs(captions)
    references = captions.group_by("image_id", maintain_order=True).agg(pl.col("caption"))
    refs = dict(zip(references["image_id"].to_list(), references["caption"].to_list()))
    flickr, polaris = {}, []
    for position, (image_id, caption_id, file_name, caption) in enumerate(
        pairs.select("image_id", "caption_id", "file_name", "caption").iter_rows()
    ):
        if position >= 2 * n_images:
            break
        rng = np.random.default_rng([seed, 13, caption_id])
        image_path = f"val2014/{file_name}"
        others = [c for c in refs[image_id] if c != caption]
        rated = rated_candidates(caption.split(), rng, raters, max_errors)
        if position < n_images:
            judgements = [
                {"image_id": str(image_id), "image_path": image_path, "caption": text, "rating": r}
                for text, ratings in rated
                for r in ratings
            ]
            flickr[str(image_id)] = {
                "image_id": str(image_id),
                "image_path": image_path,
                "ground_truth": others,
                "human_judgement": judgements,
            }
        else:
            polaris += [
                {"refs": others, "cand": text, "img": image_path, "human_score": (float(np.mean(r)) - 1) / 3}
                for text, r in rated
            ]
    paths = {name: out_dir / file_name for name, file_name in MINI_JUDGMENT_FILES.items()}
    with atomic_path(paths["flickr8k"]) as tmp:
        tmp.write_text(json.dumps(flickr))
    write_parquet(pl.DataFrame(polaris), paths["polaris"])
    return paths
