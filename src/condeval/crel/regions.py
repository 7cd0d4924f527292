"""Latent regions of CReL: membership, bounding boxes and decoded point clouds.

R_Z(x) = ∩_k {z : u_kᵀ z ≥ b_k(x)} is the DQR region and
S^γ(x) = {z : dist(z, R_Z(x)) ≤ γ} its calibrated enlargement (Eq. 4).
To measure a region in Y it is discretized by a latent grid over its bounding
box (Appendix B.2), the members are decoded, and the decoded cloud is counted
on the shared :class:`~condeval.crel.grid.OutputGrid`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
import torch

from condeval.crel.grid import box_grid
from condeval.crel.polytope import EmptyRegionError, polytope_distance

__all__ = [
    "axis_direction_rows",
    "latent_bounding_box",
    "max_violation",
    "in_region",
    "region_members",
    "regions_members",
    "RegionCloud",
    "decoded_cell_radii",
    "iter_region_clouds",
]


def axis_direction_rows(U: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``U`` equal to +e_j and −e_j for every axis j.

    The DQR direction set always contains the 2r coordinate directions, which
    makes the bounding box of every region exact and cheap.
    """
    U = np.asarray(U)
    r = U.shape[1]
    plus = np.argmax(U, axis=0)
    minus = np.argmin(U, axis=0)
    eye = np.eye(r)
    if not (np.allclose(U[plus], eye, atol=1e-9) and np.allclose(U[minus], -eye, atol=1e-9)):
        raise ValueError("the direction set must contain every coordinate direction ±e_j")
    return plus, minus


