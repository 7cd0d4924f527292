"""CellProfiler's inputs and outputs (Section 5.1.3): RGB composites of six-channel sites, a headless
``cellprofiler`` run of a saved pipeline, and its ``Image.csv``.

CellProfiler lives in its own environment (``make cellprofiler``, or ``envs/cellprofiler.yaml`` on a
cluster) and is only ever called as a program, so nothing here imports it. The pipelines are built with
the ``cellprofiler_core`` API by ``tools/build_cppipe.py`` and saved under ``workflow/resources/trust/``.

Composite (the official code's input): :func:`condeval.datasets.rxrx1.composite`, the one RGB view of
a site that every RGB reader of this project shares.
"""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import polars as pl

from condeval.core.io import DataFileError, atomic_path
from condeval.datasets.rxrx1 import RXRX1_COLOURS, composite, resized

__all__ = [
    "RXRX1_COLOURS",
    "INPUTS",
    "IMAGE_SUFFIX",
    "composite",
    "write_inputs",
    "run_cellprofiler",
    "file_column",
    "read_image_csv",
    "merge_image_csvs",
    "segmentation_check",
    "RUN_COLUMNS",
]

#: What a pipeline reads per site: one RGB composite (the official code's) or the six grey channels.
INPUTS = ("composite", "channels")
#: The files a pipeline reads: NumPy arrays, float32 in [0, 1]. CellProfiler loads ``.npy`` in Python,
#: where a PNG goes through Bio-Formats in Java (0.2 s a site more, measured), to the same features.
IMAGE_SUFFIX = ".npy"
_REQUIRED_COLUMNS = ("ImageNumber", "Count_Nuclei", "Count_Cells")
#: Image.csv columns that describe the run, not the site: each module's seconds, the absolute folder of the
#: inputs, and the image set's encoded file list. :func:`merge_image_csvs` drops them, so the same sites give
#: the same table in any run and clone.
RUN_COLUMNS = re.compile(r"^(ExecutionTime_|PathName_|URL_|ImageSet_)|^Metadata_FileLocation$")


