"""CReL: conformal reliability in the latent space of a generative model.

The estimator and the polytope solver are imported lazily, so that the light modules of this
package (:mod:`condeval.crel.design`, :mod:`condeval.crel.paper`, the report tables) load
without torch.
"""

from __future__ import annotations

__all__ = [
    "CReL",
    "CReLSettings",
    "EmptyRegionError",
    "polytope_distance",
    "project_onto_region",
]

_HOMES = {
    "CReL": "condeval.crel.estimator",
    "CReLSettings": "condeval.crel.estimator",
    "EmptyRegionError": "condeval.crel.polytope",
    "polytope_distance": "condeval.crel.polytope",
    "project_onto_region": "condeval.crel.polytope",
}


def __getattr__(name: str):
    if name in _HOMES:
        import importlib

        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(list(globals()) + __all__)
