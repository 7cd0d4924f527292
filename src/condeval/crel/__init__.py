"""CReL: conformal reliability in the latent space of a generative model."""

from condeval.crel.estimator import CReL
from condeval.crel.polytope import EmptyRegionError, polytope_distance, project_onto_region

__all__ = ["CReL", "EmptyRegionError", "polytope_distance", "project_onto_region"]
