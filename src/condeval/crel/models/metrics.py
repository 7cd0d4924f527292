"""Per-sample reconstruction losses and the matching similarity metrics.

The CReL synthetic experiments train the latent generative model with a
reconstruction term ``L_rho`` derived from a similarity metric ``rho`` (higher
is better). Both are exposed here under one name so that the VAE loss and the
evaluation metric can never disagree:

============  =================================  ===========================
name          reconstruction loss ``L_rho``      similarity ``rho``
============  =================================  ===========================
``mse``       mean squared error over features   ``-mse``
``mae``       mean absolute error over features  ``-mae``
``cosine``    negative cosine similarity         cosine similarity
============  =================================  ===========================
"""

from __future__ import annotations

from collections.abc import Callable

from torch import Tensor

from condeval.metrics import cosine_similarity

__all__ = ["METRICS", "reconstruction_loss", "similarity"]

METRICS = ("mse", "mae", "cosine")

PairFunction = Callable[[Tensor, Tensor], Tensor]


def _flat(y_hat: Tensor, y: Tensor) -> tuple[Tensor, Tensor]:
    """Check that shapes match and flatten every sample to one row."""
    if y_hat.shape != y.shape:
        raise ValueError(f"shape mismatch: prediction {tuple(y_hat.shape)} vs target {tuple(y.shape)}")
    if y.ndim == 1:
        return y_hat.unsqueeze(1), y.unsqueeze(1)
    return y_hat.reshape(y.shape[0], -1), y.reshape(y.shape[0], -1)


def _mse(y_hat: Tensor, y: Tensor) -> Tensor:
    y_hat, y = _flat(y_hat, y)
    return (y_hat - y).pow(2).mean(dim=1)


def _mae(y_hat: Tensor, y: Tensor) -> Tensor:
    y_hat, y = _flat(y_hat, y)
    return (y_hat - y).abs().mean(dim=1)


def _cosine_similarity(y_hat: Tensor, y: Tensor) -> Tensor:
    return cosine_similarity(*_flat(y_hat, y))


def _negative_cosine(y_hat: Tensor, y: Tensor) -> Tensor:
    return -_cosine_similarity(y_hat, y)


_LOSSES: dict[str, PairFunction] = {"mse": _mse, "mae": _mae, "cosine": _negative_cosine}


def _check_name(name: str) -> str:
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r}; expected one of {METRICS}")
    return name


def reconstruction_loss(name: str) -> PairFunction:
    """Per-sample reconstruction loss ``L_rho`` (lower is better).

    Parameters
    ----------
    name : {"mse", "mae", "cosine"}
        Metric name.

    Returns
    -------
    callable
        ``loss(y_hat, y) -> Tensor`` of shape ``(n,)``; samples are the first
        axis and every other axis is treated as features.

    Raises
    ------
    ValueError
        If ``name`` is not in :data:`METRICS`.
    """
    return _LOSSES[_check_name(name)]


def similarity(name: str) -> PairFunction:
    """Per-sample similarity metric ``rho = -L_rho`` (higher is better).

    For ``"cosine"`` this is the cosine similarity itself.

    Parameters
    ----------
    name : {"mse", "mae", "cosine"}
        Metric name.

    Returns
    -------
    callable
        ``rho(y_hat, y) -> Tensor`` of shape ``(n,)``.

    Raises
    ------
    ValueError
        If ``name`` is not in :data:`METRICS`.
    """
    loss = reconstruction_loss(name)
    if name == "cosine":
        return _cosine_similarity

    def rho(y_hat: Tensor, y: Tensor) -> Tensor:
        return -loss(y_hat, y)

    rho.__name__ = f"neg_{name}"
    return rho
