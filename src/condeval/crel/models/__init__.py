"""Latent generative models, the directional quantile regressor and their training.

:func:`load_lgm` and :func:`lgm_kind` are imported lazily so that importing a
submodule (e.g. :mod:`condeval.crel.models.vae`) does not pull in diffusers.
"""

from __future__ import annotations

__all__ = ["lgm_kind", "load_lgm"]


def __getattr__(name: str):
    if name in __all__:
        from condeval.crel.models import lgm

        return getattr(lgm, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