def write_inputs(
    sites: Iterable[tuple[str, np.ndarray]], folder: str | os.PathLike, kind: str = "composite", side: int | None = None
) -> list[Path]:
    """Write each ``(name, site)`` for a pipeline of input ``kind``: ``<name>.npy`` (composite, RGB) or
    ``<name>_w1.npy`` .. ``<name>_w6.npy`` (channels, each resized to ``side``), 8-bit values divided by
    255 as CellProfiler scales a PNG. Returns the files."""
    if kind not in INPUTS:
        raise ValueError(f"input must be one of {INPUTS}; got {kind!r}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, site in sites:
        if kind == "composite":
            images = {f"{name}{IMAGE_SUFFIX}": composite(site, side)}
        else:
            images = {
                f"{name}_w{c + 1}{IMAGE_SUFFIX}": resized(np.asarray(channel), side) for c, channel in enumerate(site)
            }
        for file, image in images.items():
            with atomic_path(folder / file) as tmp, open(tmp, "wb") as stream:
                np.save(stream, image.astype(np.float32) / 255)
            written.append(folder / file)
    return written


def run_cellprofiler(
    command: str,
    pipeline: str | os.PathLike,
    images: str | os.PathLike,
    output: str | os.PathLike,
    log: str | os.PathLike | None = None,
) -> Path:
    """Run ``command -c -r -p pipeline -i images -o output`` (CellProfiler headless) and return the
    ``Image.csv`` it wrote. Its output goes to ``log`` (appended); a failure raises naming the log."""
    output = Path(output)
    output.mkdir(parents=True, exist_ok=True)
    argv = [command, "-c", "-r", "-p", str(pipeline), "-i", str(images), "-o", str(output)]
    log_path = Path(log) if log else output / "cellprofiler.log"
    with open(log_path, "a") as stream:
        stream.write(f"$ {' '.join(argv)}\n")
        stream.flush()
        try:
            done = subprocess.run(argv, stdout=stream, stderr=subprocess.STDOUT, check=False)
        except FileNotFoundError as error:
            raise RuntimeError(
                f"CellProfiler not found: {command!r} (build it with `make cellprofiler`, or set "
                "trust.morphology.cellprofiler)"
            ) from error
    image_csv = output / "Image.csv"
    if done.returncode != 0 or not image_csv.is_file():
        raise RuntimeError(f"CellProfiler failed (exit {done.returncode}, no {image_csv}? see {log_path})")
    return image_csv


def file_column(kind: str) -> str:
    """The Image.csv column naming a site's file, by pipeline input: the composite, or channel w1."""
    if kind not in INPUTS:
        raise ValueError(f"input must be one of {INPUTS}; got {kind!r}")
    return "FileName_DATA" if kind == "composite" else "FileName_w1"


def read_image_csv(path: str | os.PathLike, column: str = "FileName_DATA") -> pl.DataFrame:
    """CellProfiler's per-image table, with ``name``: the site's file name without its suffix (``.npy``,
    or ``.png`` for a lab's own pipeline; for the channel input, without ``_w1``).

    Raises
    ------
    DataFileError
        Naming the file: missing columns, or a row whose file name is empty.
    """
    frame = _numeric(pl.read_csv(path, infer_schema_length=None))
    missing = [c for c in (*_REQUIRED_COLUMNS, column) if c not in frame.columns]
    if missing:
        raise DataFileError(f"{path}: not a CellProfiler Image.csv of this pipeline, missing columns {missing}")
    names = frame[column].str.replace(r"(_w1)?\.(npy|png)$", "")
    empty = frame.filter(names.is_null() | (names == ""))
    if empty.height:
        raise DataFileError(f"{path}: ImageNumber {empty['ImageNumber'][0]} has no {column}")
    return frame.with_columns(names.alias("name"))


def _numeric(frame: pl.DataFrame) -> pl.DataFrame:
    """Text columns whose every value reads as a number, as Float64 (polars' inference keeps some of
    CellProfiler's number columns as text)."""
    numeric = []
    for name, dtype in frame.schema.items():
        if dtype == pl.String:
            values = frame[name].cast(pl.Float64, strict=False)
            if values.null_count() == frame[name].null_count():
                numeric.append(values)
    return frame.with_columns(numeric)


def merge_image_csvs(paths: Iterable[str | os.PathLike], column: str = "FileName_DATA") -> pl.DataFrame:
    """Shards' ``Image.csv`` as one table (``ImageNumber`` renumbered), refusing a site seen twice; the
    columns that describe the run (:data:`RUN_COLUMNS`) are dropped."""
    frames = [read_image_csv(path, column) for path in paths]
    frames = [frame.select(c for c in frame.columns if not RUN_COLUMNS.search(c)) for frame in frames]
    merged = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
    duplicated = merged.filter(pl.col("name").is_duplicated())["name"].unique().to_list() if frames else []
    if duplicated:
        raise DataFileError(f"sites measured in more than one shard: {sorted(duplicated)[:5]}")
    return merged.with_columns(pl.int_range(1, merged.height + 1).alias("ImageNumber")) if frames else merged


def segmentation_check(measured: pl.DataFrame, drawn: pl.DataFrame) -> dict:
    """CellProfiler's nuclei per site (``name``, ``Count_Nuclei``) against the cells a miniature drew
    (``site_id``, ``cells``): sites, mean counted and drawn, share exact, mean absolute error, Pearson r."""
    joined = measured.select("name", "Count_Nuclei").join(
        drawn.select(pl.col("site_id").alias("name"), "cells"),
        on="name",
        how="inner",
        validate="1:1",
        maintain_order="left",
    )
    counted, truth = joined["Count_Nuclei"].to_numpy(), joined["cells"].to_numpy()
    return {
        "sites": joined.height,
        "counted": float(counted.mean()),
        "drawn": float(truth.mean()),
        "exact": float((counted == truth).mean()),
        "mae": float(np.abs(counted - truth).mean()),
        "r": float(np.corrcoef(counted, truth)[0, 1]) if joined.height > 1 else float("nan"),
    }
