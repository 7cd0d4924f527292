"""Directional quantile regression (DQR) of a latent code Z given a condition X.

For a unit direction ``u`` in ``R^r`` the network ``f(x, u)`` estimates the
``tau``-quantile of the projection ``u^T Z`` given ``X = x``. It is trained with
the pinball (check) loss of level ``tau`` on the residual ``u^T z - f(x, u)``::

    zeta_tau(res) = tau * res          if res > 0
                    (tau - 1) * res    otherwise

whose minimiser is the conditional ``tau``-quantile, so ``P(u^T Z < f(x, u) | x)
~= tau`` and the half-space ``{z : u^T z >= f(x, u)}`` holds about ``1 - tau``
of the conditional mass. Intersecting these half-spaces over many directions
gives a convex region in latent space.

Directions
----------
A fixed set of ``n_directions`` unit vectors is drawn once from a generator
seeded with ``direction_seed`` (normalised Gaussians, i.e. uniform on the
sphere) and kept as a buffer, so it is saved in checkpoints. Its first ``2r``
rows are always the coordinate directions ``+e_1, -e_1, ..., +e_r, -e_r``: the
half-spaces for ``+-e_j`` bound every coordinate from both sides, so the region
built from any superset of them is contained in an exact axis-aligned bounding
box ``[f(x, e_j), -f(x, -e_j)]`` per coordinate (useful for grids and for
checking that the region is bounded). Each training step uses a fresh uniformly
random subset of ``directions_per_step`` of *all* the directions (a permutation
of the full set, not only of its first rows); validation uses all of them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor, nn

from condeval.core.nn import CheckpointedModule, mlp, random_unit_vectors

__all__ = ["DirectionalQuantileRegressor", "make_directions", "pinball_loss"]

DEFAULT_HIDDEN = (8, 16, 8)


def make_directions(latent_dim: int, n_directions: int, seed: int) -> Tensor:
    """Fixed unit directions: ``+-e_j`` first, then seeded uniform draws on the sphere.

    Parameters
    ----------
    latent_dim : int
        Dimension ``r``.
    n_directions : int
        Total number ``K >= 2r`` of directions.
    seed : int
        Seed of the private generator (the global RNG is untouched).

    Returns
    -------
    Tensor
        ``(K, r)`` float32, rows of unit norm.
    """
    if n_directions < 2 * latent_dim:
        raise ValueError(f"n_directions={n_directions} must be at least 2 * latent_dim = {2 * latent_dim}")
    eye = torch.eye(latent_dim)
    axes = torch.stack([eye, -eye], dim=1).reshape(2 * latent_dim, latent_dim)
    generator = torch.Generator().manual_seed(int(seed))
    draws = random_unit_vectors((n_directions - 2 * latent_dim, latent_dim), generator)
    return torch.cat([axes, draws.float()], dim=0)


def pinball_loss(residual: Tensor, tau: float) -> Tensor:
    """Mean pinball loss ``zeta_tau`` of residuals ``target - prediction``."""
    return torch.maximum(tau * residual, (tau - 1.0) * residual).mean()


STRUCTURES = ("center_offset", "plain")


class DirectionalQuantileRegressor(CheckpointedModule):
    """``f(x, u)``: the ``tau``-quantile of ``u^T Z`` given ``X = x``.

    Parameters
    ----------
    cond_dim : int
        Dimension ``p`` of the conditions.
    latent_dim : int
        Dimension ``r`` of the latent codes.
    quantile_level : float
        ``tau`` in (0, 1).
    hidden_dims : sequence of int, optional
        Hidden widths of the MLP on ``concat(x, u)``; default ``[8, 16, 8]``.
    n_directions : int
        Size ``K`` of the fixed direction set.
    directions_per_step : int
        Directions drawn (without replacement) for each training step; capped at ``K``.
    direction_seed : int
        Seed of the direction set.
    structure : {"center_offset", "plain"}
        ``"plain"`` is the paper's MLP f(x, u). ``"center_offset"`` (default) writes
        f(x, u) = uᵀc(x) − softplus(g(x, u)) with c an MLP on x and g the MLP on
        (x, u): every half-space then contains c(x), so R_Z(x) is never empty. The
        plain MLP lets opposite quantiles cross where Z | x is narrow, which empties
        regions (6 of 4,000 calibration points on the nonlinear synthetic data).

    Notes
    -----
    Batches are ``(x, z)`` pairs. The first linear layer is applied to
    ``x`` and ``u`` separately and summed (identical to a linear layer on the
    concatenation) so a batch of ``n`` points and ``m`` directions costs
    ``O(n + m)`` rather than ``O(n m)`` for that layer.
    """

    def __init__(
        self,
        cond_dim: int,
        latent_dim: int,
        quantile_level: float = 0.1,
        hidden_dims: Sequence[int] | None = None,
        n_directions: int = 2048,
        directions_per_step: int = 1024,
        direction_seed: int = 0,
        structure: str = "center_offset",
    ) -> None:
        super().__init__()
        hidden = [int(h) for h in (DEFAULT_HIDDEN if hidden_dims is None else hidden_dims)]
        if not 0.0 < quantile_level < 1.0:
            raise ValueError(f"quantile_level must lie in (0, 1), got {quantile_level}")
        if structure not in STRUCTURES:
            raise ValueError(f"structure must be one of {STRUCTURES}, got {structure!r}")
        if cond_dim < 0 or latent_dim < 1 or directions_per_step < 1:
            raise ValueError(
                f"bad sizes: cond_dim={cond_dim}, latent_dim={latent_dim}, directions_per_step={directions_per_step}"
            )
        self.save_hyperparameters(
            {
                "cond_dim": int(cond_dim),
                "latent_dim": int(latent_dim),
                "quantile_level": float(quantile_level),
                "hidden_dims": hidden,
                "n_directions": int(n_directions),
                "directions_per_step": int(directions_per_step),
                "direction_seed": int(direction_seed),
                "structure": structure,
            }
        )
        self.register_buffer("_directions", make_directions(latent_dim, n_directions, direction_seed))
        self.net = mlp([cond_dim + latent_dim, *hidden, 1])
        self.center = mlp([cond_dim, *hidden, latent_dim]) if structure == "center_offset" else None

    # ------------------------------------------------------------------ model
    @property
    def directions(self) -> Tensor:
        """The fixed ``(K, r)`` unit directions (``+-e_j`` in the first ``2r`` rows)."""
        return self._directions

    @property
    def tau(self) -> float:
        """Quantile level."""
        return self.hparams.quantile_level

    def _as_tensor(self, value: Tensor | np.ndarray) -> Tensor:
        return torch.as_tensor(value, dtype=self.dtype, device=self.device)

    def forward(self, x: Tensor, u: Tensor) -> Tensor:
        """``f(x_i, u_k)`` for every point and direction: ``(n, p), (m, r) -> (n, m)``."""
        first, rest = self.net[0], self.net[1:]
        p = self.hparams.cond_dim
        weight_x, weight_u = first.weight[:, :p], first.weight[:, p:]
        hidden_x = x @ weight_x.T + first.bias  # (n, h)
        hidden_u = u @ weight_u.T  # (m, h)
        hidden = hidden_x.unsqueeze(1) + hidden_u.unsqueeze(0)  # (n, m, h)
        out = rest(hidden).squeeze(-1)
        if self.center is None:
            return out
        return self.center(x) @ u.T - nn.functional.softplus(out)

    @torch.no_grad()
    def offsets(
        self,
        x: Tensor | np.ndarray,
        directions: Tensor | np.ndarray | None = None,
        batch_size: int = 256,
        direction_batch_size: int = 4096,
    ) -> Tensor:
        """``f(x_i, u_k)`` for all points and directions, in memory-bounded chunks.

        Parameters
        ----------
        x : (n, p) array or tensor
            Conditions.
        directions : (K, r) array or tensor, optional
            Unit directions; defaults to :attr:`directions`.
        batch_size : int
            Points per chunk.
        direction_batch_size : int
            Directions per chunk.

        Returns
        -------
        Tensor
            ``(n, K)`` float tensor on the CPU, without gradient.
        """
        x = self._as_tensor(x)
        u = self.directions if directions is None else self._as_tensor(directions)
        out = torch.empty(x.shape[0], u.shape[0], dtype=self.dtype)
        for i in range(0, x.shape[0], batch_size):
            for k in range(0, u.shape[0], direction_batch_size):
                block = self(x[i : i + batch_size], u[k : k + direction_batch_size])
                out[i : i + batch_size, k : k + direction_batch_size] = block.cpu()
        return out

    # --------------------------------------------------------------- training
    def sample_direction_indices(self) -> Tensor:
        """A fresh random subset of ``directions_per_step`` indices out of all ``K``.

        Uses the global torch RNG (seeded by the trainer), so runs are reproducible.
        """
        n_total = self.directions.shape[0]
        n_pick = min(self.hparams.directions_per_step, n_total)
        return torch.randperm(n_total, device=self.directions.device)[:n_pick]

    def _loss(self, x: Tensor, z: Tensor, u: Tensor) -> Tensor:
        residual = z @ u.T - self(x, u)  # (n, m): u_k^T z_i - f(x_i, u_k)
        return pinball_loss(residual, self.tau)

    def training_step(self, batch: Sequence[Tensor], batch_idx: int) -> Tensor:
        x, z = batch[0], batch[1]
        u = self.directions[self.sample_direction_indices()]
        loss = self._loss(x, z, u)
        self.log("train_loss", loss, on_step=False, on_epoch=True, prog_bar=True)
        return loss

    def validation_step(self, batch: Sequence[Tensor], batch_idx: int) -> None:
        x, z = batch[0], batch[1]
        loss = self._loss(x, z, self.directions)
        self.log("val_loss", loss, on_step=False, on_epoch=True, prog_bar=True)

    def configure_optimizers(self, lr: float) -> torch.optim.Optimizer:
        """Adam at ``lr`` (:class:`~condeval.core.settings.TrainSettings`' ``lr``, default :attr:`default_lr`)."""
        return torch.optim.Adam(self.parameters(), lr=lr)
