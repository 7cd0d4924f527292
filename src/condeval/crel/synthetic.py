"""Synthetic data of CReL Appendix B.1, its preprocessing and its folds.

Raw data follow the paper exactly::

    X ~ Uniform(0.8, 3.2)^p,  A, B ~ N(0, 1)^{p×d},  ε ~ N(0, σ²)^d
    linear:     Y = X A + ε
    nonlinear:  Y = X A + X² B + ε        (X² element-wise)

How we read "all data are L2-normalized before training" (used in every track):
each *condition* vector is divided by its Euclidean norm, row by row
(scikit-learn's ``normalize(norm="l2")``), exactly as CLIP/BERT features are
unit-normalized in the image–text experiments. Then, as Feldman et al.'s code
(which CReL builds on) does for every network input and output, conditions and
outputs are standardized per coordinate with statistics fitted on the LGM fold
only (scikit-learn's ``StandardScaler``): after row normalization the
coordinates of x̃ vary by a few hundredths, which a small MLP cannot learn from
in a reasonable number of steps. Every Y-space quantity — grid, area, coverage
— is measured in the standardized output units for every method.

A consequence worth knowing: after row normalization the condition no longer
carries ‖x‖, so Y | x̃ traces a parabola-shaped arc in Y (the norm s varies
along ``s·x̃A + s²·x̃²B``). :func:`sample_conditional` samples that exact law,
which gives an oracle for tests and for the VAE-vs-CVAE figure.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

# scikit-learn is imported where the preprocessor is fitted: the Snakefile reads FOLDS and fold_sizes
# at parse time, and a scikit-learn import there costs every DAG build about a CPU second.
if TYPE_CHECKING:
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

__all__ = [
    "FOLDS",
    "X_LOW",
    "X_HIGH",
    "SyntheticParams",
    "draw_params",
    "generate",
    "sample_conditional",
    "assign_folds",
    "Preprocessor",
]

X_LOW, X_HIGH = 0.8, 3.2
FOLDS = ("lgm", "dqr", "cal", "test")


@dataclass(frozen=True)
class SyntheticParams:
    """Coefficients of one synthetic data set.

    Attributes
    ----------
    kind : {"linear", "nonlinear"}
    A, B : ndarray, shape (p, d)
        Linear and quadratic coefficients (``B`` is zero for ``linear``).
    sigma : float
        Noise standard deviation.
    """

    kind: str
    A: np.ndarray
    B: np.ndarray
    sigma: float

    @property
    def p(self) -> int:
        return self.A.shape[0]

    @property
    def d(self) -> int:
        return self.A.shape[1]

    def mean(self, x_raw: np.ndarray) -> np.ndarray:
        """Noise-free response ``x A + x² B`` for raw conditions (n, p)."""
        return x_raw @ self.A + (x_raw**2) @ self.B


def draw_params(kind: str, p: int, d: int, sigma: float, rng: np.random.Generator) -> SyntheticParams:
    """Draw the coefficient matrices of Appendix B.1."""
    if kind not in ("linear", "nonlinear"):
        raise ValueError(f"synthetic kind must be 'linear' or 'nonlinear'; got {kind!r}")
    A = rng.standard_normal((p, d))
    B = rng.standard_normal((p, d)) if kind == "nonlinear" else np.zeros((p, d))
    return SyntheticParams(kind=kind, A=A, B=B, sigma=float(sigma))


def generate(
    kind: str, n: int, p: int, d: int, sigma: float, seed: int
) -> tuple[np.ndarray, np.ndarray, SyntheticParams]:
    """Generate ``n`` raw samples (X, Y) of the linear or nonlinear design.

    Returns
    -------
    X : ndarray (n, p)
        Raw conditions in (0.8, 3.2).
    Y : ndarray (n, d)
        Raw responses.
    params : SyntheticParams
    """
    rng = np.random.default_rng(seed)
    params = draw_params(kind, p, d, sigma, rng)
    X = rng.uniform(X_LOW, X_HIGH, size=(n, p))
    Y = params.mean(X) + rng.normal(0.0, sigma, size=(n, d))
    return X, Y, params


def _norm_range(x_unit: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Admissible norms s with s·x̃ inside the cube (0.8, 3.2)^p, per row."""
    s_min = (X_LOW / x_unit).max(axis=1)
    s_max = (X_HIGH / x_unit).min(axis=1)
    return s_min, s_max


