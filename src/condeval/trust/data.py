"""The trust track's real data, one table per dataset whatever its release format.

:func:`real_table` reads a release through its real loader (:func:`condeval.datasets.celeba.load_celeba`,
:func:`condeval.datasets.rxrx1.read_metadata`) into rows with a ``key``, a ``split`` and one integer
column per conditioning attribute (:data:`ATTRIBUTE_NAMES`); :func:`read_images` reads any of those
rows' pixels at a working side, as (N, C, side, side) uint8. :func:`training_support` says which rows a
support regime trains on, :func:`queried_conditions` which conditions are asked of the generators.

- **CelebA**: attributes Male, Smiling, Blond_Hair, Eyeglasses (0/1); ``split`` is the release's
  partition. Held-out: training sees the all-absent reference and the four single-attribute conditions
  (11 of 16 held out); every condition is queried.
- **RxRx1**: attributes ``cell_type_id`` (HEPG2 = 0, …) and ``sirna_id``; ``split`` is the metadata's
  ``dataset`` column. Held-out: the ``held_out_pairs`` most frequent pairs leave training; the queried
  conditions are :func:`~condeval.datasets.rxrx1.condition_subset`'s seen and unseen pairs.
"""

from __future__ import annotations

import os
from collections.abc import Iterable

import numpy as np
import polars as pl

from condeval.core.io import read_image
from condeval.datasets import DatasetFormatError, celeba, rxrx1

__all__ = [
    "DATASETS",
    "ATTRIBUTE_NAMES",
    "real_table",
    "attributes_of",
    "image_channels",
    "read_images",
    "ReleaseImages",
    "held_out_keys",
    "training_support",
    "calibration_units",
    "release_validation",
    "queried_conditions",
]

DATASETS = ("celeba", "rxrx1")
#: The conditioning attributes of each dataset, in the order of every attribute array of the track.
ATTRIBUTE_NAMES = {"celeba": celeba.ATTRIBUTES, "rxrx1": ("cell_type_id", "sirna_id")}


def _check_dataset(dataset: str) -> None:
    if dataset not in DATASETS:
        raise ValueError(f"dataset must be one of {DATASETS}; got {dataset!r}")


def real_table(dataset: str, root: str | os.PathLike) -> pl.DataFrame:
    """Every real row of a release: ``key``, ``split``, the attributes (Int64) and what locates its pixels.

    Raises
    ------
    condeval.datasets.DatasetFormatError
        From the loader, naming the file and the record.
    """
    _check_dataset(dataset)
    names = list(ATTRIBUTE_NAMES[dataset])
    if dataset == "celeba":
        frame = celeba.load_celeba(root).rename({"image": "key", "partition": "split"})
        return frame.with_columns(pl.col(names).cast(pl.Int64)).select("key", "split", *names, "path")
    frame = rxrx1.read_metadata(root)
    return frame.with_columns(
        pl.col("site_id").alias("key"), pl.col("dataset").alias("split"), pl.col(names).cast(pl.Int64)
    )


def attributes_of(dataset: str, table: pl.DataFrame) -> np.ndarray:
    """(N, K) int64: the rows' attribute values in :data:`ATTRIBUTE_NAMES` order."""
    return table.select(ATTRIBUTE_NAMES[dataset]).to_numpy().astype(np.int64)


def image_channels(dataset: str) -> int:
    """Channels of a dataset's images: CelebA's RGB, RxRx1's six fluorescence channels."""
    _check_dataset(dataset)
    return 3 if dataset == "celeba" else rxrx1.CHANNELS


def read_images(dataset: str, root: str | os.PathLike, rows: Iterable[dict], side: int) -> np.ndarray:
    """The rows' pixels at ``side`` × ``side``, (N, C, side, side) uint8 (CelebA: RGB; RxRx1: six channels).

    CelebA is resized on its short side and centre-cropped, as the paper's 256-pixel pipeline; RxRx1's
    sites are square and each channel is resized.
    """
    from PIL import Image

    _check_dataset(dataset)
    images = []
    for row in rows:
        if dataset == "celeba":
            image = read_image(row["path"], DatasetFormatError)
            pixels = np.asarray(_square(image.convert("RGB"), side)).transpose(2, 0, 1)
        else:
            site = rxrx1.load_site(root, row)
            pixels = np.stack([np.asarray(Image.fromarray(c).resize((side, side), Image.BILINEAR)) for c in site])
        images.append(pixels)
    if not images:
        return np.zeros((0, image_channels(dataset), side, side), dtype=np.uint8)
    return np.stack(images).astype(np.uint8)


