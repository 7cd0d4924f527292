"""Reading the processed fold table that every CReL step shares."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from condeval.core.io import DataFileError, check_finite, matrix_column_names, read_parquet

__all__ = ["Fold", "load_fold", "load_latents"]


@dataclass(frozen=True)
class Fold:
    """Rows of one fold: global row ids, conditions X (n, p) and outputs Y (n, d)."""

    rows: np.ndarray
    X: np.ndarray
    Y: np.ndarray

    def __len__(self) -> int:
        return self.rows.size

    def lgm_batch(self, conditional: bool) -> tuple[np.ndarray, ...]:
        """Training arrays of an LGM: ``(Y, X)`` for a conditional one, ``(Y,)`` otherwise."""
        return (self.Y, self.X) if conditional else (self.Y,)

    def head(self, n: int | None) -> Fold:
        return self if n is None else Fold(self.rows[:n], self.X[:n], self.Y[:n])


def load_fold(path, fold: str, val: bool | None = None) -> Fold:
    """Load one fold of ``processed.parquet``.

    Parameters
    ----------
    path : path-like
    fold : {"lgm", "dqr", "cal", "test"}
    val : bool or None
        Only the early-stopping rows (True), only the training rows (False), or all (None).
    """
    frame = read_parquet(path, columns=["row", "fold", "is_val"])
    frame = frame.filter(pl.col("fold") == fold)
    if val is not None:
        frame = frame.filter(pl.col("is_val") == val)
    if frame.height == 0:
        raise DataFileError(f"{path}: fold '{fold}' (val={val}) has no rows")
    X = frame.select(matrix_column_names(frame, "x", path)).to_numpy().astype(np.float64)
    Y = frame.select(matrix_column_names(frame, "y", path)).to_numpy().astype(np.float64)
    return Fold(frame["row"].to_numpy(), check_finite(X, "x*", path), check_finite(Y, "y*", path))


def load_latents(path, rows: np.ndarray) -> np.ndarray:
    """Latent codes z* of ``latents.parquet`` for the given global rows, in that order."""
    frame = read_parquet(path, columns=["row"])
    Z = frame.select(matrix_column_names(frame, "z", path)).to_numpy().astype(np.float64)
    position = np.full(int(frame["row"].max()) + 1, -1)
    position[frame["row"].to_numpy()] = np.arange(frame.height)
    picked = position[rows]
    if np.any(picked < 0):
        raise DataFileError(f"{path}: field 'row' lacks {int(rows[np.flatnonzero(picked < 0)[0]])}")
    return check_finite(Z[picked], "z*", path)