def sample_conditional(
    x_unit: np.ndarray, n_samples: int, params: SyntheticParams, rng: np.random.Generator
) -> np.ndarray:
    """Sample raw Y | x̃ for L2-normalized conditions x̃ (oracle).

    With X uniform on the cube, the norm s = ‖X‖ given the direction x̃ has
    density ∝ s^{p−1} on the admissible interval, so s is drawn by inverting
    that CDF and Y = params.mean(s x̃) + ε.

    Parameters
    ----------
    x_unit : ndarray (m, p)
        Unit-norm conditions.
    n_samples : int
        Samples per condition.
    params : SyntheticParams
        The design's mean function and noise.
    rng : numpy.random.Generator
        Draws the norms and the noise.

    Returns
    -------
    ndarray (m, n_samples, d)
    """
    x_unit = np.atleast_2d(x_unit)
    p = x_unit.shape[1]
    s_min, s_max = _norm_range(x_unit)
    if np.any(s_min > s_max):
        bad = int(np.flatnonzero(s_min > s_max)[0])
        raise ValueError(f"condition {bad} is not the direction of any point of the cube")
    u = rng.uniform(size=(x_unit.shape[0], n_samples))
    # Work with (s/s_max)^p to avoid overflow of s^p for large p.
    ratio_min = (s_min / s_max) ** p
    s = s_max[:, None] * (ratio_min[:, None] + u * (1.0 - ratio_min[:, None])) ** (1.0 / p)
    x_raw = s[..., None] * x_unit[:, None, :]
    mean = params.mean(x_raw.reshape(-1, p)).reshape(x_unit.shape[0], n_samples, params.d)
    return mean + rng.normal(0.0, params.sigma, size=mean.shape)


def _fold_bounds(n: int, fractions: dict[str, float]) -> np.ndarray:
    """End index of each fold of :data:`FOLDS` in the permuted rows (cumulative rounding)."""
    missing = [f for f in FOLDS if f not in fractions]
    if missing:
        raise ValueError(f"split fractions lack fold(s) {missing}")
    total = sum(fractions[f] for f in FOLDS)
    if not np.isclose(total, 1.0):
        raise ValueError(f"split fractions must sum to 1; got {total}")
    return np.round(np.cumsum([fractions[f] for f in FOLDS]) * n).astype(int)


def fold_sizes(n: int, fractions: dict[str, float]) -> dict[str, int]:
    """Rows per fold exactly as :func:`assign_folds` cuts them (cumulative, not per-fold, rounding).

    With ``n = 1006`` and 60/24/8/8, the calibration fold has 80 rows, not ``round(1006 * 0.08) = 80.48``
    rounded alone; configs are checked against these sizes before any job runs.
    """
    bounds = _fold_bounds(n, fractions)
    return {fold: int(stop - start) for fold, start, stop in zip(FOLDS, np.concatenate([[0], bounds[:-1]]), bounds)}


def assign_folds(n: int, fractions: dict[str, float], seed: int) -> np.ndarray:
    """Deterministic fold label per row: a seeded permutation cut by ``fractions``.

    Parameters
    ----------
    n : int
        Number of rows.
    fractions : dict
        Fraction per fold in :data:`FOLDS`; must sum to 1.
    seed : int
        Of the permutation.

    Returns
    -------
    ndarray (n,) of str
    """
    order = np.random.default_rng(seed).permutation(n)
    bounds = _fold_bounds(n, fractions)
    labels = np.empty(n, dtype=object)
    start = 0
    for fold, stop in zip(FOLDS, bounds):
        labels[order[start:stop]] = fold
        start = stop
    return labels.astype(str)


@dataclass
class Preprocessor:
    """Row-wise L2 normalization of X, then per-coordinate standardization of X and Y.

    scikit-learn does the work: ``Pipeline(Normalizer, StandardScaler)`` for the conditions, a
    ``StandardScaler`` for the outputs. Fit on the LGM fold, then applied unchanged to every fold.
    It is never restored from stored statistics: a consumer refits it on the same fold (cheap and
    deterministic), and :meth:`to_dict` only records the statistics for readers.
    """

    x_pipeline: Pipeline | None = None
    y_scaler: StandardScaler | None = None

    def fit(self, X_lgm: np.ndarray, Y_lgm: np.ndarray) -> Preprocessor:
        from sklearn.pipeline import make_pipeline
        from sklearn.preprocessing import Normalizer, StandardScaler

        self.x_pipeline = make_pipeline(Normalizer(norm="l2"), StandardScaler()).fit(X_lgm)
        self.y_scaler = StandardScaler().fit(Y_lgm)
        return self

    @property
    def x_scaler(self) -> StandardScaler:
        """The standardization step of the condition pipeline."""
        return self.x_pipeline[-1]

    def transform_x(self, X: np.ndarray) -> np.ndarray:
        return self.x_pipeline.transform(X)

    def transform_y(self, Y: np.ndarray) -> np.ndarray:
        return self.y_scaler.transform(Y)

    def inverse_y(self, Y_std: np.ndarray) -> np.ndarray:
        return self.y_scaler.inverse_transform(Y_std)

    def unit_to_model_x(self, X_unit: np.ndarray) -> np.ndarray:
        """Standardize conditions that are already unit-norm rows."""
        return self.x_scaler.transform(X_unit)

    def model_to_unit_x(self, X_model: np.ndarray) -> np.ndarray:
        """Undo the standardization: back to unit-norm conditions."""
        return self.x_scaler.inverse_transform(X_model)

    def to_dict(self) -> dict:
        """The fitted statistics, for the record (``preprocess.json``)."""
        return {
            "x_mean": self.x_scaler.mean_.tolist(),
            "x_scale": self.x_scaler.scale_.tolist(),
            "y_mean": self.y_scaler.mean_.tolist(),
            "y_scale": self.y_scaler.scale_.tolist(),
        }
