"""Human judgments of captions: Flickr8k-Expert, Polaris, VICR and Composite, in their released formats.

Every loader returns one row per judged (image, candidate caption): ``image``, ``caption``,
``references`` and ``human_score`` (the mean of the ratings the release gives for that pair), so
the interval calibration reads all four alike.

VICR and Composite ship, in the CLIPScore risk-control authors' bundle, only as pickled pandas
DataFrames. Unpickling runs code from the file, so :func:`load_pickled_judgments` refuses unless
``allow_pickle=True`` (the config key ``crc.allow_pickle``) says the file is trusted.
"""

from __future__ import annotations

import ast
import json
import math
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import polars as pl

from condeval.datasets import DatasetFormatError, finite_number, read_json, relative_path, report_rows, text_field

__all__ = ["load_flickr8k_expert", "load_polaris", "load_pickled_judgments", "JUDGMENT_SCHEMA"]

JUDGMENT_SCHEMA = {
    "image": pl.String,
    "caption": pl.String,
    "references": pl.List(pl.String),
    "human_score": pl.Float64,
}
_POLARIS_COLUMNS = ("refs", "cand", "img", "human_score")


def load_flickr8k_expert(path: str | os.PathLike) -> pl.DataFrame:
    """Flickr8k-Expert as ``flickr8k.json`` holds it (jmhessel/clipscore's build).

    The file maps an image id to ``image_path``, ``ground_truth`` (reference captions) and
    ``human_judgement`` (entries with ``caption`` and ``rating`` 1–4, several raters per caption).
    Ratings of one (image, caption) are averaged: 5,664 pairs for the Expert set. The CrowdFlower
    build of the same script shares the layout but rates on [0, 1] (the share of "yes" votes), so
    its ratings are refused here rather than read on the Expert's scale.

    Raises
    ------
    DatasetFormatError
        Naming the file, the image and the judgement: a missing field, an image path listed under
        two image ids, an empty caption, or a rating that is not a number in 1–4. A NaN rating (how
        the release marks an unrated judgement) is dropped and counted.
    """
    path = Path(path)
    document = read_json(path, dict)
    ratings: dict[tuple[str, str], list[float]] = {}
    references: dict[str, list[str]] = {}
    listed_by: dict[str, str] = {}
    unrated = 0
    for key, entry in document.items():
        for field in ("image_path", "ground_truth", "human_judgement"):
            if not isinstance(entry, dict) or field not in entry:
                raise DatasetFormatError(f"{path}: image {key} lacks field '{field}'")
        image = relative_path(entry["image_path"], f"{path}: image {key}", "image_path")
        if image in listed_by:
            raise DatasetFormatError(f"{path}: image {key}: image_path {image!r} is already image {listed_by[image]}'s")
        listed_by[image] = key
        references[image] = _captions(entry["ground_truth"], f"{path}: image {key}", "ground_truth")
        if not isinstance(entry["human_judgement"], list):
            raise DatasetFormatError(f"{path}: image {key}: 'human_judgement' must be a list")
        for number, judgement in enumerate(entry["human_judgement"]):
            where = f"{path}: image {key}, judgement {number}"
            if not isinstance(judgement, dict) or "caption" not in judgement or "rating" not in judgement:
                raise DatasetFormatError(f"{where} lacks 'caption' or 'rating'")
            own = judgement.get("image_path", entry["image_path"])
            if own != entry["image_path"]:  # a judgement of another image filed under this one
                raise DatasetFormatError(f"{where}: image_path {own!r} is not its entry's {entry['image_path']!r}")
            caption = text_field(judgement["caption"], where, "caption")
            rating = judgement["rating"]
            if isinstance(rating, float) and math.isnan(rating):
                unrated += 1  # the release marks unrated entries with NaN
                continue
            rating = finite_number(rating, where, "rating")
            if not 1 <= rating <= 4:
                raise DatasetFormatError(f"{where}: rating {rating} is outside 1-4")
            ratings.setdefault((image, caption), []).append(rating)
    report_rows(path, len(ratings), {"unrated judgements (NaN rating)": unrated}, "judged captions")
    rows = [
        {"image": image, "caption": caption, "references": references[image], "human_score": float(np.mean(values))}
        for (image, caption), values in ratings.items()
    ]
    return pl.DataFrame(rows, schema=JUDGMENT_SCHEMA)


def _captions(values: object, where: str, field: str) -> list[str]:
    """A list of non-empty caption strings, or :class:`DatasetFormatError` naming the bad entry."""
    values = list(values) if isinstance(values, (tuple, np.ndarray)) else values  # pickled frames hold tuples or arrays
    if not isinstance(values, list):
        raise DatasetFormatError(f"{where}: '{field}' must be a list of captions, found {values!r}")
    return [text_field(value, where, f"{field}[{number}]") for number, value in enumerate(values)]


def load_polaris(path: str | os.PathLike) -> pl.DataFrame:
    """Polaris in its released table format (Parquet or CSV): ``refs``, ``cand``, ``img``, ``human_score``.

    ``img`` is an image path, or the Hugging Face image struct whose ``path`` is kept. In a CSV,
    every column is read as text and ``refs`` as a JSON list (or the Python list that pandas'
    ``to_csv`` writes), so a score column that starts with whole numbers still reads its fractions.
    """
    path = Path(path)
    csv = path.suffix.lower() != ".parquet"
    try:
        frame = pl.read_csv(path, infer_schema=False) if csv else pl.read_parquet(path)
    except FileNotFoundError:
        raise DatasetFormatError(f"{path}: file not found") from None
    except Exception as error:
        raise DatasetFormatError(f"{path}: not a readable table ({error})") from None
    missing = [c for c in _POLARIS_COLUMNS if c not in frame.columns]
    if missing:
        raise DatasetFormatError(f"{path}: column '{missing[0]}' is missing (has {frame.columns})")
    image = pl.col("img").struct.field("path") if isinstance(frame.schema["img"], pl.Struct) else pl.col("img")
    try:
        frame = frame.select(image.alias("image"), pl.col("cand").alias("caption"), "refs", "human_score")
    except pl.exceptions.PolarsError as error:
        raise DatasetFormatError(f"{path}: 'img' must hold image paths ({error})") from None
    rows = frame.rows()
    if csv:
        rows = [
            (image, caption, _listed(refs, f"{path}: row {number}"), _number(score, f"{path}: row {number}"))
            for number, (image, caption, refs, score) in enumerate(rows)
        ]
    return _checked_judgments(rows, path)