def latent_bounding_box(U: np.ndarray, b: np.ndarray, gamma: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """Axis-aligned box containing S^γ(x_i) for every row of ``b``.

    Returns
    -------
    lower, upper : ndarray (n, r)

    Raises
    ------
    EmptyRegionError
        If the coordinate half-spaces alone are already contradictory.
    """
    plus, minus = axis_direction_rows(U)
    b = np.atleast_2d(b)
    lower = b[:, plus]
    upper = -b[:, minus]
    empty = np.any(lower > upper, axis=1)
    if empty.any():
        index = int(np.flatnonzero(empty)[0])
        raise EmptyRegionError(
            f"region for row {index} (x index {index}) is empty: its coordinate half-spaces do not intersect",
            index=index,
        )
    return lower - gamma, upper + gamma


def max_violation(U: np.ndarray, b_row: np.ndarray, Z: np.ndarray) -> np.ndarray:
    """max_k (b_k − u_kᵀ z) for each z: ≤ 0 inside R_Z, and a lower bound on the distance outside."""
    return np.max(b_row[None, :] - Z @ U.T, axis=1)


def in_region(U: np.ndarray, b: np.ndarray, Z: np.ndarray, tol: float = 1e-9) -> np.ndarray:
    """Whether Z[i] lies in R_Z(x_i) (row-wise half-space check)."""
    return np.all(Z @ U.T >= b - tol, axis=1)


def region_members(U: np.ndarray, b_row: np.ndarray, Z: np.ndarray, gamma: float) -> np.ndarray:
    """Boolean mask of the points of Z inside S^γ for one region (see :func:`regions_members`)."""
    return regions_members(U, b_row[None, :], [Z], gamma)[0]


def regions_members(U: np.ndarray, b: np.ndarray, point_sets: list[np.ndarray], gamma: float) -> list[np.ndarray]:
    """Masks of the points of ``point_sets[i]`` inside S^γ(x_i), for several regions at once.

    Points inside every half-space are in; points that violate one half-space by
    more than γ are out (the violation bounds the distance from below); only the
    band in between needs the exact distance, solved for all regions in one batch.
    """
    masks, band_rows, band_points, band_slots = [], [], [], []
    for i, Z in enumerate(point_sets):
        violation = max_violation(U, b[i], Z)
        member = violation <= 0.0
        band = np.flatnonzero((~member) & (violation <= gamma)) if gamma > 0 else np.empty(0, int)
        masks.append(member)
        band_rows.append(np.full(band.size, i))
        band_points.append(Z[band])
        band_slots.append(band)
    rows = np.concatenate(band_rows)
    if rows.size:
        distance = polytope_distance(U, b[rows], np.vstack(band_points))
        inside = distance <= gamma
        start = 0
        for mask, slots in zip(masks, band_slots):
            mask[slots] = inside[start : start + slots.size]
            start += slots.size
    return masks


class RegionCloud:
    """A discretized latent region and its decoded image.

    Attributes
    ----------
    index : int
        Row of the condition.
    latent : ndarray (m, r)
        Latent grid points inside the region (plus one exact region point).
    decoded : ndarray (m, d)
        Their decoded outputs.
    radii : ndarray (m,)
        Half the diagonal of each point's decoded latent cell: the ball of this
        radius around ``decoded`` covers that cell's image, so the union of the
        balls rasterizes Dec(region) without holes however coarse the latent grid.
    """

    __slots__ = ("index", "latent", "decoded", "radii")

    def __init__(self, index: int, latent: np.ndarray, decoded: np.ndarray, radii: np.ndarray):
        self.index = index
        self.latent = latent
        self.decoded = decoded
        self.radii = radii

    def distance(self, y: np.ndarray) -> float:
        """Distance from ``y`` to the rasterized decoded region (0 inside a cell ball)."""
        return float(np.min(np.maximum(np.linalg.norm(self.decoded - y, axis=1) - self.radii, 0.0)))


def _anchor_points(U: np.ndarray, b: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
    """One exact point of each region: the projection of its box centre."""
    _, anchors = polytope_distance(U, b, 0.5 * (lower + upper), return_projection=True)
    return anchors


def decoded_cell_radii(decoded_grid: np.ndarray, points_per_axis: int) -> np.ndarray:
    """Half-diagonal of each decoded latent grid cell, from its decoded axis neighbours.

    Parameters
    ----------
    decoded_grid : ndarray (m**r, d)
        Decoded points of a regular latent grid in C order (as :func:`box_grid` makes it).
    points_per_axis : int
        m.
    """
    r = int(round(np.log(decoded_grid.shape[0]) / np.log(points_per_axis)))
    cube = decoded_grid.reshape((points_per_axis,) * r + (decoded_grid.shape[1],))
    squared = np.zeros((points_per_axis,) * r)
    for axis in range(r):
        step = np.linalg.norm(np.diff(cube, axis=axis), axis=-1)
        pad_lo = [(0, 0)] * r
        pad_hi = [(0, 0)] * r
        pad_lo[axis] = (1, 0)
        pad_hi[axis] = (0, 1)
        neighbour = np.maximum(np.pad(step, pad_lo), np.pad(step, pad_hi))
        squared += neighbour**2
    return 0.5 * np.sqrt(squared).ravel()


def iter_region_clouds(
    U: np.ndarray,
    b: np.ndarray,
    gamma: float,
    decode: Callable[[torch.Tensor, torch.Tensor | None], torch.Tensor],
    X: np.ndarray | None,
    n_latent: int,
    chunk: int = 32,
) -> Iterator[RegionCloud]:
    """Yield the decoded latent cloud of S^γ(x_i) for every row i of ``b``.

    Parameters
    ----------
    U : ndarray (K, r)
        Directions (must contain ±e_j).
    b : ndarray (n, K)
        DQR offsets f(x_i, u_k).
    gamma : float
        Enlargement (0 for R_Z itself).
    decode : callable
        ``decode(z, x) -> y`` in torch; ``x`` is passed for conditional decoders.
    X : ndarray (n, p) or None
        Conditions handed to ``decode``.
    n_latent : int
        Latent grid points per region box (the whole box is decoded, so that every
        member's decoded cell size is known).
    chunk : int
        Regions decoded per decoder call.
    """
    lower, upper = latent_bounding_box(U, b, gamma)
    anchors = _anchor_points(U, b, lower + gamma, upper - gamma)
    for start in range(0, b.shape[0], chunk):
        rows = range(start, min(start + chunk, b.shape[0]))
        grids = [np.vstack([anchors[i][None, :], box_grid(lower[i], upper[i], n_latent)]) for i in rows]
        decoded = _decode_many(decode, grids, None if X is None else X[start : rows.stop])
        masks = regions_members(U, b[start : rows.stop], [g[1:] for g in grids], gamma)
        for i, grid, cloud, mask in zip(rows, grids, decoded, masks):
            members = np.concatenate([[True], mask])
            m = int(round((grid.shape[0] - 1) ** (1.0 / grid.shape[1])))
            radii = np.concatenate([[0.0], decoded_cell_radii(cloud[1:], m)])
            yield RegionCloud(i, grid[members], cloud[members], radii[members])


@torch.no_grad()
def _decode_many(decode, latents: list[np.ndarray], X: np.ndarray | None) -> list[np.ndarray]:
    sizes = [z.shape[0] for z in latents]
    z = torch.as_tensor(np.vstack(latents), dtype=torch.float32)
    x = None if X is None else torch.as_tensor(np.repeat(X, sizes, axis=0), dtype=torch.float32)
    y = decode(z, x).double().cpu().numpy()
    return np.split(y, np.cumsum(sizes)[:-1])
