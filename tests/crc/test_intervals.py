"""Calibrated CLIPScore intervals: the truncated Gaussian and the Learn-then-Test pick of λ."""

import numpy as np
import pytest
from scipy.stats import truncnorm

from condeval.core.risk import hb_p_value, learn_then_test
from condeval.crc.intervals import (
    PAPER_LAMBDAS,
    IntervalSettings,
    calibrate_intervals,
    truncated_gaussian,
    truncation_bounds,
    ups_risk,
)


def test_truncated_gaussian():
    mean, std = np.array([0.5, 1.0, 2.4]), np.array([0.1, 0.3, 0.2])
    m, s, low, high = truncated_gaussian(mean, std, 2.0, 0.0, 2.5)
    a, b = (0.0 - mean) / (2 * std), (2.5 - mean) / (2 * std)
    np.testing.assert_allclose(m, truncnorm.mean(a, b, loc=mean, scale=2 * std))
    np.testing.assert_allclose(s, truncnorm.std(a, b, loc=mean, scale=2 * std))
    assert (low >= 0).all() and (high <= 2.5).all() and (s <= 2 * std + 1e-12).all()
    # Far-away bounds: the plain Gaussian, its 95% interval μ ± 1.96 λσ.
    m, s, low, high = truncated_gaussian(mean, std, 1.0, -100, 100)
    np.testing.assert_allclose(m, mean)
    np.testing.assert_allclose(s, std)
    np.testing.assert_allclose(high - mean, 1.959964 * std, rtol=1e-5)
    assert truncation_bounds([0.9, 1.8, 0.45]) == pytest.approx((0.25, 3.24))
    # A degenerate pair (all masked scores 0) below the bounds: all mass at the lower bound, not NaN.
    m, s, low, high = truncated_gaussian(np.array([0.0, 1.0]), np.array([0.0, 0.2]), 1.0, 0.02, 2.5)
    assert m[0] == low[0] == high[0] == 0.02 and s[0] == 0.0 and np.isfinite([m, s, low, high]).all()


def _judged_pairs(n, rng):
    """Human scores 1–4; CLIPScore means that track them, noisier where the sampled σ is larger."""
    human = rng.integers(1, 5, n).astype(float)
    std = rng.uniform(0.02, 0.3, n)
    mean = np.clip(0.35 * human + rng.normal(0, 3 * std), 0.05, 2.4)
    return mean, std, human


def test_lambda_hat_is_the_lowest_risk_among_the_rejected():
    mean, std, human = _judged_pairs(400, np.random.default_rng(0))
    result = calibrate_intervals(mean, std, human, IntervalSettings(delta=0.05, unit="caption"))
    lower, upper = result.bounds
    expected_risks = [ups_risk(*truncated_gaussian(mean, std, lam, lower, upper)[:2], human) for lam in PAPER_LAMBDAS]
    np.testing.assert_allclose(result.risks, expected_risks)
    assert result.alpha == pytest.approx(result.risks[0])  # Eq. 13: α is the risk at λ = 1
    np.testing.assert_allclose(result.p_values, hb_p_value(result.risks, 400, result.alpha))
    assert result.valid.tolist() == learn_then_test(result.p_values, 0.05, "bonferroni").tolist()
    assert (result.p_values[result.valid] <= 0.05 / 50).all()
    assert 0 not in result.valid  # λ = 1 cannot beat itself
    assert result.lambda_hat == PAPER_LAMBDAS[result.valid[np.argmin(result.risks[result.valid])]]
    assert result.risks.min() < result.alpha  # on this data, scaling σ does raise the UPS
    holm = calibrate_intervals(mean, std, human, IntervalSettings(delta=0.05, method="holm", unit="caption"))
    assert set(result.valid) <= set(holm.valid)