def _listed(refs: str | None, where: str) -> object:
    """A CSV cell of references as the list it spells (JSON, or a Python literal); a null as given."""
    if refs is None:
        return refs
    refused = DatasetFormatError(f"{where}: 'refs' is not a list of captions, found {refs[:80]!r}")
    try:
        return json.loads(refs)
    except RecursionError:  # nested past the parser's depth
        raise refused from None
    except json.JSONDecodeError:
        try:
            return ast.literal_eval(refs)  # pandas' to_csv writes lists as Python literals; no code runs
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            raise refused from None


def _number(score: str | None, where: str) -> float | None:
    """A CSV cell of a score as the number it spells; a null as given."""
    if score is None:
        return score
    try:
        return float(score)
    except ValueError:
        raise DatasetFormatError(f"{where}: 'human_score' must be a finite number, found {score!r}") from None


def _checked_judgments(rows: list[tuple], path: Path) -> pl.DataFrame:
    """(image, caption, references, human score) rows as a judgment table, each field checked.

    Raises :class:`DatasetFormatError` naming ``path`` and the row: a null or non-string caption,
    an image path that leaves the data root, a score that is not a finite number.
    """
    checked = []
    for number, (image, caption, references, score) in enumerate(rows):
        where = f"{path}: row {number}"
        if score is None or (isinstance(score, float) and math.isnan(score)):
            raise DatasetFormatError(f"{where} has no human_score")
        checked.append(
            (
                relative_path(image, where, "image"),
                text_field(caption, where, "caption"),
                _captions(references, where, "references"),
                finite_number(score, where, "human_score"),
            )
        )
    report_rows(path, len(checked), {}, "judged captions")
    return pl.DataFrame(checked, schema=JUDGMENT_SCHEMA, orient="row")


def load_pickled_judgments(
    path: str | os.PathLike, allow_pickle: bool = False, subsets: Mapping[str, str] | None = None
) -> pl.DataFrame:
    """VICR or Composite as pickled in the CLIPScore risk-control bundle (trusted files only).

    The DataFrame has ``candidates``, ``image_path``, ``human_scores`` and ``refs`` (Composite) or
    ``subset`` (VICR: ``val`` and ``test``).

    Parameters
    ----------
    path : path-like
    allow_pickle : bool
        Unpickle the file (it runs code from it).
    subsets : mapping, optional
        Our subset name -> the release's ``subset`` value (``{"calibration": "val", "test": "test"}``, the
        paper's VICR splits): the table gets a ``subset`` column of our names, and the rows of any other
        release subset are dropped and counted.
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
    except Exception as error:  # unpickling raises whatever the file's bytes lead to
        raise DatasetFormatError(f"{path}: not a readable pickle ({type(error).__name__}: {error})") from None
    if not isinstance(table, pd.DataFrame):
        raise DatasetFormatError(f"{path}: holds a {type(table).__name__}, not a pandas DataFrame")
    missing = [c for c in ("candidates", "image_path", "human_scores") if c not in table.columns]
    if missing:
        raise DatasetFormatError(f"{path}: column '{missing[0]}' is missing (has {list(table.columns)})")
    ours = None
    if subsets:
        table, ours = _release_subsets(table, subsets, path)
    references = table["refs"].tolist() if "refs" in table.columns else [[] for _ in range(len(table))]
    scores = [_mean_score(scores, f"{path}: row {number}") for number, scores in enumerate(table["human_scores"])]
    checked = _checked_judgments(
        list(zip(table["image_path"].tolist(), table["candidates"].tolist(), references, scores)), path
    )
    return checked if ours is None else checked.with_columns(pl.Series("subset", ours, pl.String))


def _release_subsets(table, subsets: Mapping[str, str], path: Path):
    """The rows of ``table`` (pandas) in the release subsets ``subsets`` names, and their subset in our names."""
    if "subset" not in table.columns:
        raise DatasetFormatError(f"{path}: has no 'subset' column to split by (has {list(table.columns)})")
    found = sorted(map(str, table["subset"].unique()))
    absent = [value for value in subsets.values() if value not in found]
    if absent:
        raise DatasetFormatError(f"{path}: no row of subset {absent[0]!r} (its subsets: {found})")
    ours_of = {theirs: ours for ours, theirs in subsets.items()}
    kept = table[table["subset"].isin(list(ours_of))]
    report_rows(path, len(kept), {"in another subset": len(table) - len(kept)}, "judged captions")
    return kept, [ours_of[value] for value in kept["subset"]]


def _mean_score(scores: object, where: str) -> float:
    """The mean of one caption's human scores, each a finite number."""
    values = np.ravel(scores).tolist() if isinstance(scores, np.ndarray) else scores
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    if not values:
        raise DatasetFormatError(f"{where} has no human_scores")
    return float(np.mean([finite_number(_plain(value), where, "human_scores") for value in values]))


def _plain(value: object) -> object:
    """A NumPy scalar as the Python number it holds (pickled frames keep NumPy types)."""
    return value.item() if isinstance(value, np.generic) else value
