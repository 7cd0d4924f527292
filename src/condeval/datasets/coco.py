"""MS-COCO 2014 captions (``annotations/captions_{train,val}2014.json``), read as released.

The file is one JSON object with ``info``, ``images`` (``id``, ``width``, ``height``,
``file_name``, ...), ``licenses`` and ``annotations`` (``id``, ``image_id``, ``caption``); about
five captions per image. CReL's 40,504 evaluation pairs are one caption per image:
:func:`evaluation_pairs` takes the caption with the smallest annotation id, everywhere.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import polars as pl

from condeval.datasets import DatasetFormatError, integer_field, read_json, relative_path, report_rows, text_field

__all__ = [
    "VAL2014_IMAGES",
    "load_captions",
    "evaluation_pairs",
    "shard_image_ids",
    "coco_root",
    "image_dir",
    "read_coco_json",
    "with_image_paths",
]

_IMAGE_FIELDS = ("id", "file_name")
_ANNOTATION_FIELDS = ("id", "image_id", "caption")

#: The images of COCO 2014's val split (CReL's 40,504 evaluation pairs, one caption each).
VAL2014_IMAGES = 40_504


def _boolean(value: object, where: str, field: str) -> bool:
    if not isinstance(value, bool):
        raise DatasetFormatError(f"{where}: '{field}' must be true or false, found {value!r}")
    return value


def _word(value: object, where: str, field: str) -> str:
    if not isinstance(value, str):
        raise DatasetFormatError(f"{where}: '{field}' must be a string, found {value!r}")
    return value


# How each field of a COCO-layout record is checked; a path must stay under the image folder.
_FIELD_CHECKS = {
    "id": integer_field,
    "image_id": integer_field,
    "file_name": relative_path,
    "caption": text_field,
    "foil": _boolean,
    "target_word": _word,
    "foil_word": _word,
}


def _records(document: dict, key: str, fields: tuple[str, ...], path: Path) -> list[dict]:
    if key not in document or not isinstance(document[key], list):
        raise DatasetFormatError(f"{path}: top-level field '{key}' is missing or not a list")
    for index, record in enumerate(document[key]):
        missing = [f for f in fields if not isinstance(record, dict) or f not in record]
        ident = record.get("id", "?") if isinstance(record, dict) else "?"
        where = f"{path}: {key}[{index}] (id {ident})"
        if missing:
            raise DatasetFormatError(f"{where} lacks field '{missing[0]}'")
        for field in fields:
            _FIELD_CHECKS[field](record[field], where, field)
    return document[key]


def _duplicate(ids: list[int]) -> int | None:
    seen: set[int] = set()
    for ident in ids:
        if ident in seen:
            return ident
        seen.add(ident)
    return None


def load_captions(annotations_json: str | os.PathLike, image_dir: str | os.PathLike | None = None) -> pl.DataFrame:
    """Every caption of a COCO captions file, one row per annotation.

    Parameters
    ----------
    annotations_json : path-like
        ``captions_{train,val}2014.json`` (the real file, or one the mini-world writes in its format).
    image_dir : path-like, optional
        Folder of the images (``val2014/``); when given, every listed image file must exist and a
        ``path`` column is added.

    Returns
    -------
    polars.DataFrame
        Columns ``image_id``, ``caption_id``, ``file_name``, ``caption`` (and ``path``), sorted by
        ``image_id`` then ``caption_id``.

    Raises
    ------
    DatasetFormatError
        Naming the file and the offending id: unreadable JSON, a missing field, a duplicate image or
        annotation id, an annotation of an unlisted image, or a listed image file that is missing.
    """
    path = Path(annotations_json)
    file_names, annotations = read_coco_json(path)
    frame = pl.DataFrame(
        {
            "image_id": [a["image_id"] for a in annotations],
            "caption_id": [a["id"] for a in annotations],
            "file_name": [file_names[a["image_id"]] for a in annotations],
            "caption": [a["caption"].strip() for a in annotations],
        },
        schema={"image_id": pl.Int64, "caption_id": pl.Int64, "file_name": pl.String, "caption": pl.String},
    ).sort("image_id", "caption_id")
    report_rows(path, frame.height, {}, "captions")
    return with_image_paths(frame, file_names, image_dir, path) if image_dir is not None else frame


def read_coco_json(
    path: Path, annotation_fields: tuple[str, ...] = _ANNOTATION_FIELDS, annotation_key=lambda a: a["id"]
) -> tuple[dict, list[dict]]:
    """The file name of every listed image (by id) and the annotations of a COCO-layout JSON file.

    Raises :class:`DatasetFormatError` naming ``path`` and the record: unreadable JSON, a missing
    field, a duplicate image id or annotation key, or an annotation of an unlisted image.
    """
    document = read_json(path, dict)
    images = _records(document, "images", _IMAGE_FIELDS, path)
    annotations = _records(document, "annotations", annotation_fields, path)
    duplicate = _duplicate([r["id"] for r in images])
    if duplicate is not None:
        raise DatasetFormatError(f"{path}: duplicate image id {duplicate}")
    duplicate = _duplicate([annotation_key(a) for a in annotations])
    if duplicate is not None:
        raise DatasetFormatError(f"{path}: duplicate annotation id {duplicate}")
    file_names = {image["id"]: image["file_name"] for image in images}
    orphan = next((a for a in annotations if a["image_id"] not in file_names), None)
    if orphan is not None:
        raise DatasetFormatError(
            f"{path}: annotation {orphan['id']} refers to image {orphan['image_id']}, which is not listed"
        )
    return file_names, annotations


def with_image_paths(frame: pl.DataFrame, file_names: dict, image_dir: str | os.PathLike, path: Path) -> pl.DataFrame:
    """Add a ``path`` column under ``image_dir``; every listed image file must exist."""
    image_dir = Path(image_dir)
    absent = next((i for i, name in file_names.items() if not (image_dir / name).is_file()), None)
    if absent is not None:
        raise DatasetFormatError(f"{path}: image {absent} is listed but {image_dir / file_names[absent]} is missing")
    return frame.with_columns((pl.lit(str(image_dir) + os.sep) + pl.col("file_name")).alias("path"))


def evaluation_pairs(captions: pl.DataFrame) -> pl.DataFrame:
    """One (image, caption) pair per image: the caption with the smallest annotation id.

    The paper's 40,504 pairs on val2014 are one caption per image without saying which; the
    smallest id is a fixed, documented choice that every track applies.
    """
    return captions.sort("image_id", "caption_id").unique(subset="image_id", keep="first", maintain_order=True)


def shard_image_ids(image_ids: np.ndarray, n_shards: int, shard: int) -> np.ndarray:
    """Image ids of one shard: the sorted ids cut into ``n_shards`` contiguous id ranges."""
    if not 0 <= shard < n_shards:
        raise ValueError(f"shard {shard} is outside 0..{n_shards - 1}")
    return np.array_split(np.sort(np.asarray(image_ids)), n_shards)[shard]


def coco_root(captions_json: str | os.PathLike) -> Path:
    """The dataset folder of ``<root>/annotations/captions_{split}2014.json``.

    Symbolic links are not resolved: a captions file linked from a shared copy (or DVC's cache)
    reads its images from the root it is listed under.
    """
    return Path(captions_json).absolute().parents[1]


def image_dir(captions_json: str | os.PathLike) -> Path:
    """The image folder beside a captions file: ``<root>/{split}2014`` for ``captions_{split}2014.json``."""
    split = Path(captions_json).name.removeprefix("captions_").removesuffix(".json")
    return coco_root(captions_json) / split
