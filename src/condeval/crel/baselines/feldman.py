"""Feldman et al. (2023): grid-based conformal calibration in the output space.

The latent DQR region R_Z(x) is discretized by a latent grid and decoded to
R_Y(x) = Dec(R_Z(x), x) (each decoded point carries the radius of its decoded
latent cell, see :class:`~condeval.crel.regions.RegionCloud`); the
non-conformity score of (x, y) is the distance from y to that decoded region,
and the calibrated set is its γ-enlargement. Unlike the public code, γ is the
conformal order statistic (no ``torch.quantile`` interpolation).
"""

from __future__ import annotations

import numpy as np

from condeval.core.conformal import conformal_quantile

__all__ = ["feldman_scores", "feldman_threshold"]


def feldman_scores(clouds, Y: np.ndarray) -> np.ndarray:
    """Scores of the calibration points: distance of y_i to its decoded region R_Y(x_i).

    Parameters
    ----------
    clouds : iterable of RegionCloud
        Decoded R_Y(x_i), in row order.
    Y : ndarray (n, d)
    """
    return np.array([c.distance(Y[c.index]) for c in clouds])


def feldman_threshold(scores: np.ndarray, alpha: float) -> float:
    """The calibrated radius γ: the conformal quantile of the scores."""
    return conformal_quantile(scores, alpha)
