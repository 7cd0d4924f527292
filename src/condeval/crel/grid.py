"""The one grid on which every method's Y-coverage and Y-area are counted.

Definition (used for CReL, Feldman, DQR and PCP alike)
------------------------------------------------------
A regular grid over the box ``[q_0.01 − pad, q_0.99 + pad]`` per output axis,
where the quantiles are those of the LGM-fold outputs (standardized units) and
``pad = 0.2``; it has ``m = round(n_points ** (1/d))`` points per axis
(``n_points = 2e4`` as in CReL, so 141 × 141 = 19,881 points for d = 2).

* The **area** of a set is the number of grid points that belong to it.
* A decoded latent region (CReL, DQR) owns the grid points that its decoded
  latent cells cover: each decoded latent grid point is the centre of a ball
  whose radius is half the diagonal of its decoded cell (at least half a Y-grid
  cell diagonal, so the grid cell holding the point is always owned); a union of
  balls (Feldman, PCP) owns the grid points within the radius of a centre.
* A response y is **covered in Y** when its nearest grid point belongs to the
  set (a y outside the box is not covered).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.spatial import cKDTree

__all__ = ["OutputGrid", "box_grid"]


@dataclass(frozen=True)
class OutputGrid:
    """Regular grid over an axis-aligned box in Y.

    Attributes
    ----------
    lower, upper : ndarray (d,)
        Box corners (first and last grid point per axis).
    points_per_axis : int
    """

    lower: np.ndarray
    upper: np.ndarray
    points_per_axis: int

    @classmethod
    def from_samples(
        cls, Y: np.ndarray, n_points: int = 20_000, quantiles=(0.01, 0.99), pad: float = 0.2
    ) -> OutputGrid:
        """Build the grid from training outputs (see module docstring); ``quantiles`` is [lower, upper]."""
        Y = np.asarray(Y, dtype=np.float64)
        low, high = quantiles
        if not 0 <= low < high <= 1:
            raise ValueError(f"quantiles must be [lower, upper] with 0 <= lower < upper <= 1; got {list(quantiles)}")
        lo, hi = np.quantile(Y, quantiles, axis=0)
        m = max(2, int(round(n_points ** (1.0 / Y.shape[1]))))
        return cls(lower=lo - pad, upper=hi + pad, points_per_axis=m)

    @property
    def dim(self) -> int:
        return int(np.asarray(self.lower).size)

    @property
    def size(self) -> int:
        return self.points_per_axis**self.dim

    @property
    def spacing(self) -> np.ndarray:
        return (np.asarray(self.upper) - np.asarray(self.lower)) / (self.points_per_axis - 1)

    @property
    def cell_volume(self) -> float:
        return float(np.prod(self.spacing))

    def axes(self) -> list[np.ndarray]:
        return [np.linspace(lo, hi, self.points_per_axis) for lo, hi in zip(self.lower, self.upper)]

    def points(self, flat_index: np.ndarray | None = None) -> np.ndarray:
        """Grid point coordinates, all (M, d) or those at ``flat_index``."""
        if flat_index is None:
            flat_index = np.arange(self.size)
        multi = np.unravel_index(np.asarray(flat_index), (self.points_per_axis,) * self.dim)
        return np.stack([np.asarray(self.lower)[j] + multi[j] * self.spacing[j] for j in range(self.dim)], axis=-1)

    def nearest_index(self, Y: np.ndarray) -> np.ndarray:
        """Flat index of each row's nearest grid point; −1 outside the box."""
        Y = np.atleast_2d(np.asarray(Y, dtype=np.float64))
        multi = np.rint((Y - self.lower) / self.spacing).astype(np.int64)
        inside = np.all((multi >= 0) & (multi < self.points_per_axis), axis=1)
        flat = np.full(Y.shape[0], -1, dtype=np.int64)
        if inside.any():
            flat[inside] = np.ravel_multi_index(tuple(multi[inside].T), (self.points_per_axis,) * self.dim)
        return flat

    def within(self, centres: np.ndarray, radius) -> np.ndarray:
        """Sorted flat indices of grid points within ``radius`` of any centre.

        ``radius`` is one number or one radius per centre.
        """
        centres = np.atleast_2d(np.asarray(centres, dtype=np.float64))
        radii = np.broadcast_to(np.asarray(radius, dtype=np.float64), (centres.shape[0],))
        keep = radii >= 0
        centres, radii = centres[keep], radii[keep]
        if centres.shape[0] == 0:
            return np.empty(0, dtype=np.int64)
        reach = radii.max()
        candidates = self._indices_in_box(centres.min(axis=0) - reach, centres.max(axis=0) + reach)
        if candidates.size == 0:
            return candidates
        tree = cKDTree(self.points(candidates))
        hits = tree.query_ball_point(centres, r=radii * (1 + 1e-12), return_sorted=False)
        found = np.unique(np.fromiter((j for hit in hits for j in hit), dtype=np.int64))
        return candidates[found]

    @property
    def half_diagonal(self) -> float:
        """Half the diagonal of a grid cell: every point is this close to its nearest grid point."""
        return float(0.5 * np.linalg.norm(self.spacing))

    def _indices_in_box(self, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        first = np.clip(np.ceil((lo - self.lower) / self.spacing), 0, self.points_per_axis).astype(int)
        last = np.clip(np.floor((hi - self.lower) / self.spacing), -1, self.points_per_axis - 1).astype(int)
        if np.any(last < first):
            return np.empty(0, dtype=np.int64)
        ranges = [np.arange(a, b + 1) for a, b in zip(first, last)]
        mesh = np.meshgrid(*ranges, indexing="ij")
        return np.ravel_multi_index(tuple(m.ravel() for m in mesh), (self.points_per_axis,) * self.dim)

    def covers(self, members: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """Whether each y's nearest grid point is in the sorted ``members`` index set."""
        flat = self.nearest_index(Y)
        return (flat >= 0) & np.isin(flat, members)

    def to_dict(self) -> dict:
        return {
            "lower": np.asarray(self.lower).tolist(),
            "upper": np.asarray(self.upper).tolist(),
            "points_per_axis": int(self.points_per_axis),
        }

    @classmethod
    def from_dict(cls, state: dict) -> OutputGrid:
        return cls(
            lower=np.asarray(state["lower"], dtype=np.float64),
            upper=np.asarray(state["upper"], dtype=np.float64),
            points_per_axis=int(state["points_per_axis"]),
        )


def box_grid(lower: np.ndarray, upper: np.ndarray, n_points: int) -> np.ndarray:
    """Regular grid of about ``n_points`` points (at least 2 per axis) in a box.

    Used to discretize a latent region before decoding it (CReL Appendix B.2).
    """
    lower = np.asarray(lower, dtype=np.float64)
    upper = np.asarray(upper, dtype=np.float64)
    m = max(2, int(np.floor(n_points ** (1.0 / lower.size) + 1e-9)))
    axes = [np.linspace(lo, hi, m) for lo, hi in zip(lower, upper)]
    return np.stack(np.meshgrid(*axes, indexing="ij"), axis=-1).reshape(-1, lower.size)
