"""The conformal order statistic: definition, edge cases and refusals."""

import math
import warnings

import numpy as np
import pytest

from condeval.core.conformal import (
    conformal_quantile,
    conformal_rank,
    coverage_bounds,
    empirical_coverage,
    unit_bootstrap_interval,
)


@pytest.mark.parametrize("n, alpha", [(10, 0.2), (19, 0.1), (99, 0.05), (4000, 0.1), (4000, 0.02), (1, 0.5)])
def test_quantile_is_the_ceil_rank_order_statistic(n, alpha):
    scores = np.random.default_rng(n).permutation(np.arange(1, n + 1, dtype=float))
    rank = math.ceil((n + 1) * (1 - alpha) - 1e-9)
    assert conformal_rank(n, alpha) == rank
    assert conformal_quantile(scores, alpha) == float(rank)


def test_no_interpolation_unlike_numpy_quantile():
    scores = np.arange(1.0, 20.0)  # n = 19
    q = conformal_quantile(scores, 0.1)
    assert q == 18.0  # ceil(20 * 0.9) = 18
    assert q in scores
    assert q != np.quantile(scores, 0.9)


def test_exact_integer_products_are_not_rounded_up():
    # (9 + 1) * (1 - 0.1) is 9.000000000000002 in floating point; the rank must be 9, not 10.
    assert conformal_rank(9, 0.1) == 9
    assert conformal_quantile(np.arange(9.0), 0.1) == 8.0


def test_ties_return_the_tied_value():
    scores = np.array([0.0] * 50 + [1.0] * 50)
    assert conformal_quantile(scores, 0.6) == 0.0  # rank ceil(101*0.4)=41 falls in the zeros
    assert conformal_quantile(scores, 0.1) == 1.0


@pytest.mark.parametrize("n, alpha", [(8, 0.1), (18, 0.05), (48, 0.02), (0, 0.5)])
def test_too_few_points_is_an_error_not_infinity(n, alpha):
    with pytest.raises(ValueError, match="calibration"):
        conformal_quantile(np.ones(n), alpha)


def test_minimum_points_for_alpha_is_enough():
    alpha = 0.1
    needed = math.ceil(1 / alpha) - 1  # 9
    assert conformal_quantile(np.arange(float(needed)), alpha) == needed - 1


@pytest.mark.parametrize("alpha", [0.0, 1.0, -0.1, 1.5, float("nan")])
def test_alpha_outside_open_interval_is_refused(alpha):
    with pytest.raises(ValueError, match="alpha"):
        conformal_quantile(np.arange(100.0), alpha)


def test_nan_scores_are_refused():
    scores = np.arange(100.0)
    scores[17] = np.nan
    with pytest.raises(ValueError, match="NaN.*17"):
        conformal_quantile(scores, 0.1)


def test_bounds_and_empirical_coverage():
    low, high = coverage_bounds(99, 0.1)
    assert low == pytest.approx(0.9) and high == pytest.approx(0.91)
    assert empirical_coverage([0.1, 0.2, 0.3, 0.4], 0.25) == 0.5


def test_a_list_of_int_and_str_ids_is_refused_not_merged():
    """numpy turned [1, "1"] into two "1": 80 units were calibrated as 40."""
    from condeval.core.conformal import unit_index

    with pytest.raises(TypeError, match="one sortable type"):
        unit_index([1, "1", 2, "2"])
    np.testing.assert_array_equal(unit_index(["b", "a", np.str_("b")]), [1, 0, 1])


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: conformal_quantile(np.arange(10.0).reshape(5, 2), 0.1), ValueError, r"1-D.*\(5, 2\)"),
        (
            lambda: conformal_quantile(["0.1", "0.2", "0.3"], 0.5),
            TypeError,
            "scores must be real numbers; got dtype <U3",
        ),
        (lambda: conformal_rank(19.5, 0.1), TypeError, "n must be an integer"),
        (lambda: coverage_bounds(0, 0.1), ValueError, "n must be an integer >= 1; got 0"),
    ],
)
def test_inputs_that_would_calibrate_the_wrong_sample_are_refused(call, error, message):
    """5 points x 2 columns were flattened into one sample of 10 (the overall maximum at alpha = 0.1)."""
    with pytest.raises(error, match=message):
        call()


def test_the_rank_is_one_near_alpha_one_and_the_band_stays_below_one():
    assert conformal_rank(5, 1 - 1e-11) == 1 and conformal_quantile([3.0, 1.0, 2.0], 1 - 1e-11) == 1.0
    assert coverage_bounds(5, 0.05) == (0.95, 1.0)
    torch = pytest.importorskip("torch")
    assert conformal_quantile(torch.arange(20.0, requires_grad=True), 0.1) == 18.0


def test_the_empirical_quantile_is_numpys_linear_one_and_refuses_a_percent():
    from condeval.core.conformal import empirical_quantile

    values = np.random.default_rng(0).normal(size=37)
    for level in (0.0, 0.1, 0.5, 0.95, 1.0):
        assert empirical_quantile(values, level) == np.quantile(values, level)
    np.testing.assert_array_equal(empirical_quantile(values, [0.025, 0.975]), np.quantile(values, [0.025, 0.975]))
    for bad, error in (
        ((values, 95), ValueError),
        ((values[:0], 0.5), ValueError),
        ((["a"], 0.5), TypeError),
        ((np.r_[values, np.nan], 0.5), ValueError),
    ):
        with pytest.raises(error):
            empirical_quantile(*bad)


def test_every_quantile_of_scores_is_taken_by_the_conformal_core():
    """One convention per kind of quantile: nothing outside core/conformal.py takes a quantile of scores."""
    import re
    from pathlib import Path

    src = Path(__file__).resolve().parents[2] / "src" / "condeval"
    pattern = re.compile(r"np\.(nan)?(quantile|percentile)\(|\.quantile\(")
    scored = [
        *(src / "trust").rglob("*.py"),
        *(src / "crc").rglob("*.py"),
        *(src / "crel" / "reports").rglob("*.py"),
        src / "metrics.py",
        *(src / "core").rglob("*.py"),
    ]
    offenders = [
        f"{path.relative_to(src)}:{n}"
        for path in scored
        if path.name != "conformal.py"
        for n, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line)
    ]
    assert not offenders, f"quantiles outside condeval.core.conformal: {offenders}"


def test_an_interval_with_an_undefined_resample_is_nan_without_a_warning():
    values = np.array([0.0, 0.0, 1.0, 1.0])

    def undefined_when_constant(counts):
        drawn = np.repeat(values, counts)
        return float(np.mean(drawn)) if np.ptp(drawn) else float("nan")

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        low, high = unit_bootstrap_interval(undefined_when_constant, len(values))
        assert np.isnan(low) and np.isnan(high)  # a resample of one value (prob. 1/8 each) has no statistic
        low, high = unit_bootstrap_interval(lambda counts: np.average(values, weights=counts), len(values))
    assert 0.0 <= low < 0.5 < high <= 1.0
