"""Generated images on disk: one folder of PNG files per shard and a Parquet manifest beside it.

The layout any generator's samples can be placed in, so that a lab scores its own model's images
without this package's generators::

    <shard>/                 <image_id:012d>.png, one per item
    <shard>.parquet          image_id (int64), prompt (str), file (str: relative to the manifest's folder),
                             seed (uint64: the seed of the image's noise; 0 when unknown)

:func:`read_image_manifest` checks the columns, that every file exists and that no file lies outside
the manifest's folder.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import polars as pl

from condeval.core.io import DataFileError, atomic_directory, check_integer, link_or_copy, read_parquet, write_parquet

__all__ = ["MANIFEST_COLUMNS", "write_generated_images", "generate_image_shard", "read_image_manifest"]

MANIFEST_COLUMNS = ("image_id", "prompt", "file", "seed")


def write_generated_images(
    images, image_ids, prompts, seeds, folder: str | os.PathLike, manifest: str | os.PathLike
) -> pl.DataFrame:
    """Save ``images`` (PIL) as ``folder/<image_id>.png`` (the folder atomically) and their manifest.

    Returns the manifest frame. ``folder`` must lie beside or below the manifest's folder. Everything
    is checked before a file is written, so a refused call leaves no folder without its manifest:

    Raises
    ------
    TypeError, ValueError
        Naming the argument: lengths that differ, an image that is not a PIL image, an image id or
        seed that is not a non-negative integer, a repeated image id (one file per id), a ``folder``
        outside the manifest's folder (:func:`read_image_manifest` would refuse the manifest).
    """
    ids, seeds = _checked_rows(image_ids, prompts, seeds, folder, manifest, images=len(images))
    _check_images(images, 0)
    with atomic_directory(folder) as tmp:
        for image, image_id in zip(images, ids, strict=True):
            image.save(tmp / f"{image_id:012d}.png")
    return _write_manifest(ids, prompts, seeds, folder, manifest)


def generate_image_shard(
    draw,
    image_ids,
    prompts,
    seeds,
    folder: str | os.PathLike,
    manifest: str | os.PathLike,
    *,
    chunk_size: int,
    fingerprint: dict,
) -> pl.DataFrame:
    """Draw a shard's images chunk by chunk and save them as :func:`write_generated_images` does.

    Each chunk's PNGs are written, complete, beside the manifest before the next chunk is drawn
    (:class:`condeval.core.chunks.ChunkedWork`): a job killed after hours keeps what it drew, its rerun
    draws the rest, and memory holds one chunk's images. The result is the same bytes as one pass.

    Parameters
    ----------
    draw : callable
        ``draw(items)`` returns the PIL images of the rows at positions ``items`` (a slice).
    image_ids, prompts, seeds
        One per image, as :func:`write_generated_images` takes them.
    folder, manifest : path-like
        Where the images and their manifest land.
    chunk_size : int
        Images per chunk: a multiple of the pipeline's batch.
    fingerprint : dict
        What the images are drawn from (the generator's folder and settings); chunks of another are
        discarded.

    Returns
    -------
    polars.DataFrame
        The manifest.
    """
    from condeval.core.chunks import ChunkedWork, digest

    ids, seeds = _checked_rows(image_ids, prompts, seeds, folder, manifest)
    rows = {"ids": digest(np.asarray(ids)), "prompts": digest(list(prompts)), "seeds": digest(seeds)}
    work = ChunkedWork(manifest, {**fingerprint, **rows, "chunk_size": chunk_size}, len(ids), chunk_size)

    def write_chunk(items: slice, tmp: Path) -> None:
        images = draw(items)
        if len(images) != len(ids[items]):
            raise ValueError(f"draw returned {len(images)} images for the {len(ids[items])} rows {items}")
        _check_images(images, items.start)
        for image, image_id in zip(images, ids[items], strict=True):
            image.save(tmp / f"{image_id:012d}.png")

    chunks = work.run(write_chunk)
    with atomic_directory(folder) as tmp:
        for chunk in chunks:
            for png in sorted(chunk.glob("*.png")):
                link_or_copy(png, tmp / png.name)  # the chunk stays whole until the manifest is written
    frame = _write_manifest(ids, prompts, seeds, folder, manifest)
    work.clear()
    return frame


def _checked_rows(image_ids, prompts, seeds, folder, manifest, images: int | None = None):
    """(ids, seeds) as integer lists, every row checked before anything is written."""
    folder, manifest = Path(folder), Path(manifest)
    if isinstance(prompts, str) or not all(isinstance(prompt, str) for prompt in prompts):
        raise TypeError("prompts must be a sequence of str, one per image (not one str, not None items)")
    lengths = {"image_ids": len(image_ids), "prompts": len(prompts), "seeds": len(seeds)}
    if images is not None:
        lengths = {"images": images, **lengths}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"one image id, prompt and seed per image; got lengths {lengths}")
    ids = [check_integer(value, f"image_ids[{row}]") for row, value in enumerate(image_ids)]
    seeds = [check_integer(value, f"seeds[{row}]") for row, value in enumerate(seeds)]
    unique, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        raise ValueError(f"image_ids: image id {int(unique[counts > 1][0])} appears more than once (one file per id)")
    if not folder.resolve().is_relative_to(manifest.parent.resolve()):
        raise ValueError(f"folder {folder} must lie beside or below the manifest's folder {manifest.parent}")
    return np.asarray(ids, dtype=np.int64), seeds


def _check_images(images, first_row: int) -> None:
    from PIL import Image

    bad = next((row for row, image in enumerate(images) if not isinstance(image, Image.Image)), None)
    if bad is not None:
        raise TypeError(
            f"images[{first_row + bad}] must be a PIL image; got {type(images[bad]).__name__} "
            "(PIL.Image.fromarray converts an (H, W, 3) uint8 array)"
        )


def _write_manifest(ids, prompts, seeds, folder: str | os.PathLike, manifest: str | os.PathLike) -> pl.DataFrame:
    relative = os.path.relpath(folder, Path(manifest).parent)
    frame = pl.DataFrame(
        {
            "image_id": np.asarray(ids, dtype=np.int64),
            "prompt": list(prompts),
            "file": [f"{relative}/{i:012d}.png" for i in ids],
            "seed": np.asarray(seeds, dtype=np.uint64),
        }
    )
    write_parquet(frame, manifest)
    return frame


def read_image_manifest(path: str | os.PathLike) -> tuple[np.ndarray, list[str]]:
    """(image ids, absolute image paths) of a manifest, checked.

    Raises
    ------
    DataFileError
        Naming the manifest and the record: a missing column, a null or a value of another type
        (``image_id`` an integer, ``file`` a string), a duplicate image id, a file that does not exist or
        that leaves the manifest's folder.
    """
    path = Path(path)
    frame = read_parquet(path, integer=["image_id"], text=["file"])
    ids = frame["image_id"].to_numpy()
    unique, counts = np.unique(ids, return_counts=True)
    if (counts > 1).any():
        raise DataFileError(f"{path}: image id {int(unique[counts > 1][0])} appears more than once")
    root = path.parent.resolve()
    paths = []
    for row, (image_id, file) in enumerate(zip(ids, frame["file"].to_list(), strict=True)):
        resolved = (root / file).resolve()
        if not resolved.is_relative_to(root):
            raise DataFileError(f"{path}: record {row} (image id {image_id}): file {file!r} leaves {root}")
        if not resolved.is_file():
            raise DataFileError(f"{path}: record {row} (image id {image_id}): file {file!r} does not exist")
        paths.append(str(resolved))
    return ids, paths
