"""Similarity metrics shared by the tracks: one copy of each formula.

CReL's CLIP-SIM and BERT-SIM are cosines between feature rows; the CLIPScore of the risk-control
track is ``w · max(cos, 0)`` of a CLIP image and text embedding. Text-to-image's CLIP-SIM on
images and the trust track's KID and realism belong here too.

Every function takes NumPy arrays or torch tensors and returns the same kind, so training losses
(torch, with gradients) and evaluation (NumPy) share the formula.
"""

from __future__ import annotations

import logging

import numpy as np

from condeval.core.io import as_numpy, check_integer
from condeval.core.io import is_torch as _is_torch

__all__ = [
    "as_numpy",
    "CLIPSCORE_WEIGHT",
    "KID_KERNELS",
    "clipscore",
    "cosine_similarity",
    "kid",
    "polynomial_mmd2",
    "unit_rows",
]

log = logging.getLogger(__name__)

#: KID's cubic kernels: ``"cosine"`` is (x·y + 1)³ on L2-normalised rows (the trust score's official
#: code); ``"standard"`` is (x·y/d + 1)³ on the rows as given (torchmetrics' and torch-fidelity's default).
KID_KERNELS = ("cosine", "standard")

#: CLIPScore's rescaling weight w (Hessel et al., 2021; Appendix A, Eq. 16 of the CLIPScore
#: risk-control paper).
CLIPSCORE_WEIGHT = 2.5

#: Floor of a row norm: a zero row has cosine 0 with everything rather than NaN.
_EPS = 1e-12


