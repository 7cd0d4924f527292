"""The paper's benchmarks as one caption table each, ready for attention-mask sampling.

Word benchmarks (FOIL-it, FOIL-nocaps, RichHF-18K) become word-labelled captions; judgment sets
(Flickr8k-Expert, Polaris, VICR, Composite) become captions with a human score. Every table has
``key`` (its row number, which seeds the row's masks), ``path`` (the image file), ``words`` and
``subset`` ("calibration" or "test"); word tables add ``labels`` (1 = the word is an error) and
``domain``; judgment tables add ``human_score``.

FOIL-it calibrates on a random ``calibration_fraction`` of the *train* file's images and tests on
the whole test file: the paper's sizes (a 395,300-pair calibration split, about twice the train
file's items, i.e. all of it as originals and foils; a 198,960-pair test split, the whole test
file) and the official code (10% of the train file) both calibrate on the train file. Passing no
train file is the other reading: a fraction of the test file's images calibrates, the rest tests.
Every draw is by image, so no image is in both subsets. RichHF-18K calibrates on its dev split;
a judgment set on its release's own calibration subset (VICR's ``val``, the paper's) or on a random
fraction of one set's images.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import polars as pl

from condeval.datasets import DatasetFormatError, report_rows
from condeval.datasets.foil import load_foil_it, load_foil_nocaps, normalize_caption
from condeval.datasets.judgments import load_flickr8k_expert, load_pickled_judgments, load_polaris
from condeval.datasets.rich_hf import pick_a_pic_prompts, read_rich_hf

__all__ = [
    "PAPER_PAIRS",
    "SUBSETS",
    "WORD_BENCHMARKS",
    "foil_it_captions",
    "foil_nocaps_captions",
    "rich_hf_captions",
    "judged_captions",
    "image_subsets",
]

SUBSETS = ("calibration", "test")
WORD_BENCHMARKS = ("foil_it", "foil_nocaps", "rich_hf")
#: Image-caption pairs of each benchmark's release: FOIL-it test 198,960 and its train file 395,300 (when
#: FOIL-it calibrates on it), FOIL-nocaps 5,000, Rich-HF dev 995 + test 955 (REFERENCE.md), VICR 15,646,
#: Polaris test 26,122 rows (REFERENCE.md; 8,726 unique pairs in the paper), Flickr8k-Expert 5,664,
#: Composite 13,146 (the paper's appendix). They size the sampling jobs before the data is read.
PAPER_PAIRS = {
    "foil_it": 198_960,
    "foil_it_train": 395_300,
    "foil_nocaps": 5_000,
    "rich_hf": 995 + 955,
    "vicr": 15_646,
    "polaris": 26_122,
    "flickr8k": 5_664,
    "composite": 13_146,
}


def image_subsets(images: pl.Series, fraction: float, seed: int) -> pl.Series:
    """ "calibration" for a random ``fraction`` of the distinct images (at least one), else "test".

    Examples
    --------
    >>> import polars as pl
    >>> from condeval.crc.benchmarks import image_subsets
    >>> images = pl.Series("image", ["a.jpg", "a.jpg", "b.jpg", "c.jpg", "c.jpg", "d.jpg"])   # one row per caption
    >>> image_subsets(images, fraction=0.5, seed=0).to_list()   # 2 of 4 images; an image's captions stay together
    ['calibration', 'calibration', 'test', 'calibration', 'calibration', 'test']
    """
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
        raise ValueError(f"fraction must lie in (0, 1]; got {fraction!r}")
    distinct = np.unique(images.to_numpy())
    chosen = np.random.default_rng(seed).permutation(len(distinct))[: max(1, int(round(fraction * len(distinct))))]
    calibration = set(distinct[chosen].tolist())
    return pl.Series("subset", ["calibration" if image in calibration else "test" for image in images.to_list()])


def _finish(frame: pl.DataFrame, columns: list[str]) -> pl.DataFrame:
    return frame.select(columns).with_row_index("key").with_columns(pl.col("key").cast(pl.Int64))


_WORD_COLUMNS = ["path", "words", "labels", "subset", "domain", "pair_id"]


def foil_it_captions(
    annotations_json: str | os.PathLike,
    image_dir: str | os.PathLike,
    *,
    calibration_fraction: float,
    seed: int,
    train_json: str | os.PathLike | None = None,
    train_image_dir: str | os.PathLike | None = None,
) -> pl.DataFrame:
    """FOIL-it (originals and foils) as calibration and test subsets, drawn by image.

    Parameters
    ----------
    annotations_json, image_dir : path-like
        The test file and its images.
    calibration_fraction : float
        With ``train_json``: the share of the train file's images that calibrate (1: all of it, the
        paper's sizes; 0.1: the official code's), the test file tests whole. Without: the share of
        the test file's images that calibrate, the rest tests.
    seed : int
        Of the draw of calibration images (:func:`image_subsets`).
    train_json, train_image_dir : path-like, optional
        The train file and its images (real FOIL-it: COCO train2014).
    """
    domain = pl.lit(None, pl.String).alias("domain")
    test = load_foil_it(annotations_json, image_dir)
    if train_json is None:
        return _finish(
            test.with_columns(image_subsets(test["image_id"], calibration_fraction, seed), domain), _WORD_COLUMNS
        )
    train = load_foil_it(train_json, train_image_dir if train_image_dir is not None else image_dir)
    train = train.with_columns(image_subsets(train["image_id"], calibration_fraction, seed)).filter(
        pl.col("subset") == "calibration"
    )
    return _finish(
        pl.concat([train, test.with_columns(pl.lit("test").alias("subset"))], how="diagonal_relaxed").with_columns(
            domain
        ),
        _WORD_COLUMNS,
    )


def foil_nocaps_captions(path: str | os.PathLike, image_root: str | os.PathLike) -> pl.DataFrame:
    """FOIL-nocaps (baselines and foils), all test, with each record's domain (in, near, out)."""
    frame = load_foil_nocaps(path, image_root).with_columns(pl.lit("test").alias("subset"))
    return _finish(frame, _WORD_COLUMNS)


