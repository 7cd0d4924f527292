"""The conformal guarantee of CReL's calibration (Proposition 3.2) over many random splits.

Whatever fixed region model produced the scores — here deliberately bad ones — the mean test
coverage of S^γcal must lie in [1 − α, 1 − α + 1/(n_cal + 1)] up to Monte-Carlo error.
"""

import numpy as np
import pytest

from condeval.core.conformal import conformal_quantile, coverage_bounds
from condeval.crel.polytope import polytope_distance

pytestmark = pytest.mark.slow

R = 2


def _directions(n_random, seed):
    rng = np.random.default_rng(seed)
    random = rng.normal(size=(n_random, R))
    random /= np.linalg.norm(random, axis=1, keepdims=True)
    return np.vstack([np.eye(R), -np.eye(R), random])


def _bad_offsets(U, X, width):
    """A fixed (untrained, wrong) DQR: a box-like polytope centred at the wrong place, of width ``width``."""
    centre = np.stack([np.sin(3 * X[:, 0]), 0.5 * X[:, 0] - 1.0], axis=1)  # not the true mean
    return centre @ U.T - width


def _draw(rng, n):
    X = rng.uniform(-1, 1, size=(n, 1))
    Z = np.stack([X[:, 0], X[:, 0] ** 2], axis=1) + rng.standard_t(df=3, size=(n, R)) * 0.5
    return X, Z


def _split_scores(n_cal, n_test, n_splits, width, seed):
    """Scores of fresh calibration/test draws, one row per split (all splits solved in one batch)."""
    U = _directions(60, seed)
    X, Z = _draw(np.random.default_rng(seed), n_splits * (n_cal + n_test))
    return polytope_distance(U, _bad_offsets(U, X, width), Z).reshape(n_splits, n_cal + n_test)


def _mean_coverage(n_cal, n_test, alpha, n_splits, width, seed, threshold=conformal_quantile):
    scores = _split_scores(n_cal, n_test, n_splits, width, seed)
    coverage = np.array([np.mean(row[n_cal:] <= threshold(row[:n_cal], alpha)) for row in scores])
    return coverage.mean(), coverage.std(ddof=1) / np.sqrt(n_splits)


@pytest.mark.parametrize(
    "n_cal, alpha, width, n_splits",
    [
        (19, 0.1, 0.05, 1500),  # tiny n: an uncorrected or interpolated quantile visibly under-covers
        (200, 0.1, 0.2, 250),
        (200, 0.02, 0.0, 250),  # width 0: the "region" is a single point, every score positive
        (500, 0.3, 0.4, 200),
    ],
)
def test_mean_coverage_lies_in_the_conformal_band(n_cal, alpha, width, n_splits):
    mean, se = _mean_coverage(n_cal, 100, alpha, n_splits, width, seed=n_cal + int(100 * alpha))
    low, high = coverage_bounds(n_cal, alpha)
    assert low - 4 * se <= mean <= high + 4 * se, (mean, se, low, high)


def test_the_band_check_rejects_an_uncorrected_quantile():
    """The same harness flags the classic mistake (np.quantile without the n+1 correction)."""
    n_cal, alpha = 19, 0.1
    mean, se = _mean_coverage(n_cal, 100, alpha, 1500, 0.05, seed=7, threshold=lambda s, a: np.quantile(s, 1 - a))
    assert mean + 4 * se < coverage_bounds(n_cal, alpha)[0]
