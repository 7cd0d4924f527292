"""Small neural-network building blocks shared by every track's models."""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

__all__ = ["mlp", "random_unit_vectors"]


def mlp(
    sizes: Sequence[int], negative_slope: float = 0.2, dropout: float = 0.0, batch_norm: bool = False
) -> nn.Sequential:
    """Linear layers of the given sizes with LeakyReLU between them (none at the end).

    Between two linear layers come, in order: batch normalisation (if ``batch_norm``), the
    LeakyReLU, and dropout (if ``dropout`` > 0), as CReL's image-to-text VAE uses them.

    Parameters
    ----------
    sizes : sequence of int
        ``[in, h1, ..., out]``; at least two entries.
    negative_slope : float
        LeakyReLU slope.
    dropout : float
        Dropout rate after each hidden activation.
    batch_norm : bool
        ``BatchNorm1d`` before each hidden activation (in eval mode it acts row-wise).
    """
    if len(sizes) < 2:
        raise ValueError(f"an MLP needs at least input and output sizes, got {list(sizes)}")
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        if i > 0:
            if batch_norm:
                layers.append(nn.BatchNorm1d(fan_in))
            layers.append(nn.LeakyReLU(negative_slope))
            if dropout > 0:
                layers.append(nn.Dropout(dropout))
        layers.append(nn.Linear(fan_in, fan_out))
    return nn.Sequential(*layers)


def random_unit_vectors(
    shape: Sequence[int], generator: torch.Generator, device=None, dtype: torch.dtype = torch.float64
) -> torch.Tensor:
    """Directions drawn uniformly on the unit sphere: normalised standard normal draws.

    Parameters
    ----------
    shape : sequence of int
        Leading shape, then the dimension ``r`` of the sphere's space (the last axis is normalised).
    generator : torch.Generator
        Private generator of the draws (the global RNG is untouched).
    device : torch.device, optional
        Where to draw (the generator's device).
    dtype : torch.dtype, default float64

    Returns
    -------
    Tensor of ``shape``
        Rows of unit L2 norm along the last axis.
    """
    draws = torch.randn(*shape, generator=generator, device=device, dtype=dtype)
    return nn.functional.normalize(draws, dim=-1, eps=1e-300)
