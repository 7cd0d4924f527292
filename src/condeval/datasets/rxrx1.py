"""RxRx1 (Recursion's Cell Painting images of four cell types under 1,108 siRNAs plus controls), read
as released: ``metadata.csv`` and six 8-bit PNG channels per site.

- ``metadata.csv``: ``site_id, well_id, cell_type, dataset, experiment, plate, well, site, well_type,
  sirna, sirna_id`` (ids like ``HEPG2-01_1_B02_1``).
- ``images/<experiment>/Plate<plate>/<well>_s<site>_w<c>.png`` for channels c = 1..6, 512 × 512 on
  the release.

A site's six channels stack into a (6, H, W) uint8 array (:func:`load_site`). The trust-score code
treats ``sirna_id >= 1108`` as controls (:data:`CONTROL_SIRNA_ID`) and codes cell types as
HEPG2 = 0, HUVEC = 1, RPE = 2, U2OS = 3 (:data:`CELL_TYPES`).

An RGB reader (CellProfiler's composite input, DINOv3 and SigLIP from the hub) sees a site as its
:func:`composite`, as the official code composes it: each channel stretched between its own 0.1th and
99.9th percentiles, coloured with rxrx1-utils' colour map (:data:`RXRX1_COLOURS`), the six summed and
clipped (rxrx1-utils' ``convert_tensor_to_rgb`` uses fixed ranges instead of percentiles).
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import polars as pl

from condeval.datasets import DatasetFormatError, relative_path, report_rows, text_field

__all__ = [
    "METADATA_COLUMNS",
    "CELL_TYPES",
    "CHANNELS",
    "DATASETS",
    "CONTROL_SIRNA_ID",
    "read_metadata",
    "site_paths",
    "load_site",
    "write_site",
    "held_out_pairs",
    "condition_subset",
    "RXRX1_COLOURS",
    "STRETCH_PERCENTILES",
    "composite",
    "composites",
    "resized",
]

METADATA_COLUMNS = (
    "site_id",
    "well_id",
    "cell_type",
    "dataset",
    "experiment",
    "plate",
    "well",
    "site",
    "well_type",
    "sirna",
    "sirna_id",
)
CELL_TYPES = {"HEPG2": 0, "HUVEC": 1, "RPE": 2, "U2OS": 3}
CHANNELS = 6
#: The release's ``dataset`` values: its training and test sites.
DATASETS = ("train", "test")
#: siRNA ids from this one on are controls (the trust-score code's rule).
CONTROL_SIRNA_ID = 1108

_INTEGER_COLUMNS = ("plate", "site", "sirna_id")
#: rxrx1-utils' colour of each channel (w1 Hoechst ... w6 Golgi), RGB in 0..255.
RXRX1_COLOURS = np.array(
    [[19, 0, 249], [42, 255, 31], [255, 0, 25], [45, 255, 252], [250, 0, 253], [254, 255, 40]], dtype=np.float64
)
STRETCH_PERCENTILES = (0.1, 99.9)


def read_metadata(root: str | os.PathLike) -> pl.DataFrame:
    """``<root>/metadata.csv``, checked, with a ``cell_type_id`` column added.

    Raises
    ------
    DatasetFormatError
        Naming the file and the CSV line: a missing column, an empty site or well id, an empty,
        negative or non-integer plate, site or siRNA id, an unknown cell type, a ``dataset`` other than train or
        test, an experiment or well that leaves the data root, or a duplicate site id.
    """
    path = Path(root) / "metadata.csv"
    try:
        frame = pl.read_csv(path, infer_schema=False)
    except FileNotFoundError:
        raise DatasetFormatError(f"{path}: file not found") from None
    except pl.exceptions.ComputeError as error:
        raise DatasetFormatError(f"{path}: not a readable CSV ({error})") from None
    missing = [c for c in METADATA_COLUMNS if c not in frame.columns]
    if missing:
        raise DatasetFormatError(f"{path}: no column {missing[0]!r} (expected {', '.join(METADATA_COLUMNS)})")
    for column in _INTEGER_COLUMNS:
        parsed = frame[column].str.strip_chars().cast(pl.Int64, strict=False)
        bad = frame.with_row_index().filter(parsed.is_null() | (parsed < 0))
        if bad.height:
            line = bad["index"][0] + 2  # the header is line 1
            raise DatasetFormatError(
                f"{path}: line {line}: {column!r} must be a non-negative integer, found {bad[column][0]!r}"
            )
        frame = frame.with_columns(parsed.alias(column))
    for line, row in enumerate(frame.iter_rows(named=True), start=2):
        where = f"{path}: line {line} (site {row['site_id']})"
        text_field(row["site_id"], where, "site_id")
        text_field(row["well_id"], where, "well_id")
        if row["cell_type"] not in CELL_TYPES:
            raise DatasetFormatError(
                f"{where}: unknown cell type {row['cell_type']!r} (known: {', '.join(CELL_TYPES)})"
            )
        if row["dataset"] not in DATASETS:
            raise DatasetFormatError(f"{where}: 'dataset' must be one of {DATASETS}, found {row['dataset']!r}")
        relative_path(row["experiment"], where, "experiment")
        relative_path(row["well"], where, "well")
    duplicated = frame.filter(pl.col("site_id").is_duplicated())
    if duplicated.height:
        raise DatasetFormatError(f"{path}: site {duplicated['site_id'][0]!r} listed twice")
    report_rows(path, frame.height, {}, "sites")
    return frame.with_columns(
        pl.col("cell_type").replace_strict(CELL_TYPES, return_dtype=pl.Int64).alias("cell_type_id")
    )


def site_paths(root: str | os.PathLike, row: dict) -> list[Path]:
    """The six channel files of one metadata row: ``images/<experiment>/Plate<plate>/<well>_s<site>_w<c>.png``.

    The row's experiment and well must stay under ``root`` (no absolute path, no ``..``), as
    :func:`read_metadata` checks them, since a row may also be built by hand.
    """
    where = f"site {row.get('site_id')}"
    experiment = relative_path(row["experiment"], where, "experiment")
    well = relative_path(row["well"], where, "well")
    folder = Path(root) / "images" / experiment / f"Plate{int(row['plate'])}"
    return [folder / f"{well}_s{int(row['site'])}_w{c}.png" for c in range(1, CHANNELS + 1)]


def load_site(root: str | os.PathLike, row: dict) -> np.ndarray:
    """One site's channels stacked, (6, H, W) uint8.

    Raises
    ------
    DatasetFormatError
        Naming the site and the file: a missing channel file, one that is not an 8-bit single-channel
        image, or channels of different sizes.
    """
    from PIL import Image

    channels = []
    for path in site_paths(root, row):
        if not path.is_file():
            raise DatasetFormatError(f"site {row['site_id']}: channel file {path} is missing")
        try:
            with Image.open(path) as image:
                if image.mode != "L":
                    raise DatasetFormatError(f"site {row['site_id']}: {path} is mode {image.mode}, not 8-bit grey (L)")
                channels.append(np.asarray(image))
        except OSError as error:  # not an image (PIL.UnidentifiedImageError), truncated, unreadable
            raise DatasetFormatError(f"site {row['site_id']}: {path} is not a readable image ({error})") from None
    if len({c.shape for c in channels}) != 1:
        raise DatasetFormatError(f"site {row['site_id']}: its channels differ in size {[c.shape for c in channels]}")
    return np.stack(channels)


def write_site(root: str | os.PathLike, row: dict, channels: np.ndarray) -> list[Path]:
    """Write a (6, H, W) uint8 site as RxRx1's six PNGs (the miniature's writer), each atomically."""
    from PIL import Image

    from condeval.core.io import atomic_path

    channels = np.asarray(channels)
    if channels.shape[0] != CHANNELS or channels.ndim != 3 or channels.dtype != np.uint8:
        raise ValueError(f"a site is ({CHANNELS}, H, W) uint8; got {channels.shape} {channels.dtype}")
    paths = site_paths(root, row)
    for path, channel in zip(paths, channels, strict=True):
        with atomic_path(path) as tmp:
            Image.fromarray(channel, mode="L").save(tmp, format="PNG")
    return paths


def composites(sites: np.ndarray) -> np.ndarray:
    """RGB composites of a batch of sites: uint8 (N, 6, H, W) to uint8 (N, 3, H, W), each site stretched
    between its own channels' percentiles (the batch does not change a site's colours)."""
    sites = np.asarray(sites)
    if sites.ndim != 4 or sites.shape[1] != CHANNELS:
        raise ValueError(f"sites are (N, {CHANNELS}, H, W); got shape {sites.shape}")
    sites = sites.astype(np.float32)
    low, high = np.percentile(sites, STRETCH_PERCENTILES, axis=(2, 3), keepdims=True)
    stretched = np.clip((sites - low) / np.maximum(high - low, 1e-6), 0.0, 1.0)
    rgb = np.einsum("nchw,ck->nkhw", stretched, RXRX1_COLOURS.astype(np.float32))
    return np.round(np.clip(rgb, 0, 255)).astype(np.uint8)


def composite(site: np.ndarray, side: int | None = None) -> np.ndarray:
    """One site's RGB composite, (side, side, 3) uint8 (:func:`composites` of one site, channels last).

    Parameters
    ----------
    site : ndarray, shape (6, H, W), uint8
        RxRx1's channels w1..w6.
    side : int, optional
        Resize (bicubic) to this side after colouring: every image CellProfiler measures, real or
        generated, at one size (the miniature's 32-pixel sites at 128; the paper's generator at 256).
    """
    site = np.asarray(site)
    if site.ndim != 3 or site.shape[0] != CHANNELS:
        raise ValueError(f"a site is ({CHANNELS}, H, W); got {site.shape}")
    return resized(composites(site[None])[0].transpose(1, 2, 0), side)


def resized(image: np.ndarray, side: int | None) -> np.ndarray:
    """A uint8 image (H, W) or (H, W, 3) resized (bicubic, PIL) to ``side`` × ``side``; as it is without ``side``."""
    from PIL import Image

    if side is None or image.shape[:2] == (side, side):
        return image
    return np.asarray(Image.fromarray(image).resize((side, side), Image.BICUBIC))


def _pair_counts(metadata: pl.DataFrame) -> pl.DataFrame:
    """Sites per (cell type, siRNA) pair, ranked by (−n, cell type, siRNA): a total order, ties included."""
    return (
        metadata.group_by("cell_type_id", "sirna_id")
        .agg(pl.len().alias("n"))
        .sort(["n", "cell_type_id", "sirna_id"], descending=[True, False, False])
    )


def held_out_pairs(metadata: pl.DataFrame, n_pairs: int = 100) -> pl.DataFrame:
    """The pairs the held-out regime removes from training: the ``n_pairs`` most frequent (cell type,
    siRNA) pairs among the release's training sites (``dataset == "train"``), as the official code picks
    them (mostly controls). Ties are broken by (cell type, siRNA), where the official code's sort leaves
    them to pandas.

    Returns
    -------
    polars.DataFrame
        ``cell_type_id``, ``sirna_id``, ``n``.
    """
    return _pair_counts(metadata.filter(pl.col("dataset") == "train")).head(n_pairs)


def condition_subset(
    metadata: pl.DataFrame, held_out: pl.DataFrame, n_each: int = 25, min_count: int = 22
) -> pl.DataFrame:
    """The evaluation's condition subset: ``n_each`` unseen (held-out) and ``n_each`` seen pairs, each the
    first of its kind ranked by (−n, cell type, siRNA) among pairs with at least ``min_count`` sites.

    Returns
    -------
    polars.DataFrame
        ``cell_type_id``, ``sirna_id``, ``n``, ``seen`` (bool), ``control`` (``sirna_id >= 1108``);
        unseen pairs first.

    Raises
    ------
    ValueError
        If fewer than ``n_each`` pairs of a kind pass ``min_count``.
    """
    counts = _pair_counts(metadata).filter(pl.col("n") >= min_count)
    keys = held_out.select("cell_type_id", "sirna_id").with_columns(pl.lit(True).alias("held"))
    counts = counts.join(keys, on=["cell_type_id", "sirna_id"], how="left", maintain_order="left")
    parts = []
    for seen in (False, True):
        kind = counts.filter(pl.col("held").is_null() == seen).head(n_each)
        if kind.height < n_each:
            label = "seen" if seen else "unseen"
            raise ValueError(f"only {kind.height} {label} pairs have at least {min_count} sites; {n_each} needed")
        parts.append(kind.with_columns(pl.lit(seen).alias("seen")))
    return pl.concat(parts).drop("held").with_columns((pl.col("sirna_id") >= CONTROL_SIRNA_ID).alias("control"))