def unit_rows(a, eps: float = _EPS, dtype=np.float64):
    """Rows of ``a`` scaled to unit L2 norm (a zero row stays zero).

    Parameters
    ----------
    a : ndarray or Tensor, shape (..., d)
        Feature rows.
    eps : float, default 1e-12
        Floor of the norm.
    dtype : numpy dtype, default float64
        Of a NumPy result (float32 halves the memory and time of large scoring products).

    Returns
    -------
    ndarray or Tensor, shape (..., d)
        Same kind as ``a``; a NumPy result has ``dtype``.

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.metrics import unit_rows
    >>> unit_rows(np.array([[3.0, 4.0], [0.0, 0.0]])).tolist()    # a zero row stays zero, not NaN
    [[0.6, 0.8], [0.0, 0.0]]
    """
    if _is_torch(a):  # tensor methods only: the analysis environment has no torch to import
        return a / a.norm(dim=-1, keepdim=True).clamp_min(eps)
    a = np.asarray(a, dtype=dtype)
    norms = np.sqrt(np.einsum("...d,...d->...", a, a))[..., None]
    return a / np.maximum(norms, eps).astype(dtype)


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

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.metrics import cosine_similarity
    >>> a, b = np.array([[1.0, 0.0], [1.0, 1.0]]), np.array([[2.0, 0.0], [0.0, 1.0]])
    >>> cosine_similarity(a, b).round(3).tolist()                  # row i of a with row i of b
    [1.0, 0.707]
    >>> cosine_similarity(a, b, pairwise=True).round(3).tolist()   # every row with every row
    [[1.0, 0.0], [0.707, 0.707]]
    >>> cosine_similarity(a, b[:1])
    Traceback (most recent call last):
    ...
    ValueError: cosine_similarity needs rows of the same shape; got (2, 2) and (1, 2)
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

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.metrics import clipscore
    >>> clipscore(np.array([0.3, -0.1])).tolist()                 # a negative cosine scores 0
    [0.75, 0.0]
    """
    if _is_torch(cos):
        return weight * cos.clamp_min(0.0)
    return weight * np.maximum(cos, 0.0)


def polynomial_mmd2(x: np.ndarray, y: np.ndarray, kernel: str = "cosine") -> float:
    """The unbiased MMD² of two equal-size samples under KID's cubic polynomial kernel.

    Within-sample terms leave out the diagonal (m(m − 1) pairs); the cross term averages all m² pairs.

    Parameters
    ----------
    x, y : ndarray, shape (m, d)
        Feature rows, as many in each.
    kernel : {"cosine", "standard"}
        See :data:`KID_KERNELS`.

    Returns
    -------
    float

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.metrics import polynomial_mmd2
    >>> rng = np.random.default_rng(0)
    >>> x, y, shifted = rng.normal(0, 1, (200, 8)), rng.normal(0, 1, (200, 8)), rng.normal(0.5, 1, (200, 8))
    >>> round(polynomial_mmd2(x, y), 3), round(polynomial_mmd2(x, shifted), 3)   # same law: about 0 (unbiased)
    (-0.022, 0.905)
    """
    x, y = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if x.shape != y.shape or x.ndim != 2 or len(x) < 2:
        raise ValueError(f"polynomial_mmd2 needs two (m, d) samples with m >= 2; got {x.shape} and {y.shape}")
    if kernel not in KID_KERNELS:
        raise ValueError(f"kernel must be one of {KID_KERNELS}; got {kernel!r}")
    if kernel == "cosine":
        x, y, gamma = unit_rows(x), unit_rows(y), 1.0
    else:
        gamma = 1.0 / x.shape[1]
    m = len(x)
    k_xx, k_yy, k_xy = ((gamma * a @ b.T + 1.0) ** 3 for a, b in ((x, x), (y, y), (x, y)))
    within = (k_xx.sum() - np.trace(k_xx) + k_yy.sum() - np.trace(k_yy)) / (m * (m - 1))
    return float(within - 2.0 * k_xy.mean())


def kid(
    x, y, subset_size: int = 500, n_subsets: int = 10, seed: int = 0, kernel: str = "cosine"
) -> tuple[float, float]:
    """Kernel Inception Distance: the unbiased MMD² over random subsets, their mean and standard deviation.

    Each subset draws ``min(subset_size, len(x), len(y))`` rows of ``x`` and as many of ``y``, each
    without replacement (the trust score's official protocol: 500 rows, 10 subsets, ``ddof=0``); a
    smaller subset than ``subset_size`` is logged.

    Parameters
    ----------
    x, y : ndarray or Tensor, shape (n, d) and (m, d)
        Feature rows of the two samples (e.g. generated and real).
    subset_size, n_subsets : int
    seed : int
        Seed of the subset draws.
    kernel : {"cosine", "standard"}
        See :data:`KID_KERNELS`.

    Returns
    -------
    (float, float)
        Mean and standard deviation (``ddof=0``) of the subsets' MMD².

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.metrics import kid
    >>> rng = np.random.default_rng(0)
    >>> real, generated = rng.normal(0, 1, (200, 8)), rng.normal(0, 1, (200, 8))
    >>> shifted = rng.normal(0.5, 1, (200, 8))
    >>> [round(v, 3) for v in kid(generated, real, subset_size=100)]   # (mean, std) over 10 subsets
    [-0.022, 0.018]
    >>> [round(v, 3) for v in kid(shifted, real, subset_size=100)]
    [0.926, 0.156]
    """
    x, y = (as_numpy(a) for a in (x, y))
    kinds = [a.dtype for a in (x, y) if a.dtype.kind not in "iuf"]
    if kinds:
        raise TypeError(f"kid needs real-valued features; got dtype {kinds[0]} (strings are not converted)")
    x, y = x.astype(np.float64), y.astype(np.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[1] != y.shape[1]:
        raise ValueError(f"kid needs (n, d) and (m, d) features; got {x.shape} and {y.shape}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("kid: the features hold NaN or infinite values")
    if min(len(x), len(y)) < 2:
        raise ValueError(
            f"kid needs at least 2 rows on each side (the unbiased MMD² leaves the diagonal out); "
            f"got {len(x)} and {len(y)}"
        )
    check_integer(subset_size, "subset_size", least=2)
    check_integer(n_subsets, "n_subsets", least=1)
    size = min(subset_size, len(x), len(y))
    if size < subset_size:
        log.info(
            "kid: subsets of %d rows, not subset_size=%d (%d and %d rows given)", size, subset_size, len(x), len(y)
        )
    rng = np.random.default_rng(seed)
    values = [
        polynomial_mmd2(x[rng.choice(len(x), size, replace=False)], y[rng.choice(len(y), size, replace=False)], kernel)
        for _ in range(n_subsets)
    ]
    return float(np.mean(values)), float(np.std(values))
