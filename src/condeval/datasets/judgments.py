"""Human judgments of captions: Flickr8k-Expert, Polaris, VICR and Composite, in their released formats.

Every loader returns one row per judged (image, candidate caption): ``image``, ``caption``,
``references`` and ``human_score`` (the mean of the ratings the release gives for that pair), so
the interval calibration reads all four alike.

VICR and Composite ship, in the CLIPScore risk-control authors' bundle, only as pickled pandas
DataFrames. Unpickling runs code from the file, so :func:`load_pickled_judgments` refuses unless
``allow_pickle=True`` (the config key ``crc.allow_pickle``) says the file is trusted.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import polars as pl

from condeval.datasets import DatasetFormatError, read_json

__all__ = ["load_flickr8k_expert", "load_polaris", "load_pickled_judgments", "JUDGMENT_SCHEMA"]

JUDGMENT_SCHEMA = {"image": pl.String, "caption": pl.String, "references": pl.List(pl.String), "human_score": pl.Float64}
_POLARIS_COLUMNS = ("refs", "cand", "img", "human_score")


def load_flickr8k_expert(path: str | os.PathLike) -> pl.DataFrame:
    """Flickr8k-Expert (or CrowdFlower) as ``flickr8k.json`` holds it (jmhessel/clipscore's build).

    The file maps an image id to ``image_path``, ``ground_truth`` (reference captions) and
    ``human_judgement`` (entries with ``caption`` and ``rating`` 1–4, several raters per caption).
    Ratings of one (image, caption) are averaged: 5,664 pairs for the Expert set.
    """
    path = Path(path)
    document = read_json(path, dict)
    ratings: dict[tuple[str, str], list[float]] = {}
    references: dict[str, list[str]] = {}
    for key, entry in document.items():
        for field in ("image_path", "ground_truth", "human_judgement"):
            if not isinstance(entry, dict) or field not in entry:
                raise DatasetFormatError(f"{path}: image {key} lacks field '{field}'")
        references[entry["image_path"]] = [str(r) for r in entry["ground_truth"]]
        for number, judgement in enumerate(entry["human_judgement"]):
            if not isinstance(judgement, dict) or "caption" not in judgement or "rating" not in judgement:
                raise DatasetFormatError(f"{path}: image {key}, judgement {number} lacks 'caption' or 'rating'")
            rating = float(judgement["rating"])
            if np.isnan(rating):
                continue  # the release marks unrated entries with NaN
            if not 1 <= rating <= 4:
                raise DatasetFormatError(f"{path}: image {key}, judgement {number}: rating {rating} is outside 1-4")
            ratings.setdefault((entry["image_path"], judgement["caption"].strip()), []).append(rating)
    rows = [{"image": image, "caption": caption, "references": references[image], "human_score": float(np.mean(values))}
            for (image, caption), values in ratings.items()]  # fmt: skip
    return pl.DataFrame(rows, schema=JUDGMENT_SCHEMA)


def load_polaris(path: str | os.PathLike) -> pl.DataFrame:
    """Polaris in its released table format (Parquet or CSV): ``refs``, ``cand``, ``img``, ``human_score``.

    ``img`` is an image path, or the Hugging Face image struct whose ``path`` is kept.
    """
    path = Path(path)
    try:
        frame = pl.read_parquet(path) if path.suffix == ".parquet" else pl.read_csv(path)
    except FileNotFoundError:
        raise DatasetFormatError(f"{path}: file not found") from None
    except Exception as error:
        raise DatasetFormatError(f"{path}: not a readable table ({error})") from None
    missing = [c for c in _POLARIS_COLUMNS if c not in frame.columns]
    if missing:
        raise DatasetFormatError(f"{path}: column '{missing[0]}' is missing (has {frame.columns})")
    image = pl.col("img").struct.field("path") if isinstance(frame.schema["img"], pl.Struct) else pl.col("img")
    refs = pl.col("refs") if isinstance(frame.schema["refs"], pl.List) else pl.col("refs").str.json_decode(pl.List(pl.String))
    frame = frame.select(image.alias("image"), pl.col("cand").alias("caption"), refs.alias("references"), pl.col("human_score").cast(pl.Float64))
    bad = frame.with_row_index().filter(pl.col("human_score").is_null() | pl.col("human_score").is_nan())
    if len(bad):
        raise DatasetFormatError(f"{path}: row {bad['index'][0]} has no human_score")
    return frame


def load_pickled_judgments(path: str | os.PathLike, allow_pickle: bool = False) -> pl.DataFrame:
    """VICR or Composite as pickled in the CLIPScore risk-control bundle (trusted files only).

    The DataFrame has ``candidates``, ``image_path``, ``human_scores`` and ``refs`` (Composite) or
    ``subset`` (VICR).
    """
    path = Path(path)
    if not allow_pickle:
        raise DatasetFormatError(
            f"{path}: a pickle runs code when it is loaded; set crc.allow_pickle: true only for a file you trust"
        )
    import pandas as pd

    try:
        table = pd.read_pickle(path)
    except FileNotFoundError:
        raise DatasetFormatError(f"{path}: file not found") from None
    missing = [c for c in ("candidates", "image_path", "human_scores") if c not in table.columns]
    if missing:
        raise DatasetFormatError(f"{path}: column '{missing[0]}' is missing (has {list(table.columns)})")
    references = table["refs"].map(lambda r: [str(x) for x in r]) if "refs" in table.columns else [[] for _ in range(len(table))]
    return pl.DataFrame(
        {"image": table["image_path"].astype(str).tolist(), "caption": table["candidates"].astype(str).tolist(),
         "references": list(references), "human_score": [float(np.mean(s)) for s in table["human_scores"]]},
        schema=JUDGMENT_SCHEMA,
    )  # fmt: skip
