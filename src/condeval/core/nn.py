"""Small neural-network building blocks shared by every track's models."""

from __future__ import annotations

from typing import Sequence

from torch import nn

__all__ = ["mlp"]


def mlp(sizes: Sequence[int], negative_slope: float = 0.2) -> nn.Sequential:
    """Linear layers of the given sizes with LeakyReLU between them (none at the end).

    Parameters
    ----------
    sizes : sequence of int
        ``[in, h1, ..., out]``; at least two entries.
    negative_slope : float
        LeakyReLU slope.
    """
    if len(sizes) < 2:
        raise ValueError(f"an MLP needs at least input and output sizes, got {list(sizes)}")
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        if i > 0:
            layers.append(nn.LeakyReLU(negative_slope))
        layers.append(nn.Linear(fan_in, fan_out))
    return nn.Sequential(*layers)
