"""PCP (Wang et al., 2022): probabilistic conformal prediction from samples.

For a condition x, draw K samples ŷ_1..ŷ_K from a conditional generator. The
score of (x, y) is min_k ‖y − ŷ_k‖² (squared L2, as in the public code), and
the calibrated set is the union of balls of radius √q̂ around the samples.
Unlike the public code, q̂ is the conformal order statistic with the (n+1)
correction.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

from condeval.core.conformal import conformal_quantile
from condeval.crel.grid import OutputGrid

__all__ = ["draw_samples", "lgm_sampler", "pcp_scores", "pcp_threshold", "pcp_members"]


@torch.no_grad()
def draw_samples(
    sample: Callable[[torch.Tensor, int, torch.Generator], torch.Tensor],
    X: np.ndarray,
    n_samples: int,
    seed: int,
    chunk: int = 64,
) -> np.ndarray:
    """Draw ``n_samples`` outputs per condition from a generator.

    Parameters
    ----------
    sample : callable
        ``sample(x (m, p), n, generator) -> (m, n, d)`` torch tensor.
    X : ndarray (n, p)

    Returns
    -------
    ndarray (n, n_samples, d), float32
    """
    generator = torch.Generator().manual_seed(seed)
    parts = []
    for start in range(0, X.shape[0], chunk):
        x = torch.as_tensor(X[start : start + chunk], dtype=torch.float32)
        parts.append(sample(x, n_samples, generator).float().cpu().numpy())
    return np.concatenate(parts, axis=0)


def pcp_scores(samples: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """min_k ‖y_i − ŷ_ik‖² for samples (n, K, d) and responses (n, d)."""
    diff = samples.astype(np.float64) - np.asarray(Y, dtype=np.float64)[:, None, :]
    return np.min(np.einsum("nkd,nkd->nk", diff, diff), axis=1)


def pcp_threshold(scores: np.ndarray, alpha: float) -> float:
    """The conformal quantile q̂ of the squared-distance scores."""
    return conformal_quantile(scores, alpha)


def pcp_members(grid: OutputGrid, samples_i: np.ndarray, threshold: float) -> np.ndarray:
    """Grid points within √q̂ of one condition's samples."""
    return grid.within(samples_i.astype(np.float64), float(np.sqrt(threshold)))


def lgm_sampler(lgm) -> Callable[[torch.Tensor, int, torch.Generator], torch.Tensor]:
    """Sampler of a conditional latent model: z ~ N(0, I), ŷ = Dec(z, x)."""
    latent_dim = int(lgm.hparams.latent_dim)

    def sample(x: torch.Tensor, n: int, generator: torch.Generator) -> torch.Tensor:
        z = torch.randn(x.shape[0] * n, latent_dim, generator=generator)
        y = lgm.decode(z, x.repeat_interleave(n, dim=0))
        return y.reshape(x.shape[0], n, -1)

    return sample
