"""Training rows that live on disk: a dataset too large for memory, read a batch at a time.

A generator of the paper config trains on ~100,000 images whose fixed per-image inputs (autoencoder
latents, REPA's target tokens) would take hundreds of GB in memory. They are computed once, chunk by
chunk (:class:`condeval.core.chunks.ChunkedWork`), into ``.npy`` files, one per array and chunk.
:class:`RowShards` reads them back row by row with plain file reads (``os.pread``, not a memory map,
whose touched pages would count in the job's resident memory until it held the whole dataset), so a
``DataLoader`` over it holds a batch, whatever the dataset's size.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

__all__ = ["RowShards", "NpyRows", "ArrayRows", "RowSubset", "save_rows"]


def save_rows(path: str | os.PathLike, array) -> None:
    """Write ``array`` as a C-ordered ``.npy`` file that :class:`NpyRows` reads a row at a time (a Fortran-ordered
    array, as polars' ``to_numpy`` gives, would be saved column-major)."""
    np.save(path, np.ascontiguousarray(array))


class NpyRows:
    """One ``.npy`` file read a row (along its first axis) at a time, without a memory map.

    Parameters
    ----------
    path : path-like
        A C-ordered ``.npy`` array of a fixed-size dtype.
    """

    def __init__(self, path: str | os.PathLike):
        self.path = str(path)
        with open(self.path, "rb") as handle:
            major, _ = np.lib.format.read_magic(handle)
            read_header = np.lib.format.read_array_header_1_0 if major == 1 else np.lib.format.read_array_header_2_0
            shape, fortran, dtype = read_header(handle)
            self.offset = handle.tell()
        if fortran or dtype.hasobject:
            raise ValueError(f"{self.path}: rows are read from C-ordered arrays of plain numbers")
        self.shape, self.dtype = tuple(shape), dtype
        self.row_shape = self.shape[1:]
        self.row_bytes = int(np.prod(self.row_shape, dtype=np.int64)) * dtype.itemsize
        self._fd = None

    def __len__(self) -> int:
        return self.shape[0]

    def __getstate__(self) -> dict:  # a DataLoader worker opens its own descriptor
        return {**self.__dict__, "_fd": None}

    def row(self, index: int) -> np.ndarray:
        """Row ``index``, read from the file."""
        if self._fd is None:
            self._fd = os.open(self.path, os.O_RDONLY)
        data = os.pread(self._fd, self.row_bytes, self.offset + index * self.row_bytes)
        if len(data) != self.row_bytes:
            raise OSError(f"{self.path}: row {index} is cut short ({len(data)} of {self.row_bytes} bytes)")
        return np.frombuffer(data, dtype=self.dtype).reshape(self.row_shape)

    def __del__(self):
        if getattr(self, "_fd", None) is not None:
            os.close(self._fd)


class RowShards(torch.utils.data.Dataset):
    """Rows of named arrays stored chunk by chunk, ``<folder>/<name>.npy`` per chunk folder, in order.

    Item ``i`` is the tuple of row ``i`` of each named array, floats as float32 (a float16 array is
    stored at half the size) and integers as int64, as the in-memory training rows are.

    Parameters
    ----------
    folders : sequence of path-like
        The chunk folders, in row order.
    names : sequence of str
        The arrays of a row, in the order a batch holds them.
    start, stop : int, optional
        A window of the rows (e.g. the first rows validate, the rest train).
    """

    def __init__(
        self, folders: Sequence[str | os.PathLike], names: Sequence[str], start: int = 0, stop: int | None = None
    ):
        self.folders, self.names = [Path(folder) for folder in folders], tuple(names)
        self._files = [[NpyRows(folder / f"{name}.npy") for name in self.names] for folder in self.folders]
        lengths = [len(files[0]) for files in self._files]
        for folder, files in zip(self.folders, self._files, strict=True):
            if len({len(file) for file in files}) != 1:
                raise ValueError(f"{folder}: its arrays {self.names} hold different numbers of rows")
        self._ends = np.cumsum(lengths)
        total = int(self._ends[-1]) if lengths else 0
        self.start, self.stop = start, total if stop is None else min(stop, total)
        if not 0 <= self.start <= self.stop:
            raise ValueError(f"rows {start}..{stop} lie outside the {total} rows stored")

    def window(self, start: int, stop: int | None = None) -> RowShards:
        """The rows ``start .. stop`` of this window, as a dataset."""
        stop = self.stop - self.start if stop is None else stop
        return RowShards(self.folders, self.names, self.start + start, self.start + stop)

    def __len__(self) -> int:
        return self.stop - self.start

    def __getitem__(self, index: int) -> tuple:
        if not 0 <= index < len(self):
            raise IndexError(index)
        row = self.start + index
        chunk = int(np.searchsorted(self._ends, row, side="right"))
        within = row - (int(self._ends[chunk - 1]) if chunk else 0)
        return tuple(_batch_dtype(file.row(within)) for file in self._files[chunk])

    @property
    def identity(self) -> str:
        """What a training run's rows are: the stored files (names, sizes, times) and the window."""
        digest = hashlib.sha256(f"{self.names}{self.start}:{self.stop}".encode())
        for folder in self.folders:
            for name in self.names:
                stat = (folder / f"{name}.npy").stat()
                digest.update(f"{folder.name}/{name}{stat.st_size}{stat.st_mtime_ns}".encode())
        return digest.hexdigest()


def _batch_dtype(row: np.ndarray) -> np.ndarray:
    if np.issubdtype(row.dtype, np.integer) or row.dtype == bool:
        return row.astype(np.int64)
    return row.astype(np.float32)


class ArrayRows(torch.utils.data.Dataset):
    """Rows of in-memory arrays as a dataset (floats as float32, integers as int64), identified by their bytes:
    the same training code reads them and :class:`RowShards`."""

    def __init__(self, *arrays: np.ndarray):
        self.arrays = tuple(np.asarray(array) for array in arrays)
        if len({len(array) for array in self.arrays}) != 1:
            raise ValueError(
                f"arrays of one split must have the same number of rows, got {[len(a) for a in self.arrays]}"
            )

    def __len__(self) -> int:
        return len(self.arrays[0])

    def __getitem__(self, index: int) -> tuple:
        return tuple(_batch_dtype(array[index]) for array in self.arrays)

    @property
    def identity(self) -> str:
        from condeval.core.chunks import digest

        return digest([digest(np.ascontiguousarray(array)) for array in self.arrays])


class RowSubset(torch.utils.data.Dataset):
    """The rows of ``rows`` (any dataset with an ``identity``) at ``indices``, in that order."""

    def __init__(self, rows, indices: Sequence[int]):
        self.rows, self.indices = rows, np.asarray(indices, dtype=np.int64)

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, index: int) -> tuple:
        return self.rows[int(self.indices[index])]

    @property
    def identity(self) -> str:
        from condeval.core.chunks import digest

        return digest([self.rows.identity, digest(self.indices)])