class ReleaseImages:
    """The rows of a release table as images read when sliced: ``images[a:b]`` is :func:`read_images` of rows
    ``a .. b``, ``len(images)`` the row count. What a training job passes instead of an array that would
    hold the whole support in memory."""

    def __init__(self, dataset: str, root: str | os.PathLike, table: pl.DataFrame, side: int):
        _check_dataset(dataset)
        self.dataset, self.root, self.table, self.side = dataset, root, table, side

    def __len__(self) -> int:
        return self.table.height

    def __getitem__(self, rows: slice) -> np.ndarray:
        if not isinstance(rows, slice):
            raise TypeError(f"ReleaseImages reads a slice of rows (images[a:b]); got {type(rows).__name__}")
        return read_images(self.dataset, self.root, self.table[rows].iter_rows(named=True), self.side)


def _square(image, side: int):
    from PIL import Image

    scale = side / min(image.size)
    width, height = max(side, round(image.width * scale)), max(side, round(image.height * scale))
    image = image.resize((width, height), Image.BICUBIC)
    left, top = (width - side) // 2, (height - side) // 2
    return image.crop((left, top, left + side, top + side))


def held_out_keys(dataset: str, table: pl.DataFrame, n_pairs: int) -> np.ndarray:
    """(M, K): the conditions the held-out regime removes from training (RxRx1: the top ``n_pairs``
    pairs; CelebA: every condition with two or more attributes present)."""
    if dataset == "celeba":
        conditions = celeba.all_conditions()
        return conditions[~celeba.support(conditions, "held_out")].astype(np.int64)
    return rxrx1.held_out_pairs(table, n_pairs).select(ATTRIBUTE_NAMES["rxrx1"]).to_numpy().astype(np.int64)


def training_support(dataset: str, table: pl.DataFrame, regime: str, held_out_pairs: int = 100) -> np.ndarray:
    """Boolean mask of the rows a regime trains on: the ``train`` split, minus the held-out conditions
    under ``"held_out"``."""
    if regime not in celeba.REGIMES:
        raise ValueError(f"regime must be one of {celeba.REGIMES}; got {regime!r}")
    train = (table["split"] == "train").to_numpy()
    if regime == "full":
        return train
    held = {tuple(row) for row in held_out_keys(dataset, table, held_out_pairs).tolist()}
    return train & np.array([tuple(row) not in held for row in attributes_of(dataset, table).tolist()], dtype=bool)


def calibration_units(dataset: str, table: pl.DataFrame, rows: np.ndarray | None = None) -> np.ndarray | None:
    """Each real row's exchangeable unit for the scorer's held-out calibration (``TrustScorer.fit``'s
    ``groups``), for ``rows`` (a mask) or every row: RxRx1's well, whose sites share its plate, treatment
    and well effect; None for CelebA, whose identity file is not read (each image its own unit)."""
    _check_dataset(dataset)
    if dataset != "rxrx1":
        return None
    wells = table["well_id"].to_numpy()
    return wells if rows is None else wells[rows]


def release_validation(table: pl.DataFrame, n: int, seed: int) -> pl.DataFrame:
    """``n`` rows of the release's validation split (a release without one, as RxRx1's metadata: its test
    split), every condition included, drawn with ``seed``: the official code's checkpoint selection.

    Under the held-out regime these rows include the held-out conditions, so their real targets choose
    the generator's checkpoint (the trap REFERENCE.md names); the default selects on support rows only.
    """
    splits = set(table["split"].unique().to_list())
    split = "val" if "val" in splits else "test"
    rows = table.filter(pl.col("split") == split)
    if rows.height < n:
        raise ValueError(f"the release's {split!r} split has {rows.height} rows; validation asks for {n}")
    return rows.sample(n=n, shuffle=True, seed=seed)


def queried_conditions(
    dataset: str, table: pl.DataFrame, held_out_pairs: int = 100, n_each: int = 25, min_count: int = 22
) -> pl.DataFrame:
    """The conditions the generators are asked for, one row each: the attributes and ``seen`` (whether
    the held-out regime trains on it). CelebA: all 16; RxRx1: the canonical seen and unseen pairs."""
    names = list(ATTRIBUTE_NAMES[dataset])
    if dataset == "celeba":
        conditions = celeba.all_conditions().astype(np.int64)
        frame = pl.DataFrame({name: conditions[:, k] for k, name in enumerate(names)})
        return frame.with_columns(pl.Series("seen", celeba.support(conditions, "held_out")))
    held = rxrx1.held_out_pairs(table, held_out_pairs)
    subset = rxrx1.condition_subset(table, held, n_each, min_count)
    return subset.select(pl.col(names).cast(pl.Int64), "seen")
