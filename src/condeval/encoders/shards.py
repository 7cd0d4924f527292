"""Feature shards: L2-normalised features with their provenance, read and written without torch.

A feature shard is a safetensors file holding ``features`` (n, d) float32 and ``ids`` (n,) int64,
whose metadata records the encoder's name, content hash, kind of input and preprocessing, so a
shard can always be traced to the exact weights that made it. The encoders that write them are in
:mod:`condeval.encoders.features`, which re-exports these names; analysis jobs that only read
shards import this module and skip torch's import (about a second a job).
"""

from __future__ import annotations

import json
import os
import struct
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file, save

from condeval.core.io import atomic_path, files_sha256, integer_array

__all__ = [
    "FeatureShardError",
    "model_identity",
    "write_feature_shard",
    "encode_feature_shard",
    "read_feature_shards",
    "check_one_encoder",
]


class FeatureShardError(ValueError):
    """A feature shard is unreadable, incomplete, non-finite, or made by another encoder (names the file)."""


def model_identity(path: str | os.PathLike) -> dict:
    """Name, revision (a hub snapshot's commit, if the folder is one) and weights hash of a saved model."""
    path = Path(path)
    weights = sorted(path.glob("*.safetensors")) or sorted(path.glob("*.bin"))
    if not weights:
        raise FileNotFoundError(f"{path}: no *.safetensors or *.bin weights file")
    config = json.loads((path / "config.json").read_text()) if (path / "config.json").exists() else {}
    revision = path.name if path.parent.name == "snapshots" else None
    return {
        "name": config.get("_name_or_path") or path.name,
        "path": str(path),
        "revision": revision,
        "weights_sha256": files_sha256(weights),
    }


def write_feature_shard(path: str | os.PathLike, ids: np.ndarray, features: np.ndarray, metadata: dict) -> None:
    """Write one shard atomically; ``metadata`` (JSON-serialisable) goes in the safetensors header.

    Raises
    ------
    TypeError
        ``ids`` that are not integers (:func:`condeval.core.io.integer_array`: 0.5 is refused rather
        than truncated onto id 0, a NaN rather than written as -2**63).
    ValueError
        Mismatched shapes, or non-finite features.
    """
    ids = integer_array(ids, f"{path}: ids")
    features = np.ascontiguousarray(features, dtype=np.float32)
    if features.ndim != 2 or ids.shape != (features.shape[0],):
        raise ValueError(f"{path}: need features (n, d) and ids (n,); got {features.shape} and {ids.shape}")
    if not np.isfinite(features).all():
        raise ValueError(f"{path}: features hold NaN or inf (row {int(np.argwhere(~np.isfinite(features))[0, 0])})")
    header = {key: json.dumps(value, sort_keys=True) for key, value in metadata.items()}
    payload = _sorted_metadata(save({"ids": ids, "features": features}, metadata=header))
    with atomic_path(path, suffix=".safetensors") as tmp:
        Path(tmp).write_bytes(payload)


def encode_feature_shard(
    path: str | os.PathLike, ids: np.ndarray, encode: Callable[[slice], np.ndarray], metadata: dict, chunk_size: int
) -> np.ndarray:
    """Features of ``ids`` computed chunk by chunk and written as one shard: a job killed midway resumes.

    Parameters
    ----------
    path : path-like
        The shard to write (:func:`write_feature_shard`).
    ids : ndarray (n,)
        The items' ids, in the order ``encode`` reads them.
    encode : callable
        ``encode(items)`` returns the features (len(items), d) of the items at the positions ``items``
        (a slice): e.g. ``lambda items: encoder.encode(images[items])``.
    metadata : dict
        The shard's provenance (encoder identity, input, preprocessing); it also fingerprints the
        chunks, so chunks of another encoder or input are never reused.
    chunk_size : int
        Items per chunk (:class:`condeval.core.chunks.ChunkedWork`): a multiple of the encoder's batch.

    Returns
    -------
    ndarray (n, d) float32
        What was written.
    """
    from condeval.core.chunks import ChunkedWork, digest

    ids = integer_array(ids, f"{path}: ids")
    finished = _finished_shard(Path(path), ids, metadata)
    if finished is not None:
        return finished
    fingerprint = {"metadata": metadata, "ids": digest(ids), "chunk_size": chunk_size}
    work = ChunkedWork(path, fingerprint, len(ids), chunk_size)

    def write_chunk(items: slice, folder: Path) -> None:
        np.save(folder / "features.npy", np.asarray(encode(items), dtype=np.float32))

    folders = work.run(write_chunk)
    chunks = [np.load(folder / "features.npy") for folder in folders] or [np.asarray(encode(slice(0, 0)), np.float32)]
    features = np.concatenate(chunks)
    write_feature_shard(path, ids, features, metadata)
    work.clear()
    return features


def _finished_shard(path: Path, ids: np.ndarray, metadata: dict) -> np.ndarray | None:
    """The features of a shard already written at ``path`` from the same ids and metadata (a job that
    writes several shards and was killed after some), else None."""
    if not path.is_file():
        return None
    try:
        meta, written_ids, features = _read_shard(path)
    except FeatureShardError:
        return None
    same = meta == json.loads(json.dumps(metadata, sort_keys=True)) and np.array_equal(written_ids, ids)
    return features if same else None


def _sorted_metadata(payload: bytes) -> bytes:
    """``payload`` with its header's ``__metadata__`` in key order, so the same shard is the same bytes.

    safetensors writes the metadata in its hash map's order, which changes with every process (three
    writes of one shard gave three files). The header stays compact JSON padded with spaces to 8
    bytes, as the format requires; the tensors' offsets count from the end of the header.
    """
    (length,) = struct.unpack("<Q", payload[:8])
    header = json.loads(payload[8 : 8 + length])
    header["__metadata__"] = dict(sorted(header.get("__metadata__", {}).items()))
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + payload[8 + length :]