def test_bad_input_is_refused():
    mean, std, human = _judged_pairs(50, np.random.default_rng(1))
    with pytest.raises(ValueError, match="one length"):
        calibrate_intervals(mean[:-1], std, human, IntervalSettings(unit="caption"))
    with pytest.raises(ValueError, match="std contains NaN"):
        calibrate_intervals(mean, np.where(np.arange(50) == 7, np.nan, std), human, IntervalSettings(unit="caption"))
    with pytest.raises(ValueError, match="at least 3 pairs"):
        calibrate_intervals(mean[:2], std[:2], human[:2], IntervalSettings(unit="caption"))
    with pytest.raises(ValueError, match="std must be >= 0 .* pair 4 is negative"):
        calibrate_intervals(mean, np.where(np.arange(50) == 4, -0.1, std), human, IntervalSettings(unit="caption"))
    with pytest.raises(ValueError, match="images has a missing id at pair 0"):
        calibrate_intervals(mean, std, human, images=[None] * 50)
    with pytest.raises(ValueError, match="uncalibrated UPS is <= 0"):
        calibrate_intervals(
            human + (0.32 - std), std, human, IntervalSettings(unit="caption")
        )  # the error shrinks as σ grows: UPS < 0
    with pytest.raises(ValueError, match="UPS is undefined"):
        ups_risk(human, std, human)  # no error at all
    # 12 pairs whose error tracks σ (0 < α < 1): too few for any p-value to reach δ/50.
    human, std = np.arange(12) % 4 + 1.0, np.linspace(0.02, 0.3, 12)
    mean = human + 2 * std + np.random.default_rng(2).normal(0, 0.05, 12)
    with pytest.raises(ValueError, match="no lambda on the grid controls the risk"):
        calibrate_intervals(mean, std, human, IntervalSettings(unit="caption"))


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        ({"mean": "negative"}, ValueError, r"mean must be >= 0 .* pair 3 is -"),
        ({"images": np.arange(50)[:, None]}, ValueError, r"1-D, 50 of them\); got shape \(50, 1\)"),
        ({"images": 5}, ValueError, r"got shape \(\)"),
        ({"delta": "0.05"}, TypeError, "delta must be a number in"),
        ({"bounds_factor": "2"}, ValueError, "bounds_factor must be a finite number > 1"),
        ({"mean": "strings"}, TypeError, "mean must be real numbers"),
    ],
)
def test_settings_and_means_the_intervals_would_misread_are_refused(change, error, message):
    """Negative means inverted the truncation interval (the error blamed the data) or left means outside
    it; images of shape (n, 1) passed; "0.05" and "2" were read as numbers or failed inside numpy."""
    mean, std, human = _judged_pairs(50, np.random.default_rng(1))
    arguments = {"mean": mean, "std": std, "human": human, "images": np.arange(50)} | change
    if change.get("mean") == "negative":
        arguments["mean"] = np.where(np.arange(50) == 3, -0.2, mean)
    if change.get("mean") == "strings":
        arguments["mean"] = mean.astype(str)
    with pytest.raises(error, match=message):
        pairs, images = (arguments.pop("mean"), arguments.pop("std"), arguments.pop("human")), arguments.pop("images")
        calibrate_intervals(*pairs, IntervalSettings(**arguments), images=images)


def test_the_image_is_the_unit_of_the_p_values():
    mean, std, human = _judged_pairs(400, np.random.default_rng(0))
    images = np.where(
        np.arange(400) < 160, np.arange(400) // 4, np.arange(400)
    )  # 160 pairs four to an image: 280 images
    grid = np.array([1.0, 2.0, 50.0])  # λ = 50 has the highest UPS on these pairs
    by_image = calibrate_intervals(mean, std, human, IntervalSettings(delta=0.05, lambdas=grid), images=images)
    np.testing.assert_allclose(by_image.p_values, hb_p_value(by_image.risks, 280, by_image.alpha))
    by_pair = calibrate_intervals(mean, std, human, IntervalSettings(delta=0.05, lambdas=grid, unit="caption"))
    assert (by_image.p_values >= by_pair.p_values).all() and set(by_image.valid) <= set(by_pair.valid)
    with pytest.raises(ValueError, match="unit='image' needs each pair's image"):
        calibrate_intervals(mean, std, human)
    with pytest.raises(ValueError, match="one image per pair"):
        calibrate_intervals(mean, std, human, images=images[:-1])


@pytest.mark.parametrize(
    "setting,value,message",
    [
        ("lambdas", [1.0, 0.0, 2.0], "lambdas must be"),
        ("lambdas", [1.0, np.nan], "lambdas must be"),
        ("lambdas", [-1.0, 2.0], "lambdas must be"),
        ("bounds_factor", 1.0, "bounds_factor must be"),
        ("bounds_factor", 0.5, "bounds_factor must be"),
        ("bounds_factor", np.inf, "bounds_factor must be"),
        ("delta", 1.0, "delta must lie"),
        ("delta", 0.0, "delta must lie"),
        ("unit", "pair", "unit must be"),
    ],
)
def test_settings_are_checked_by_name(setting, value, message):
    mean, std, human = _judged_pairs(100, np.random.default_rng(3))
    settings = {"unit": "caption", setting: value}
    with pytest.raises(ValueError, match=message):
        calibrate_intervals(mean, std, human, IntervalSettings(**settings))


def test_interval_risk_control_predicts_the_calibrated_intervals():
    from condeval.crc import IntervalRiskControl

    mean, std, human = _judged_pairs(400, np.random.default_rng(0))
    control = IntervalRiskControl(unit="caption").calibrate(mean, std, human)
    expected = calibrate_intervals(mean, std, human, IntervalSettings(delta=0.05, unit="caption"))
    assert control.calibration_.lambda_hat == expected.lambda_hat > 1
    predicted = control.predict(mean, std)
    for got, want in zip(predicted, truncated_gaussian(mean, std, expected.lambda_hat, *expected.bounds), strict=True):
        np.testing.assert_allclose(got, want)
    with pytest.raises(ValueError, match="not calibrated"):
        IntervalRiskControl().predict(mean, std)
