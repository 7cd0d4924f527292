"""Generated samples per condition on disk, and drawing them from an attribute-conditioned pipeline.

The layout any generator's samples can be placed in, so that a lab scores its own model without
retraining anything here::

    <folder>/<condition>/<sample_id:07d>.png          RGB samples (CelebA)
    <folder>/<condition>/<sample_id:07d>_w<c>.png     one 8-bit grey PNG per channel c = 1..C, any C but 3
                                                      (RxRx1's site layout)
    <manifest>.parquet   sample_id (int64), one int64 column per attribute, file (str: the PNG, or the
                         ``_w1`` channel, relative to the manifest's folder), channels (int64), seed (uint64:
                         the seed of the sample's noise; 0 when unknown)

``<condition>`` is the attribute values joined by ``_``. :func:`read_samples` checks the columns, the
files and that none leaves the manifest's folder, naming the manifest and the record.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import polars as pl

from condeval.core.io import (
    DataFileError,
    atomic_directory,
    check_integer,
    image_batch,
    link_or_copy,
    read_image,
    read_parquet,
    saved_folder,
    write_parquet,
)
from condeval.trust.checks import attribute_names, attribute_rows

__all__ = [
    "SampleShard",
    "SamplingSettings",
    "write_samples",
    "read_samples",
    "sample_feature_files",
    "sample_seed",
    "generate_samples",
    "generate_sample_shard",
    "encode_sample_shard",
    "shard_conditions",
]


def sample_seed(seed: int, condition, index: int) -> int:
    """The noise seed of sample ``index`` of ``condition``: a function of those alone, so a sample
    does not depend on the shard or batch that draws it."""
    key = f"{seed}:{'_'.join(str(int(v)) for v in condition)}:{index}".encode()
    return int.from_bytes(hashlib.sha256(key).digest()[:8], "little") >> 1


def shard_conditions(conditions: np.ndarray, shard: int, shards: int) -> np.ndarray:
    """Rows of ``conditions`` that shard ``shard`` (0-based) of ``shards`` draws: every ``shards``-th one."""
    if not 0 <= shard < shards:
        raise ValueError(f"shard must be in 0..{shards - 1}; got {shard}")
    return np.asarray(conditions)[shard::shards]


@dataclass(frozen=True)
class SamplingSettings:
    """How each condition's samples are drawn: how many, in how many denoising steps, from which seed and
    in batches of how many. Together they decide the samples' bytes (:func:`sample_seed`), except
    ``batch_size``, which only decides memory.

    Parameters
    ----------
    per_condition : int >= 1
        Samples of each condition.
    num_inference_steps : int >= 1
        The sampler's denoising steps.
    seed : int
        With the condition and the sample's index, each sample's noise seed (:func:`sample_seed`).
    batch_size : int >= 1, default 128
        Samples per pipeline call.

    Examples
    --------
    >>> SamplingSettings(per_condition=4, num_inference_steps=250, seed=0).batch_size
    128
    >>> SamplingSettings(per_condition=0, num_inference_steps=250, seed=0)
    Traceback (most recent call last):
    ...
    ValueError: per_condition must be an integer >= 1; got 0
    """

    per_condition: int
    num_inference_steps: int
    seed: int
    batch_size: int = 128

    def __post_init__(self):
        for name in ("per_condition", "num_inference_steps", "batch_size"):
            check_integer(getattr(self, name), name, least=1)
        check_integer(self.seed, "seed")


@dataclass(frozen=True, eq=False)
class SampleShard:
    """The conditions one job draws, each with the ``sample_id`` its first sample takes, and the names of
    the attribute columns; checked on construction (one first id per condition).

    Parameters
    ----------
    conditions : array-like of int, shape (M, K)
        The shard's conditions (kept as int64).
    first_ids : sequence of int
        The first ``sample_id`` of each condition (its samples take the next ``per_condition`` ids).
    names : sequence of str
        The K attribute names.

    Examples
    --------
    >>> SampleShard([[0, 1], [1, 1]], [0, 8], ["a", "b"]).first_ids
    [0, 8]
    >>> SampleShard([[0, 1], [1, 1]], [0], ["a", "b"])
    Traceback (most recent call last):
    ...
    ValueError: one first id per condition: 2 conditions, 1 first ids
    """

    conditions: np.ndarray
    first_ids: list
    names: list

    def __post_init__(self):
        conditions, first_ids = np.asarray(self.conditions, dtype=np.int64), [int(first) for first in self.first_ids]
        if len(first_ids) != len(conditions):
            raise ValueError(f"one first id per condition: {len(conditions)} conditions, {len(first_ids)} first ids")
        object.__setattr__(self, "conditions", conditions)
        object.__setattr__(self, "first_ids", first_ids)
        object.__setattr__(self, "names", list(self.names))


def generate_samples(
    pipe, conditions, sampling: SamplingSettings, *, first_id: int = 0, callback=None, output_type: str = "np"
):
    """Draw ``sampling.per_condition`` samples of each condition through the pipeline's ``__call__``.

    Parameters
    ----------
    pipe : AttributeDiffusionPipeline
    conditions : array-like of int, shape (M, K)
    sampling : SamplingSettings
        How many samples of each condition, in how many steps, from which seed, in batches of how many.
    first_id : int
        The first ``sample_id``.
    callback : callable, optional
        The pipeline's ``callback_on_step_end`` for every batch (e.g. a
        :class:`~condeval.trust.translator.TrajectoryTap`, which then holds every batch's features).
    output_type : {"np", "latent"}
        ``"latent"`` stops before the decoder: the "images" are the final latents, float32.

    Returns
    -------
    tuple
        uint8 images (N, C, H, W), attributes (N, K) int64, seeds (N,) uint64, sample ids (N,) int64.
    """
    import torch

    from condeval.core.logs import progress

    per_condition, batch_size = sampling.per_condition, sampling.batch_size
    conditions = np.asarray(conditions, dtype=np.int64)
    attributes = np.repeat(conditions, per_condition, axis=0)
    seeds = np.array(
        [sample_seed(sampling.seed, c, i) for c in conditions for i in range(per_condition)], dtype=np.uint64
    )
    images = []
    for start in progress(range(0, len(attributes), batch_size), desc="samples", unit="batch"):
        rows = slice(start, start + batch_size)
        generators = [torch.Generator().manual_seed(int(s)) for s in seeds[rows]]
        drawn = pipe(
            attributes[rows],
            num_inference_steps=sampling.num_inference_steps,
            generator=generators,
            output_type=output_type,
            callback_on_step_end=callback,
        ).images
        if output_type == "latent":
            images.append(drawn.float().cpu().numpy())
        else:
            images.append(np.clip(np.rint(drawn * 255), 0, 255).astype(np.uint8).transpose(0, 3, 1, 2))
    ids = np.arange(first_id, first_id + len(attributes), dtype=np.int64)
    return np.concatenate(images), attributes, seeds, ids


def generate_sample_shard(
    pipe,
    shard: SampleShard,
    folder: str | os.PathLike,
    manifest: str | os.PathLike,
    sampling: SamplingSettings,
    *,
    chunk_size: int,
    fingerprint: dict,
) -> pl.DataFrame:
    """Draw a shard's samples a chunk of conditions at a time and save them as :func:`write_samples` does.

    Each chunk's PNGs and rows are written, complete, before the next chunk is drawn
    (:class:`condeval.core.chunks.ChunkedWork`): a job killed after hours keeps what it drew, its rerun
    draws the rest, and memory holds one chunk's samples. The result is the same bytes as one pass.

    Parameters
    ----------
    pipe : AttributeDiffusionPipeline
    shard : SampleShard
        The shard's conditions, the first ``sample_id`` of each and the attribute names.
    folder, manifest : path-like
        Where the samples and their manifest land.
    sampling : SamplingSettings
        As :func:`generate_samples` takes them.
    chunk_size : int
        Samples per chunk, rounded down to whole conditions (at least one).
    fingerprint : dict
        What the samples are drawn from (the generator's folder); chunks of another are discarded.
    """
    from condeval.core.chunks import ChunkedWork, digest

    conditions, first_ids, names = shard.conditions, shard.first_ids, shard.names
    settings = {
        "per_condition": sampling.per_condition,
        "seed": sampling.seed,
        "steps": sampling.num_inference_steps,
        "batch_size": sampling.batch_size,
    }
    drawn = {"conditions": digest(conditions), "first_ids": digest(np.asarray(first_ids)), "names": list(names)}
    per_chunk = max(1, chunk_size // sampling.per_condition)
    work = ChunkedWork(
        manifest, {**fingerprint, **settings, **drawn, "per_chunk": per_chunk}, len(conditions), per_chunk
    )

    def write_chunk(items: slice, tmp: Path) -> None:
        parts = [
            generate_samples(pipe, [condition], sampling, first_id=first)
            for condition, first in zip(conditions[items], first_ids[items], strict=True)
        ]
        images, attributes, seeds, ids = (np.concatenate([part[i] for part in parts]) for i in range(4))
        write_samples(images, attributes, names, seeds, ids, tmp / "samples", tmp / _CHUNK_ROWS)

    frame = _gather_chunks(work.run(write_chunk), names, Path(folder), Path(manifest))
    work.clear()
    return frame


def _gather_chunks(chunks, names, folder: Path, manifest: Path) -> pl.DataFrame:
    """The chunks' PNGs linked into ``folder`` (atomically) and their rows as one manifest, written."""
    relative = os.path.relpath(folder, manifest.parent)
    frames = [read_parquet(chunk / _CHUNK_ROWS) for chunk in chunks]
    with atomic_directory(folder) as tmp:
        for chunk in chunks:
            for png in sorted((chunk / "samples").rglob("*.png")):
                target = tmp / png.relative_to(chunk / "samples")
                target.parent.mkdir(exist_ok=True)
                link_or_copy(png, target)
    rows = pl.concat(frames)
    files = [f"{relative}/{file.removeprefix('samples/')}" for file in rows["file"]]
    attributes = rows.select(list(names)).to_numpy()
    frame = _manifest_frame(rows["sample_id"], attributes, names, files, rows["channels"], rows["seed"])
    write_parquet(frame, manifest)
    return frame


_CHUNK_ROWS = "manifest.parquet"


def encode_sample_shard(
    manifest: str | os.PathLike, names, encoders: dict, folder: str | os.PathLike, *, batch_size: int, chunk_size: int
) -> dict[str, tuple[int, int]]:
    """Features of one samples shard in every space it is scored in: ``<folder>/<extractor>.safetensors``.

    The samples' pixels are read a chunk at a time and each extractor's features are written chunk by
    chunk (:func:`condeval.encoders.shards.encode_feature_shard`): memory holds one chunk's images and
    one extractor, and a killed job resumes at its last chunk; the folder appears whole, at the end.

    Parameters
    ----------
    manifest : path-like
        The samples' manifest (:func:`read_samples`).
    names : sequence of str
        The attribute names.
    encoders : dict
        Extractor name → a callable returning its feature encoder (``encode(images, batch_size)``,
        ``identity``, ``feature``), called when that extractor's turn comes.
    folder : path-like
        The feature folder to write.
    batch_size, chunk_size : int
        Images per forward pass and per chunk.

    Returns
    -------
    dict
        Extractor name → the shape of its features.
    """
    import shutil

    from condeval.core.chunks import scratch_folder
    from condeval.encoders.shards import encode_feature_shard

    ids = read_parquet(manifest)["sample_id"].to_numpy()
    staging, shapes = scratch_folder(folder), {}
    for name, load in encoders.items():
        encoder = load()

        def encode(items: slice, encoder=encoder):
            wanted = ids[items]
            _, images = read_samples(manifest, names, keep=lambda sample_ids: np.isin(sample_ids, wanted))
            return encoder.encode(images, batch_size)

        metadata = {"encoder": encoder.identity, "samples": str(manifest), "feature": encoder.feature}
        shapes[name] = encode_feature_shard(staging / f"{name}.safetensors", ids, encode, metadata, chunk_size).shape
        del encoder
    with atomic_directory(folder) as tmp:
        for name in encoders:
            link_or_copy(staging / f"{name}.safetensors", tmp / f"{name}.safetensors")
    shutil.rmtree(staging)
    return shapes


def _condition_name(values) -> str:
    return "_".join(str(int(v)) for v in values)


def write_samples(
    images, attributes, names, seeds, sample_ids, folder: str | os.PathLike, manifest: str | os.PathLike
) -> pl.DataFrame:
    """Save uint8 ``images`` (N, C, H, W) under ``folder`` (atomically) and their manifest; returns it.

    ``folder`` must lie beside or below the manifest's folder. Everything is checked before a file is
    written (a refused call leaves no folder without its manifest):

    Raises
    ------
    TypeError, ValueError
        Naming the argument: images that are not uint8 (N, C, H, W) (an (N, H, W, C) array is named as
        such), attributes that are not integer (N, K) rows, ``names`` that are not K distinct names,
        ``seeds`` or ``sample_ids`` of another length or not non-negative integers, a repeated sample id,
        a ``folder`` outside the manifest's folder.
    """
    from PIL import Image

    images = image_batch(images)
    attributes = attribute_rows(attributes, len(images))
    names = attribute_names(names, attributes.shape[1])
    for name, values in (("seeds", seeds), ("sample_ids", sample_ids)):
        if values is None or isinstance(values, str):
            raise TypeError(f"{name} must be a sequence of non-negative integers, one per image; got {values!r}")
    if not len(seeds) == len(sample_ids) == len(images):
        raise ValueError(
            f"one seed and sample id per image: {len(images)} images, {len(seeds)} seeds, {len(sample_ids)} sample ids"
        )
    sample_ids = [check_integer(v, f"sample_ids[{row}]") for row, v in enumerate(sample_ids)]
    seeds = [check_integer(v, f"seeds[{row}]") for row, v in enumerate(seeds)]
    unique, counts = np.unique(sample_ids, return_counts=True)
    if (counts > 1).any():
        raise ValueError(f"sample_ids: sample id {int(unique[counts > 1][0])} appears more than once (one file per id)")
    folder, manifest = Path(folder), Path(manifest)
    relative = os.path.relpath(folder, manifest.parent)
    if relative == ".." or relative.startswith(".." + os.sep):
        raise ValueError(
            f"{folder}: the samples folder must lie beside or below the manifest's folder "
            f"({manifest.parent}); read_samples refuses a path that leaves it"
        )
    files = []
    with atomic_directory(folder) as tmp:
        for image, values, sample_id in zip(images, attributes, sample_ids, strict=True):
            stem = Path(_condition_name(values)) / f"{int(sample_id):07d}"
            (tmp / stem.parent).mkdir(exist_ok=True)
            if len(image) == 3:
                Image.fromarray(image.transpose(1, 2, 0), "RGB").save(tmp / f"{stem}.png")
                files.append(f"{relative}/{stem}.png")
                continue
            for c, channel in enumerate(image, start=1):
                Image.fromarray(channel, "L").save(tmp / f"{stem}_w{c}.png")
            files.append(f"{relative}/{stem}_w1.png")
    frame = _manifest_frame(sample_ids, attributes, names, files, np.full(len(images), images.shape[1]), seeds)
    write_parquet(frame, manifest)
    return frame


def _manifest_frame(sample_ids, attributes, names, files, channels, seeds) -> pl.DataFrame:
    """The manifest's columns built in one way, so that the same rows are the same Parquet bytes."""
    return pl.DataFrame(
        {"sample_id": np.asarray(sample_ids, dtype=np.int64)}
        | {name: np.asarray(attributes[:, k], dtype=np.int64) for k, name in enumerate(names)}
        | {
            "file": list(files),
            "channels": np.asarray(channels, dtype=np.int64),
            "seed": np.asarray(seeds, dtype=np.uint64),
        }
    )


def sample_feature_files(folders, extractor: str) -> list[Path]:
    """The ``<folder>/<extractor>.safetensors`` feature shard of each samples shard's feature folder.

    One job reads a shard's samples once and writes every space they are scored in (the workflow's
    ``trust_sample_features``), so its folder holds one file per extractor. A folder may be given by
    its manifest (``<folder>.sha256``, :func:`condeval.core.io.saved_folder`), whose hashes are checked.

    Raises
    ------
    DataFileError
        Naming the first folder without that extractor's file, or a manifest that does not match.
    """
    files = [saved_folder(folder) / f"{extractor}.safetensors" for folder in folders]
    for file in files:
        if not file.is_file():
            present = sorted(f.stem for f in file.parent.glob("*.safetensors")) if file.parent.is_dir() else []
            raise DataFileError(
                f"{file.parent}: no {extractor} features in this samples shard's folder (it holds {present})"
            )
    return files


def read_samples(manifest: str | os.PathLike, names, keep=None) -> tuple[pl.DataFrame, np.ndarray]:
    """(the manifest, uint8 images (N, C, H, W)) of a samples manifest, checked; ``keep``, a function of
    the manifest's ``sample_id`` array returning a boolean mask, reads only those records' pixels.

    Raises
    ------
    DataFileError
        Naming the manifest and the record: a missing column, a null or a value of another type (ids,
        attributes and channels are integers, ``file`` a string), a duplicate ``sample_id``, a file that
        is missing, leaves the manifest's folder or has another size or channel count than the first.
    """

    manifest, names = Path(manifest), attribute_names(names)
    frame = read_parquet(manifest, integer=["sample_id", *names, "channels"], text=["file"])
    duplicated = frame.filter(pl.col("sample_id").is_duplicated())
    if duplicated.height:
        raise DataFileError(f"{manifest}: sample_id {duplicated['sample_id'][0]} appears more than once")
    if keep is not None:
        frame = frame.filter(np.asarray(keep(frame["sample_id"].to_numpy()), dtype=bool))
    base = manifest.parent.resolve()
    images = []
    for record in frame.iter_rows(named=True):
        paths, rgb = _channel_paths(base, record, manifest), int(record["channels"]) == 3
        arrays = []
        for path in paths:
            arrays.append(np.asarray(read_image(path).convert("RGB" if rgb else "L")))
        pixels = arrays[0].transpose(2, 0, 1) if rgb else np.stack(arrays)
        if images and pixels.shape != images[0].shape:
            raise DataFileError(
                f"{manifest}: sample {record['sample_id']} is {pixels.shape}, the first {images[0].shape}"
            )
        images.append(pixels)
    return frame, (np.stack(images) if images else np.zeros((0, 3, 1, 1), np.uint8))


def _channel_paths(base: Path, record: dict, manifest: Path) -> list[Path]:
    first = (base / record["file"]).resolve()
    where = f"{manifest}: sample {record['sample_id']}"
    if not first.is_relative_to(base):
        raise DataFileError(f"{where}: file {record['file']!r} leaves the manifest's folder")
    channels = int(record["channels"])
    if channels == 3:
        paths = [first]
    elif first.name.endswith("_w1.png"):
        paths = [first.with_name(first.name.replace("_w1.png", f"_w{c}.png")) for c in range(1, channels + 1)]
    else:
        raise DataFileError(f"{where}: a {channels}-channel sample's file must be its _w1.png; got {record['file']!r}")
    absent = next((p for p in paths if not p.is_file()), None)
    if absent is not None:
        raise DataFileError(f"{where}: file {absent} is missing")
    return paths
