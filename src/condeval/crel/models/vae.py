"""Latent generative model (LGM): a VAE, or a conditional VAE, mapping Y to Z.

With ``cond_dim == 0`` this is a plain VAE with encoder ``q(z | y)`` and decoder
``p(y | z)``. With ``cond_dim > 0`` it is a CVAE (Sohn et al., 2015) with
``q(z | x, y)`` and ``p(y | x, z)``: the condition is concatenated to the input
of both networks.

Training minimises ``lambda * L_rho(y_hat, y) + beta * KL(q || N(0, I))`` with
``lambda = 1`` and ``L_rho`` the per-sample reconstruction loss of
:mod:`condeval.crel.models.metrics`, averaged over the batch.

Batches are tuples of tensors: ``(y,)`` for a VAE and ``(y, x)`` for a CVAE
(output first, condition second).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor
from torch.distributions import Normal, kl_divergence

from condeval.core.nn import CheckpointedModule, mlp
from condeval.crel.models.metrics import reconstruction_loss

__all__ = ["LatentVAE"]

DEFAULT_HIDDEN = (64, 128, 256, 256, 128, 64)


def _kl_standard_normal(mu: Tensor, logvar: Tensor) -> Tensor:
    """Per-sample ``KL(N(mu, diag(exp(logvar))) || N(0, I))``, shape ``(n,)``."""
    posterior = Normal(mu, torch.exp(0.5 * logvar))
    prior = Normal(torch.zeros_like(mu), torch.ones_like(mu))
    return kl_divergence(posterior, prior).sum(dim=1)


class LatentVAE(CheckpointedModule):
    """VAE / CVAE whose posterior mean serves as the latent code ``Z`` of ``Y``.

    Parameters
    ----------
    output_dim : int
        Dimension ``d`` of the outputs ``Y``.
    latent_dim : int
        Dimension ``r`` of the latent space.
    cond_dim : int
        Dimension ``p`` of the conditions ``X``; 0 gives a plain VAE.
    hidden_dims : sequence of int, optional
        Hidden widths, an even number of them: the first half is the encoder
        (``d -> 64 -> 128 -> 256 -> (mu, logvar)`` by default), the second half
        the decoder (``r -> 256 -> 128 -> 64 -> d``).
    beta : float
        Weight of the KL term.
    metric : {"mse", "mae", "cosine"}
        Reconstruction term ``L_rho``.
    dropout : float
        Dropout after each hidden activation (the paper: 0.1 on image-to-text).
    batch_norm : bool
        Batch normalisation in the hidden layers (the paper: on for image-to-text).
    """

    def __init__(
        self,
        output_dim: int,
        latent_dim: int = 2,
        cond_dim: int = 0,
        hidden_dims: Sequence[int] | None = None,
        beta: float = 1e-3,
        metric: str = "mse",
        dropout: float = 0.0,
        batch_norm: bool = False,
    ) -> None:
        super().__init__()
        hidden = list(DEFAULT_HIDDEN if hidden_dims is None else hidden_dims)
        if not hidden or len(hidden) % 2:
            raise ValueError(f"hidden_dims needs an even, non-zero number of widths, got {hidden}")
        if min(output_dim, latent_dim) < 1 or cond_dim < 0:
            raise ValueError(f"bad dimensions: output_dim={output_dim}, latent_dim={latent_dim}, cond_dim={cond_dim}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must lie in [0, 1), got {dropout}")
        self.save_hyperparameters(_hparams(output_dim, latent_dim, cond_dim, hidden, beta, metric, dropout, batch_norm))
        self._recon = reconstruction_loss(metric)
        half = len(hidden) // 2
        extras = dict(dropout=dropout, batch_norm=batch_norm)
        self.encoder = mlp([output_dim + cond_dim, *hidden[:half], 2 * latent_dim], **extras)
        self.decoder = mlp([latent_dim + cond_dim, *hidden[half:], output_dim], **extras)

    # ------------------------------------------------------------------ model
    @property
    def is_conditional(self) -> bool:
        """True for a CVAE (``cond_dim > 0``)."""
        return self.hparams.cond_dim > 0

    def _as_tensor(self, value: Tensor | np.ndarray) -> Tensor:
        return torch.as_tensor(value, dtype=self.dtype, device=self.device)

    def _with_condition(self, inputs: Tensor, x: Tensor | np.ndarray | None) -> Tensor:
        """Concatenate the condition to ``inputs`` (CVAE) or check it is absent (VAE)."""
        if not self.is_conditional:
            if x is not None:
                raise ValueError("this VAE is unconditional (cond_dim=0) but a condition x was given")
            return inputs
        if x is None:
            raise ValueError(f"this CVAE needs a condition x of dimension {self.hparams.cond_dim}")
        return torch.cat([inputs, self._as_tensor(x)], dim=1)

    def posterior(self, y: Tensor | np.ndarray, x: Tensor | np.ndarray | None = None) -> tuple[Tensor, Tensor]:
        """Mean and log-variance of ``q(z | y[, x])``, each ``(n, r)``."""
        stats = self.encoder(self._with_condition(self._as_tensor(y), x))
        mu, logvar = stats.chunk(2, dim=1)
        return mu, logvar

    def encode(self, y: Tensor | np.ndarray, x: Tensor | np.ndarray | None = None) -> Tensor:
        """Deterministic latent code: the posterior mean ``E[z | y[, x]]``, shape ``(n, r)``."""
        return self.posterior(y, x)[0]

    def decode(self, z: Tensor | np.ndarray, x: Tensor | np.ndarray | None = None) -> Tensor:
        """Decoder mean ``y_hat`` for latent codes ``z`` (and conditions ``x``), shape ``(n, d)``."""
        return self.decoder(self._with_condition(self._as_tensor(z), x))

    def forward(
        self, y: Tensor | np.ndarray, x: Tensor | np.ndarray | None = None, sample: bool = True
    ) -> tuple[Tensor, Tensor, Tensor]:
        """Reconstruct ``y``; returns ``(y_hat, mu, logvar)``.

        With ``sample=True`` the decoder sees a reparameterised draw from the
        posterior, otherwise its mean.
        """
        mu, logvar = self.posterior(y, x)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp() if sample else mu
        return self.decode(z, x), mu, logvar

    # --------------------------------------------------------------- training
    def _split_batch(self, batch: Sequence[Tensor]) -> tuple[Tensor, Tensor | None]:
        if self.is_conditional:
            if len(batch) < 2:
                raise ValueError("a CVAE batch must be (y, x)")
            return batch[0], batch[1]
        return batch[0], None

    def _losses(self, batch: Sequence[Tensor], sample: bool) -> dict[str, Tensor]:
        y, x = self._split_batch(batch)
        y_hat, mu, logvar = self(y, x, sample=sample)
        recon = self._recon(y_hat, y).mean()
        kl = _kl_standard_normal(mu, logvar).mean()
        return {"loss": recon + self.hparams.beta * kl, "recon": recon, "kl": kl}

    def training_step(self, batch: Sequence[Tensor], batch_idx: int) -> Tensor:
        losses = self._losses(batch, sample=True)
        self.log("train_loss", losses["loss"], on_step=False, on_epoch=True, prog_bar=True)
        return losses["loss"]

    def validation_step(self, batch: Sequence[Tensor], batch_idx: int) -> None:
        """Validation uses the posterior mean (no sampling) so ``val_loss`` is deterministic."""
        losses = self._losses(batch, sample=False)
        self.log("val_loss", losses["loss"], on_step=False, on_epoch=True, prog_bar=True)
        self.log("val_recon", losses["recon"], on_step=False, on_epoch=True)
        self.log("val_kl", losses["kl"], on_step=False, on_epoch=True)

    def configure_optimizers(self, lr: float) -> torch.optim.Optimizer:
        """Adam at ``lr`` (:class:`~condeval.core.settings.TrainSettings`' ``lr``, default :attr:`default_lr`)."""
        return torch.optim.Adam(self.parameters(), lr=lr)


def _hparams(output_dim, latent_dim, cond_dim, hidden, beta, metric, dropout=0.0, batch_norm=False) -> dict:
    """Hyperparameters as saved in checkpoints (plain Python types)."""
    return {
        "output_dim": int(output_dim),
        "latent_dim": int(latent_dim),
        "cond_dim": int(cond_dim),
        "hidden_dims": [int(h) for h in hidden],
        "beta": float(beta),
        "metric": str(metric),
        "dropout": float(dropout),
        "batch_norm": bool(batch_norm),
    }
