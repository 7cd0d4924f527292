"""Hoeffding–Bentkus bounds and Learn-then-Test, against the paper's formulas written out here
independently, and by their guarantees over many random draws."""

import numpy as np
import pytest
from scipy.stats import binom

from condeval.core.risk import hb_p_value, hb_ucb, learn_then_test


def _reference_tail(risk_hat, n, bound):
    """g(r̂; R): Propositions 2 and 3 of the CLIPScore paper, Hoeffding only where r̂ < R, ceil in Bentkus."""

    def kl(t, r):
        first = 0.0 if t == 0 else t * np.log(t / r)
        return first + (1 - t) * np.log((1 - t) / (1 - r))

    hoeffding = np.exp(-n * kl(risk_hat, bound)) if risk_hat < bound else 1.0
    bentkus = np.e * binom.cdf(np.ceil(n * risk_hat), n, bound)
    return min(hoeffding, bentkus, 1.0), bentkus < hoeffding


GRID = [
    (r, n, a)
    for r in (0.0, 0.013, 0.05, 0.105, 0.155, 0.19, 0.2, 0.31, 0.6, 1.0)
    for n in (7, 10, 100, 333, 10_000)
    for a in (0.1, 0.2, 0.5)
]


def test_p_value_is_the_papers_bound():
    bentkus_binds = 0
    for risk_hat, n, alpha in GRID:
        expected, bentkus = _reference_tail(risk_hat, n, alpha)
        bentkus_binds += bentkus and expected < 1
        assert hb_p_value(risk_hat, n, alpha) == pytest.approx(expected, rel=1e-9, abs=1e-300), (risk_hat, n, alpha)
    # Both tails bind somewhere on the grid, so a floor in Bentkus or a Hoeffding that never binds is caught.
    assert 5 <= bentkus_binds < len(GRID) - 5


def test_p_value_is_vectorized_and_shaped_like_the_risks():
    risks = np.array([[0.0, 0.1], [0.2, 0.3]])
    p = hb_p_value(risks, 100, 0.2)
    assert p.shape == (2, 2)
    assert p[0, 1] == pytest.approx(hb_p_value(0.1, 100, 0.2))
    assert np.all(np.diff(p.ravel()) >= 0)  # a larger empirical risk is less evidence of control


def test_ucb_is_the_supremum_of_the_papers_set():
    for risk_hat, n, _ in GRID:
        for delta in (0.05, 0.2):
            ucb = float(hb_ucb(risk_hat, n, delta))
            if risk_hat == 1.0:
                assert ucb == 1.0
                continue
            # g(r̂; R) >= δ just below the bound, < δ just above it.
            assert _reference_tail(risk_hat, n, max(ucb - 1e-7, risk_hat))[0] >= delta - 1e-9
            assert _reference_tail(risk_hat, n, min(ucb + 1e-7, 1 - 1e-12))[0] < delta + 1e-9
            assert ucb >= risk_hat


def test_ucb_at_zero_risk_is_hoeffdings_closed_form():
    # With r̂ = 0 the Hoeffding tail (1 − R)^n is below Bentkus' e(1 − R)^n: R̂⁺ = 1 − δ^(1/n).
    n = np.array([1, 10, 100, 1000])
    assert np.array([float(hb_ucb(0.0, k, 0.05)) for k in n]) == pytest.approx(1 - 0.05 ** (1 / n), rel=1e-9)


@pytest.mark.slow
def test_ucb_covers_the_true_risk_with_probability_one_minus_delta():
    rng = np.random.default_rng(0)
    n, delta, draws = 60, 0.1, 3000
    for true_risk in (0.05, 0.3):
        risk_hat = rng.binomial(n, true_risk, size=draws) / n
        misses = np.mean(hb_ucb(risk_hat, n, delta) < true_risk)
        assert misses <= delta, (true_risk, misses)
        # It is a bound, not a constant: the empirical risk alone would miss about half the time.
        assert np.mean(risk_hat < true_risk) > 0.3


def test_ucb_vectorizes_and_refuses_bad_input():
    bounds = hb_ucb([0.1, 0.1, 0.4], 100, 0.05)
    assert bounds.shape == (3,) and bounds[0] == bounds[1] < bounds[2]
    for bad in (-0.1, 1.2, np.nan):
        with pytest.raises(ValueError, match="risk"):
            hb_ucb([0.2, bad], 100, 0.05)
    with pytest.raises(ValueError, match="n must be an integer >= 1; got 0"):
        hb_ucb(0.2, 0, 0.05)
    with pytest.raises(TypeError, match="n must be an integer >= 1; got float 10.5"):
        hb_ucb(0.2, 10.5, 0.05)
    for delta in (0.0, 1.0, 1.5):
        with pytest.raises(ValueError, match="delta"):
            hb_ucb(0.2, 100, delta)
    with pytest.raises(ValueError, match="alpha"):
        hb_p_value(0.2, 100, 1.0)


