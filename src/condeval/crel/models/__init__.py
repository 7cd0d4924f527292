"""Latent generative models, the directional quantile regressor and their training.

:func:`load_lgm` and :func:`lgm_kind` are imported lazily so that importing a
submodule (e.g. :mod:`condeval.crel.models.vae`) does not pull in diffusers.
"""

from __future__ import annotations

__all__ = ["lgm_kind", "load_lgm", "LatentVAE", "LatentDDPM", "DirectionalQuantileRegressor"]

#: Where each name lives (read on first use, so that importing the package pulls in neither torch nor diffusers).
_HOMES = {
    "lgm_kind": "lgm",
    "load_lgm": "lgm",
    "LatentVAE": "vae",
    "LatentDDPM": "diffusion",
    "DirectionalQuantileRegressor": "dqr",
}


def __getattr__(name: str):
    if name in _HOMES:
        import importlib

        return getattr(importlib.import_module(f"condeval.crel.models.{_HOMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