def rich_hf_captions(
    calibration: str | os.PathLike, test: str | os.PathLike, prompts: str | os.PathLike, image_dir: str | os.PathLike
) -> pl.DataFrame:
    """RichHF-18K's word-labelled prompts: the dev split calibrates, the test split tests."""
    by_uid = pick_a_pic_prompts([prompts])
    parts = []
    for subset, tfrecord in zip(SUBSETS, (calibration, test)):
        frame = read_rich_hf(tfrecord, by_uid, image_dir)
        parts.append(
            frame.with_columns(
                pl.lit(subset).alias("subset"),
                pl.lit(None, pl.String).alias("domain"),
                pl.lit(None, pl.Int64).alias("pair_id"),
            )
        )
    return _finish(pl.concat(parts, how="diagonal_relaxed"), _WORD_COLUMNS)


_LOADERS = {"flickr8k": load_flickr8k_expert, "polaris": load_polaris}


def judged_captions(
    fmt: str,
    path: str | os.PathLike,
    image_root: str | os.PathLike,
    *,
    allow_pickle: bool = False,
    calibration_fraction: float = 0.0,
    seed: int = 0,
    subsets: Mapping[str, str] | None = None,
) -> pl.DataFrame:
    """A human-judgment set as captions with ``human_score``; the release's own subsets, or a
    ``calibration_fraction`` of its images, calibrate.

    Parameters
    ----------
    fmt : {"flickr8k", "polaris", "pickle"}
        The release format (``pickle``: VICR and Composite, refused unless ``allow_pickle``).
    path, image_root : path-like
        The release file, and the folder its image paths are relative to.
    allow_pickle : bool
        Unpickle a ``pickle`` release (it runs code from the file: trusted files only).
    calibration_fraction, seed : float, int
        The share of the set's images drawn (seeded) to calibrate; the rest test (:func:`image_subsets`).
        Not used with ``subsets``.
    subsets : mapping, optional
        A ``pickle`` release's own split: ``{"calibration": "val", "test": "test"}`` (VICR's, the paper's);
        ``{"test": "test"}`` tests on the release's test rows alone.
    """
    if subsets and fmt != "pickle":
        raise ValueError(f"{path}: only a pickle release has its own subsets (format {fmt!r})")
    if fmt == "pickle":
        frame = load_pickled_judgments(path, allow_pickle=allow_pickle, subsets=subsets)
    elif fmt in _LOADERS:
        frame = _LOADERS[fmt](path)
    else:
        raise ValueError(f"unknown judgment format {fmt!r}; expected one of {[*_LOADERS, 'pickle']}")
    root = Path(image_root)
    absent = next((image for image in frame["image"].unique().sort() if not (root / image).is_file()), None)
    if absent is not None:
        raise DatasetFormatError(f"{path}: image {root / absent} is missing")
    frame = frame.with_columns(
        (pl.lit(str(root) + os.sep) + pl.col("image")).alias("path"),
        pl.col("caption").map_elements(normalize_caption, return_dtype=pl.List(pl.String)).alias("words"),
    )
    with_words = frame.filter(pl.col("words").list.len() > 0)
    report_rows(
        path, len(with_words), {"no word left after normalisation": len(frame) - len(with_words)}, "judged captions"
    )
    frame = with_words
    if "subset" not in frame.columns:
        subset = (
            image_subsets(frame["image"], calibration_fraction, seed)
            if calibration_fraction > 0
            else pl.Series("subset", ["test"] * len(frame))
        )
        frame = frame.with_columns(subset)
    return _finish(frame, ["path", "words", "human_score", "subset"])
