"""The public CReL estimator: fit → calibrate → predict on a small synthetic problem."""

from dataclasses import replace

import numpy as np
import pytest
import torch

from condeval.core.conformal import coverage_bounds
from condeval.core.settings import SearchSettings
from condeval.crel import CReL, CReLSettings
from condeval.crel.polytope import polytope_distance
from condeval.crel.synthetic import Preprocessor, generate

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    torch.set_num_threads(1)
    X, Y, _ = generate("nonlinear", 6000, 6, 2, 0.3, seed=0)
    pre = Preprocessor().fit(X[:3000], Y[:3000])
    X, Y = pre.transform_x(X), pre.transform_y(Y)
    settings = CReLSettings(
        lgm=replace(CReLSettings().lgm, epochs=15),
        dqr=replace(CReLSettings().dqr, epochs=8, lr=3e-3),
        lgm_kwargs={"hidden_dims": [32, 32, 32, 32]},
        work_dir=tmp_path_factory.mktemp("crel"),
        dqr_kwargs={"n_directions": 256, "directions_per_step": 128},
    )
    crel = CReL(settings).fit(X[:3000], Y[:3000], X[3000:4500], Y[3000:4500])
    return crel, (X[4500:5500], Y[4500:5500]), (X[5500:], Y[5500:])


def test_calibrated_coverage_in_z(fitted):
    crel, (X_cal, Y_cal), (X_test, Y_test) = fitted
    crel.calibrate(X_cal, Y_cal, alpha=0.1)
    covered = crel.contains(X_test, Y_test)
    low, high = coverage_bounds(len(Y_cal), 0.1)
    se = np.sqrt(0.09 / len(Y_test) + 0.09 / len(Y_cal))
    assert low - 4 * se <= covered.mean() <= high + 4 * se
    assert 0.0 <= crel.gamma_init_ < 0.9  # the uncalibrated regions under-cover (Eq. 5)
    assert crel.gamma_cal_ > 0


def test_reliability_is_the_worst_value_in_the_region(fitted):
    crel, (X_cal, Y_cal), (X_test, Y_test) = fitted
    crel.calibrate(X_cal, Y_cal, alpha=0.1)
    worst, z_worst = crel.reliability(X_test[:40], Y_test[:40], search=SearchSettings(num_z0=10, steps=30))
    assert worst.shape == (40,) and z_worst.shape == (40, 2)
    # the optimum lies in the calibrated region...
    assert np.all(polytope_distance(crel.directions, crel.offsets(X_test[:40]), z_worst) <= crel.gamma_cal_ + 1e-6)
    # ...and is no better than the code of the true response when that code is in the region
    inside = crel.contains(X_test[:40], Y_test[:40])
    z_true = crel.encode(X_test[:40], Y_test[:40])
    with torch.no_grad():
        at_truth = -((crel.decode_torch(torch.as_tensor(z_true)).double().numpy() - Y_test[:40]) ** 2).mean(axis=1)
    assert np.all(worst[inside] <= at_truth[inside] + 1e-6)


def test_uncalibrated_use_is_refused(fitted):
    crel, _, (X_test, Y_test) = fitted
    fresh = CReL.from_models(crel.lgm, crel.dqr)
    with pytest.raises(RuntimeError, match="calibrate"):
        fresh.contains(X_test, Y_test)


def test_too_few_calibration_points_is_an_error(fitted):
    crel, (X_cal, Y_cal), _ = fitted
    with pytest.raises(ValueError, match="too few calibration points"):
        crel.calibrate(X_cal[:20], Y_cal[:20], alpha=0.02)


@pytest.fixture(scope="module")
def fresh_pool():
    """Fresh draws from the law the fixture's models were fit on (same seed, so the same design
    parameters; rows past the first 6,000 were never seen), preprocessed as in training."""
    X, Y, _ = generate("nonlinear", 6000, 6, 2, 0.3, seed=0)
    pre = Preprocessor().fit(X[:3000], Y[:3000])
    X_all, Y_all, _ = generate("nonlinear", 36000, 6, 2, 0.3, seed=0)
    return pre.transform_x(X_all[6000:]), pre.transform_y(Y_all[6000:])


@pytest.mark.parametrize("n_cal", [19, 49])
def test_coverage_band_through_the_estimator_over_many_small_calibrations(fitted, fresh_pool, n_cal):
    """Proposition 3.2 through CReL.calibrate / CReL.contains: over many fresh calibration and test
    draws the mean Z-coverage lies in [1 − α, 1 − α + 1/(n_cal + 1)]. With n_cal = 19 an uncorrected
    quantile (np.quantile) covers about 0.86 and fails."""
    crel = fitted[0]
    X, Y = fresh_pool
    alpha, n_test, draws = 0.1, 100, 400
    rng = np.random.default_rng(n_cal)
    coverage = np.empty(draws)
    for i in range(draws):
        rows = rng.choice(len(Y), n_cal + n_test, replace=False)
        cal, test = rows[:n_cal], rows[n_cal:]
        crel.calibrate(X[cal], Y[cal], alpha)
        coverage[i] = crel.contains(X[test], Y[test]).mean()
    low, high = coverage_bounds(n_cal, alpha)
    se = coverage.std(ddof=1) / np.sqrt(draws)
    assert low - 4 * se <= coverage.mean() <= high + 4 * se, (coverage.mean(), se, low, high)
