"""Feldman et al. (2023): grid-based conformal calibration in the output space.

The latent DQR region R_Z(x) is discretized by a latent grid, decoded to a
cloud R_Y(x) = Dec(R_Z(x), x), and the non-conformity score of (x, y) is the
distance from y to the nearest decoded point. The calibrated set is the union
of balls of radius γ around the cloud. Unlike the public code, γ is the
conformal order statistic (no ``torch.quantile`` interpolation).
"""

from __future__ import annotations

import numpy as np
from scipy.spatial import cKDTree

from condeval.conformal import conformal_quantile
from condeval.grid import OutputGrid

__all__ = ["cloud_distance", "feldman_scores", "feldman_threshold", "feldman_members"]


def cloud_distance(cloud: np.ndarray, y: np.ndarray) -> float:
    """Euclidean distance from ``y`` (d,) to the nearest point of ``cloud`` (m, d)."""
    distance, _ = cKDTree(cloud).query(np.asarray(y)[None, :], k=1)
    return float(distance[0])


def feldman_scores(clouds, Y: np.ndarray) -> np.ndarray:
    """Scores of the calibration points: distance of y_i to its decoded region cloud.

    Parameters
    ----------
    clouds : iterable of RegionCloud
        Decoded R_Y(x_i), in row order.
    Y : ndarray (n, d)
    """
    return np.array([cloud_distance(c.decoded, Y[c.index]) for c in clouds])


def feldman_threshold(scores: np.ndarray, alpha: float) -> float:
    """The calibrated radius γ: the conformal quantile of the scores."""
    return conformal_quantile(scores, alpha)


def feldman_members(grid: OutputGrid, cloud: np.ndarray, radius: float) -> np.ndarray:
    """Grid points of the calibrated set: within ``radius`` of the decoded cloud."""
    return grid.within(cloud, radius)
