"""KID against torchmetrics' polynomial MMD (an independent implementation), about zero between two
samples of one distribution, growing with a mean shift."""

import numpy as np
import pytest
import torch
from torchmetrics.image.kid import poly_mmd

from condeval.metrics import kid, polynomial_mmd2, unit_rows


@pytest.mark.parametrize("kernel", ["cosine", "standard"])
def test_polynomial_mmd2_matches_torchmetrics(kernel):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((120, 24)), rng.standard_normal((120, 24)) + 0.3
    if kernel == "cosine":  # (x·y + 1)^3 on unit rows: torchmetrics' kernel at gamma = 1
        expected = poly_mmd(torch.as_tensor(unit_rows(x)), torch.as_tensor(unit_rows(y)), gamma=1.0)
    else:  # (x·y/d + 1)^3: torchmetrics' default gamma = 1/d
        expected = poly_mmd(torch.as_tensor(x), torch.as_tensor(y))
    assert polynomial_mmd2(x, y, kernel) == pytest.approx(float(expected), rel=1e-10)


def test_kid_is_about_zero_within_a_distribution_and_grows_with_a_shift():
    rng = np.random.default_rng(1)
    centre = rng.standard_normal(32)
    same = [
        kid(centre + rng.standard_normal((600, 32)), centre + rng.standard_normal((600, 32)), seed=s)[0]
        for s in range(20)
    ]
    # unbiased: independent same-distribution pairs scatter around zero
    assert abs(np.mean(same)) < 3 * np.std(same) / np.sqrt(len(same)), (np.mean(same), np.std(same))
    base = centre + rng.standard_normal((600, 32))
    shifted = [kid(base, centre + shift + rng.standard_normal((600, 32)))[0] for shift in (0.0, 0.2, 0.5, 1.0)]
    assert np.all(np.diff(shifted) > 0), shifted
    assert shifted[-1] > 20 * max(np.std(same), abs(shifted[0]))


def test_kid_subsets_draw_without_replacement_and_are_seeded():
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((80, 8)), rng.standard_normal((300, 8))
    mean, std = kid(x, y, subset_size=500, n_subsets=1, seed=0)  # one subset of min(500, 80, 300) = 80 rows each
    draws = np.random.default_rng(0)
    x_rows, y_rows = draws.choice(80, 80, replace=False), draws.choice(300, 80, replace=False)
    assert len(set(y_rows)) == 80 and std == 0.0
    assert mean == pytest.approx(polynomial_mmd2(x[x_rows], y[y_rows]), rel=1e-12)
    assert kid(x, y, seed=3) == kid(x, y, seed=3) != kid(x, y, seed=4)


def test_kid_refuses_bad_input():
    with pytest.raises(ValueError, match="NaN"):
        kid(np.full((10, 3), np.nan), np.ones((10, 3)))
    with pytest.raises(ValueError, match=r"\(n, d\) and \(m, d\)"):
        kid(np.ones((10, 3)), np.ones((10, 4)))
    with pytest.raises(ValueError, match="kernel"):
        polynomial_mmd2(np.ones((4, 3)), np.ones((4, 3)), kernel="rbf")
    # one row: the error named polynomial_mmd2, not kid; no subsets: (nan, nan) with only a RuntimeWarning
    with pytest.raises(ValueError, match="at least 2 rows on each side.*got 1 and 10"):
        kid(np.ones((1, 3)), np.ones((10, 3)))
    with pytest.raises(ValueError, match="n_subsets must be an integer >= 1; got 0"):
        kid(np.ones((10, 3)), np.ones((10, 3)), n_subsets=0)
    with pytest.raises(ValueError, match="subset_size must be an integer >= 2; got 1"):
        kid(np.ones((10, 3)), np.ones((10, 3)), subset_size=1)
