"""Long per-item jobs written chunk by chunk, so that a killed job resumes where it stopped.

A generation or feature job of the paper config runs for hours on ~1,000 items. :class:`ChunkedWork`
splits its items at fixed positions into chunks and writes each, complete, into a scratch folder
beside the job's output (``.<output name>.chunks/chunk-00000/``, renamed into place when whole). A
rerun after a kill or a time limit finds the finished chunks and computes only the rest; at the end
the job builds its output from the chunks and removes the scratch folder.

The result is the same bytes as an uninterrupted run as long as an item's value depends only on the
item and the chunk layout (per-item seeds, batches that never straddle a chunk): the chunk size is a
multiple of the batch size, and every chunk, resumed or not, is computed by the same code. The
scratch folder records a fingerprint of what its chunks were computed from (model, seed, items,
settings); a different one discards them.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

from condeval.core.io import atomic_directory, atomic_path

__all__ = ["ChunkedWork", "chunk_slices", "scratch_folder", "digest", "source_signature", "chunk_items"]

log = logging.getLogger(__name__)
_FINGERPRINT = "fingerprint.json"
_ROWS = "rows.parquet"
#: Batches per chunk: what a kill can lose, against one small file written per chunk.
BATCHES_PER_CHUNK = 4


def chunk_items(batch_size: int) -> int:
    """The chunk size of a job that works ``batch_size`` items at a time (:data:`BATCHES_PER_CHUNK` batches)."""
    return BATCHES_PER_CHUNK * int(batch_size)


def scratch_folder(output: str | os.PathLike) -> Path:
    """Where the chunks of ``output`` wait: a hidden folder beside it, outside what Snakemake removes."""
    output = Path(output)
    return output.parent / f".{output.name}.chunks"


def digest(values) -> str:
    """SHA-256 of a JSON-able value or an array (its dtype, shape and bytes): items in a fingerprint."""
    import numpy as np

    if isinstance(values, np.ndarray):
        hashed = hashlib.sha256(f"{values.dtype}{values.shape}".encode())
        hashed.update(np.ascontiguousarray(values).tobytes())
        return hashed.hexdigest()
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()


def source_signature(path: str | os.PathLike) -> str:
    """What a chunk fingerprint records of an input: a file's SHA-256 (a saved folder's manifest), or a
    folder's files with their sizes and modification times (a hub checkpoint of tens of GB is not
    hashed at every job; a refetch or retrain changes its times)."""
    path = Path(path)
    if path.is_file():
        from condeval.core.io import files_sha256

        return files_sha256([path])
    files = sorted(p for p in path.rglob("*") if p.is_file())
    return digest([(str(p.relative_to(path)), p.stat().st_size, p.stat().st_mtime_ns) for p in files])


def chunk_slices(n_items: int, chunk_size: int) -> list[slice]:
    """The items ``0 .. n_items`` cut at multiples of ``chunk_size`` (the last chunk takes the rest)."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be at least 1; got {chunk_size}")
    return [slice(start, min(start + chunk_size, n_items)) for start in range(0, n_items, chunk_size)]


class ChunkedWork:
    """The resumable chunks of one job's output.

    Parameters
    ----------
    output : path-like
        The job's output (a file or a folder); the chunks wait beside it (:func:`scratch_folder`).
    fingerprint : mapping
        JSON-serialisable description of what the chunks are computed from: the model's identity, the
        seed, the items, the settings. Chunks of another fingerprint are discarded, never reused.
    n_items : int
        Items of the job.
    chunk_size : int
        Items per chunk: a multiple of the job's batch size, so no batch straddles two chunks.
    """

    def __init__(self, output: str | os.PathLike, fingerprint: Mapping, n_items: int, chunk_size: int):
        self.scratch = scratch_folder(output)
        self.slices = chunk_slices(n_items, chunk_size)
        self.fingerprint = json.loads(json.dumps(dict(fingerprint), sort_keys=True, default=str))
        self._adopt_or_reset()

    def _adopt_or_reset(self) -> None:
        recorded = self.scratch / _FINGERPRINT
        if recorded.is_file() and json.loads(recorded.read_text()) == self.fingerprint:
            return
        if self.scratch.exists():
            log.info("discarding the chunks in %s: computed from other inputs or settings", self.scratch)
            shutil.rmtree(self.scratch)
        self.scratch.mkdir(parents=True)
        with atomic_path(recorded) as tmp:
            tmp.write_text(json.dumps(self.fingerprint, sort_keys=True, indent=1))

    def folder(self, index: int) -> Path:
        """The folder chunk ``index`` is written to."""
        return self.scratch / f"chunk-{index:05d}"

    @property
    def done(self) -> list[int]:
        """The chunks already written whole."""
        return [index for index in range(len(self.slices)) if self.folder(index).is_dir()]

    def run(self, write_chunk: Callable[[slice, Path], None]) -> list[Path]:
        """Write every chunk not yet written: ``write_chunk(items, folder)`` fills a fresh folder that is
        renamed into place only once it returns. Returns every chunk's folder, in item order."""
        finished = set(self.done)
        if finished:
            log.info("resuming: %d of %d chunks already written in %s", len(finished), len(self.slices), self.scratch)
        for index, items in enumerate(self.slices):
            if index in finished:
                continue
            with atomic_directory(self.folder(index)) as tmp:
                write_chunk(items, tmp)
            log.info("chunk %d of %d written (items %d..%d)", index + 1, len(self.slices), items.start, items.stop - 1)
        return [self.folder(index) for index in range(len(self.slices))]

    def run_tables(self, table_of: Callable[[slice], object]):
        """:meth:`run` for work whose chunks are tables: ``table_of(items)`` gives the polars frame of the
        items at ``items``, written as the chunk's Parquet; returns every chunk's rows, concatenated."""
        import polars as pl

        from condeval.core.io import read_parquet, write_parquet

        folders = self.run(lambda items, folder: write_parquet(table_of(items), folder / _ROWS))
        tables = [read_parquet(folder / _ROWS) for folder in folders]
        return pl.concat(tables) if tables else table_of(slice(0, 0))

    def folders(self) -> Iterator[Path]:
        """Each chunk's folder in item order (after :meth:`run`)."""
        return (self.folder(index) for index in range(len(self.slices)))

    def clear(self) -> None:
        """Remove the scratch folder, once the output is built from it."""
        shutil.rmtree(self.scratch, ignore_errors=True)
