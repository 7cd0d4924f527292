"""Similarity metrics shared by the tracks: one copy of each formula.

CReL's CLIP-SIM and BERT-SIM are cosines between feature rows; the CLIPScore of the risk-control
track is ``w · max(cos, 0)`` of a CLIP image and text embedding. Text-to-image's CLIP-SIM on
images and the trust track's KID and realism belong here too.

Every function takes NumPy arrays or torch tensors and returns the same kind, so training losses
(torch, with gradients) and evaluation (NumPy) share the formula.
"""

from __future__ import annotations

import numpy as np

__all__ = ["CLIPSCORE_WEIGHT", "clipscore", "cosine_similarity", "unit_rows"]

#: CLIPScore's rescaling weight w (Hessel et al., 2021; Appendix A, Eq. 16 of the CLIPScore
#: risk-control paper).
CLIPSCORE_WEIGHT = 2.5

#: Floor of a row norm: a zero row has cosine 0 with everything rather than NaN.
_EPS = 1e-12


def _is_torch(*arrays) -> bool:
    return any(type(a).__module__.startswith("torch") for a in arrays)


def unit_rows(a, eps: float = _EPS):
    """Rows of ``a`` scaled to unit L2 norm (a zero row stays zero).

    Parameters
    ----------
    a : ndarray or Tensor, shape (..., d)
        Feature rows.
    eps : float, default 1e-12
        Floor of the norm.

    Returns
    -------
    ndarray or Tensor, shape (..., d)
        Same kind as ``a``; a NumPy result is float64.
    """
    if _is_torch(a):  # tensor methods only: the analysis environment has no torch to import
        return a / a.norm(dim=-1, keepdim=True).clamp_min(eps)
    a = np.asarray(a, dtype=np.float64)
    return a / np.maximum(np.linalg.norm(a, axis=-1, keepdims=True), eps)


def cosine_similarity(a, b, *, pairwise: bool = False, eps: float = _EPS):
    """Cosine similarity of feature rows.

    Parameters
    ----------
    a : ndarray or Tensor, shape (n, d)
        Feature rows.
    b : ndarray or Tensor, shape (n, d), or (m, d) with ``pairwise``
        Feature rows.
    pairwise : bool, default False
        False: the cosine of each row of ``a`` with the same row of ``b``, shape (n,).
        True: every row of ``a`` with every row of ``b``, shape (n, m).
    eps : float, default 1e-12
        Floor of a row norm (a zero row has cosine 0).

    Returns
    -------
    ndarray or Tensor
        A tensor if either input is one (gradients flow), else a float64 array.

    Raises
    ------
    ValueError
        If the rows differ in dimension, or without ``pairwise`` in number.
    """
    if a.shape[-1] != b.shape[-1] or (not pairwise and a.shape != b.shape):
        kind = "(n, d) and (m, d)" if pairwise else "the same shape"
        raise ValueError(f"cosine_similarity needs rows of {kind}; got {tuple(a.shape)} and {tuple(b.shape)}")
    if _is_torch(a, b):
        tensor = a if _is_torch(a) else b
        as_float64 = tensor.new_zeros(()).double()  # an array joins as float64, as torch.as_tensor reads it
        a, b = (x if _is_torch(x) else as_float64.new_tensor(np.asarray(x, dtype=np.float64)) for x in (a, b))
        dtype = (a.new_zeros(()) + b.new_zeros(())).dtype  # torch's type promotion
        a, b = unit_rows(a.to(dtype), eps), unit_rows(b.to(dtype), eps)
        return a @ b.T if pairwise else (a * b).sum(dim=-1)
    a, b = unit_rows(a, eps), unit_rows(b, eps)
    return a @ b.T if pairwise else np.einsum("nd,nd->n", a, b)


def clipscore(cos, weight: float = CLIPSCORE_WEIGHT):
    """CLIPScore ``w · max(cos, 0)`` of image-text cosines (Hessel et al., 2021).

    Parameters
    ----------
    cos : float, ndarray or Tensor
        Cosines between CLIP image and text embeddings (:func:`cosine_similarity`).
    weight : float, default 2.5
        The rescaling weight w.

    Returns
    -------
    float, ndarray or Tensor
        Same kind and shape as ``cos``.
    """
    if _is_torch(cos):
        return weight * cos.clamp_min(0.0)
    return weight * np.maximum(cos, 0.0)