def _holm(p, delta):
    order = np.argsort(p, kind="stable")
    rejected = []
    for rank, j in enumerate(order):
        if p[j] > delta / (len(p) - rank):
            break
        rejected.append(j)
    return sorted(rejected)


def test_learn_then_test_procedures_match_their_definitions():
    rng = np.random.default_rng(1)
    for _ in range(200):
        p = rng.uniform(0, 0.2, size=rng.integers(1, 30)) ** rng.uniform(1, 3)
        delta = 0.1
        bonferroni = learn_then_test(p, delta, "bonferroni")
        holm = learn_then_test(p, delta, "holm")
        fixed = learn_then_test(p, delta, "fixed_sequence")
        assert bonferroni.tolist() == np.flatnonzero(p <= delta / len(p)).tolist()
        assert holm.tolist() == _holm(p, delta)
        assert set(bonferroni) <= set(holm)
        first_failure = np.flatnonzero(p > delta)
        assert fixed.tolist() == list(range(first_failure[0] if len(first_failure) else len(p)))


@pytest.mark.slow
@pytest.mark.parametrize("method", ["bonferroni", "holm", "fixed_sequence"])
def test_learn_then_test_controls_the_family_wise_error(method):
    """All 20 nulls true, valid (uniform) p-values: some rejection happens with probability <= δ."""
    rng = np.random.default_rng(2)
    delta, sims = 0.1, 4000
    errors = sum(len(learn_then_test(rng.uniform(size=20), delta, method)) > 0 for _ in range(sims))
    assert errors / sims <= delta + 3 * np.sqrt(delta * (1 - delta) / sims)


def test_learn_then_test_refuses_bad_input():
    with pytest.raises(ValueError, match="method"):
        learn_then_test([0.1], 0.1, "bh")
    with pytest.raises(ValueError, match="non-empty"):
        learn_then_test([], 0.1)
    with pytest.raises(ValueError, match="NaN"):
        learn_then_test([0.1, np.nan], 0.1)
    with pytest.raises(ValueError, match="delta"):
        learn_then_test([0.1], 0.0)


@pytest.mark.slow
@pytest.mark.parametrize("method", ["bonferroni", "holm"])
def test_learn_then_test_picks_a_lambda_whose_true_risk_is_at_most_alpha(method):
    """Losses 1{x > λ}, x ~ U(0, 1): R(λ) = 1 − λ. Picking the smallest λ that LTT certifies, the
    true risk exceeds α in at most a δ share of 1,000 calibration draws."""
    rng = np.random.default_rng(3)
    lambdas, alpha, delta, n = np.linspace(0, 1, 50), 0.3, 0.1, 200
    failures = 0
    for _ in range(1000):
        x = rng.uniform(size=n)
        risks = (x[:, None] > lambdas[None, :]).mean(axis=0)
        valid = learn_then_test(hb_p_value(risks, n, alpha), delta, method)
        chosen = lambdas[valid.min()]
        failures += (1 - chosen) > alpha
    assert failures / 1000 <= delta


def test_bentkus_count_is_rounded_before_the_ceiling():
    # 1000 losses of 0.1 summed in float64 give n·r̂ = 100.00000000000001; ⌈·⌉ must still be 100.
    risk_hat = np.full(1000, 0.1).sum() / 1000
    assert 1000 * risk_hat > 100
    for alpha in (0.11, 0.12, 0.13):
        assert hb_p_value(risk_hat, 1000, alpha) == hb_p_value(0.1, 1000, alpha)
    assert hb_ucb(risk_hat, 1000, 0.05) == pytest.approx(hb_ucb(0.1, 1000, 0.05), abs=1e-12)


def test_a_real_fractional_part_of_the_count_is_kept_at_large_n():
    """A fixed 1e-9 relative snap dropped 40,000 + 1e-5 over n = 200,000 to 40,000: a Bentkus count one too
    small, and a p-value of 0.0503 (not certified at 0.05) reported as 0.0496."""
    from scipy.stats import binom

    n, loss_sum, alpha = 200_000, 40_000 + 1e-5, 0.20187785
    exact = np.e * binom.cdf(40_001, n, alpha)
    assert exact > 0.05
    assert float(hb_p_value(loss_sum / n, n, alpha)) == pytest.approx(min(exact, 1.0), rel=1e-9)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        (lambda: hb_p_value("0.1", 100, 0.2), TypeError, "risk_hat must be real numbers"),
        (lambda: hb_p_value(0.1, 100, "0.2"), TypeError, "alpha must be a number in"),
        (lambda: learn_then_test([True, False], 0.05, "bonferroni"), TypeError, "p_values must be real numbers"),
        (lambda: hb_ucb(0.1, float("nan"), 0.05), TypeError, "n must be an integer"),
    ],
)
def test_strings_and_flags_are_refused_not_read_as_numbers(call, error, message):
    """ "0.2" was read as 0.2 and [True, False] as p-values 1 and 0; n = NaN failed converting to int."""
    with pytest.raises(error, match=message):
        call()