def _read_shard(path: Path) -> tuple[dict, np.ndarray, np.ndarray]:
    """One shard's metadata, ids and features, each checked; :class:`FeatureShardError` names ``path``."""
    from safetensors import SafetensorError

    try:
        with safe_open(str(path), framework="numpy") as handle:
            meta = {k: json.loads(v) for k, v in (handle.metadata() or {}).items()}
        arrays = load_file(str(path))
    except FileNotFoundError:
        raise FeatureShardError(f"{path}: feature shard not found") from None
    except (SafetensorError, json.JSONDecodeError, OSError) as error:
        raise FeatureShardError(f"{path}: not a readable feature shard, truncated or corrupt ({error})") from None
    for key in ("ids", "features"):
        if key not in arrays:
            raise FeatureShardError(f"{path}: the shard has no '{key}' array (has {sorted(arrays)})")
    ids, features = arrays["ids"], arrays["features"]
    if features.ndim != 2 or ids.shape != (features.shape[0],):
        raise FeatureShardError(f"{path}: need features (n, d) and ids (n,); found {features.shape} and {ids.shape}")
    if ids.dtype.kind not in "iu":  # a float id of 1.5 must not join id 1
        raise FeatureShardError(f"{path}: ids must be integers; found dtype {ids.dtype}")
    if not np.isfinite(features).all():
        raise FeatureShardError(
            f"{path}: features hold NaN or inf (row {int(np.argwhere(~np.isfinite(features))[0, 0])})"
        )
    if not isinstance(meta.get("encoder"), dict) or not isinstance(meta["encoder"].get("weights_sha256"), str):
        raise FeatureShardError(
            f"{path}: the shard's metadata names no encoder weights hash ('encoder.weights_sha256')"
        )
    return meta, ids, features


def _expected_hash(encoder: str | os.PathLike | dict) -> str:
    """The weights hash of an encoder given as its identity or as a saved folder (or its manifest)."""
    if isinstance(encoder, dict):
        return encoder["weights_sha256"]
    from condeval.core.io import saved_folder

    return model_identity(saved_folder(encoder, verify=False))["weights_sha256"]


def read_feature_shards(
    paths: Sequence[str | os.PathLike], encoder: str | os.PathLike | dict | None = None, *, unique_ids: bool = True
) -> tuple[np.ndarray, np.ndarray, dict]:
    """Concatenate shards in order: ids (n,), features (n, d), and the first shard's metadata.

    Parameters
    ----------
    paths : sequence of path-like
        The shards, in order.
    encoder : path-like or dict, optional
        The encoder the reading rule uses (its saved folder, ``<folder>.sha256`` manifest, or
        :func:`model_identity`); every shard's ``encoder.weights_sha256`` must equal its hash.
    unique_ids : bool, default True
        Refuse an id given twice (one item, one row); False for shards that hold several blocks of
        the same items (a translator's features at each noise level), which the reader checks itself.

    Raises
    ------
    FeatureShardError
        Naming the shard: unreadable or truncated, no ``ids`` or ``features``, ids that are not
        integers, NaN or inf, no encoder hash, made by another encoder than the first shard or than
        ``encoder``, or of another width; naming the shards that hold one id twice.
    """
    if not paths:
        raise FeatureShardError("no feature shards given")
    expected = _expected_hash(encoder) if encoder is not None else None
    ids, features, first = [], [], None
    for path in map(Path, paths):
        meta, shard_ids, shard_features = _read_shard(path)
        made_by = meta["encoder"]["weights_sha256"]
        if expected is not None and made_by != expected:
            raise FeatureShardError(
                f"{path}: made by encoder weights {made_by[:12]}, but this rule uses {expected[:12]} ({encoder}); rerun the features"
            )
        if first is None:
            first = meta
        elif made_by != first["encoder"]["weights_sha256"]:
            raise FeatureShardError(
                f"{path}: made by another encoder than {paths[0]} ({meta['encoder']} vs {first['encoder']})"
            )
        if features and shard_features.shape[1] != features[0].shape[1]:
            raise FeatureShardError(
                f"{path}: feature width {shard_features.shape[1]} differs from {features[0].shape[1]}"
            )
        ids.append(shard_ids)
        features.append(shard_features)
    all_ids = np.concatenate(ids)
    values, counts = np.unique(all_ids, return_counts=True)
    if unique_ids and (counts > 1).any():
        repeated = values[counts > 1][0]
        holders = [str(path) for path, shard_ids in zip(paths, ids) if (shard_ids == repeated).any()]
        raise FeatureShardError(f"id {repeated} appears {counts[counts > 1][0]} times, in {', '.join(holders)}")
    return all_ids, np.concatenate(features), first


def check_one_encoder(metadata: dict[str, dict]) -> None:
    """Raise unless every named source's metadata (from :func:`read_feature_shards`) has one encoder.

    Image and caption features compared by a similarity must come from the same CLIP: features of
    two encoders live in unrelated spaces and their cosine means nothing.
    """
    hashes = {name: meta["encoder"]["weights_sha256"] for name, meta in metadata.items()}
    if len(set(hashes.values())) > 1:
        listing = ", ".join(f"{name}: {digest[:12]}" for name, digest in hashes.items())
        raise FeatureShardError(f"feature sources must come from one encoder, but their weights differ ({listing})")
