"""Fast checks of the CReL estimator's contract on small untrained models: the threshold is the
conformal order statistic, calibration is all or nothing, and bad input names the argument."""

import numpy as np
import pytest
import torch

from condeval.core.conformal import conformal_quantile
from condeval.crel import CReL
from condeval.crel.models.dqr import DirectionalQuantileRegressor
from condeval.crel.models.vae import LatentVAE


@pytest.fixture()
def crel():
    torch.manual_seed(0)
    lgm = LatentVAE(output_dim=2, latent_dim=2, hidden_dims=[8, 8])
    dqr = DirectionalQuantileRegressor(cond_dim=3, latent_dim=2, quantile_level=0.1, direction_seed=0,
                                       n_directions=32, directions_per_step=16, hidden_dims=[8])  # fmt: skip
    return CReL(lgm, dqr)


@pytest.fixture()
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(60, 3)), rng.normal(size=(60, 2))


def test_gamma_cal_is_the_conformal_quantile_of_the_scores(crel, data):
    X, Y = data
    for alpha in (0.05, 0.1, 0.3):
        crel.calibrate(X, Y, alpha)
        assert crel.gamma_cal_ == conformal_quantile(crel.latent_scores(X, Y), alpha)
        assert crel.gamma_cal_ == conformal_quantile(crel.scores_cal_, alpha)


def test_a_failed_calibration_leaves_the_estimator_as_it_was(crel, data):
    X, Y = data
    crel.calibrate(X, Y, 0.1)
    before = (crel.gamma_cal_, crel.scores_cal_.copy(), crel.alpha_, crel.contains(X, Y).copy())
    with pytest.raises(ValueError, match="too few calibration points"):
        crel.calibrate(X[:5], Y[:5], 0.1)
    Y_nan = Y.copy()
    Y_nan[3, 1] = np.nan
    with pytest.raises(ValueError, match="'Y'"):
        crel.calibrate(X, Y_nan, 0.1)
    with pytest.raises(ValueError, match="too few"):
        crel.set_alpha(0.001)
    assert crel.gamma_cal_ == before[0] and crel.alpha_ == before[2]
    np.testing.assert_array_equal(crel.scores_cal_, before[1])
    np.testing.assert_array_equal(crel.contains(X, Y), before[3])


def test_wrong_widths_name_the_argument_and_the_expected_shape(crel, data):
    X, Y = data
    with pytest.raises(ValueError, match=r"X must have shape \(n, 3\).*\(60, 5\)"):
        crel.calibrate(np.ones((60, 5)), Y, 0.1)
    with pytest.raises(ValueError, match=r"Y must have shape \(n, 2\).*\(60, 4\)"):
        crel.calibrate(X, np.ones((60, 4)), 0.1)
    with pytest.raises(ValueError, match="same number of rows"):
        crel.calibrate(X, Y[:50], 0.1)


def test_use_before_calibration_says_to_calibrate(crel, data):
    X, Y = data
    for call in (lambda: crel.contains(X, Y), lambda: next(iter(crel.region_clouds(X))),
                 lambda: crel.reliability(X, Y), lambda: crel.set_alpha(0.1)):  # fmt: skip
        with pytest.raises(RuntimeError, match=r"calibrate\(X_cal, Y_cal, alpha\)"):
            call()


@pytest.mark.parametrize("alpha", [None, "0.1", [0.1]])
def test_conformal_quantile_names_a_non_numeric_alpha(alpha):
    with pytest.raises(TypeError, match="alpha must be a number"):
        conformal_quantile(np.arange(50.0), alpha)
