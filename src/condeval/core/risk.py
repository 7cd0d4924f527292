"""Risk control with the Hoeffding–Bentkus bound (Bates et al. 2021; Learn-then-Test).

The lower-tail bound of an empirical risk r̂ over n i.i.d. losses in [0, 1] with mean R is
g(r̂; R) = min(exp(−n·h1(min(r̂, R), R)), e·P(Bin(n, R) ≤ ⌈n r̂⌉)), h1 the binary KL divergence
(the CLIPScore paper, Propositions 2 and 3). MAPIE implements it as the p-value of H0: R > α
(``compute_hoeffding_bentkus_p_value``) and implements the family-wise error procedures of
Learn-then-Test (``control_fwer``); this module uses both as they are and adds what MAPIE lacks,
the upper confidence bound R̂⁺ = sup{R : g(r̂; R) ≥ δ}, solved on the same function.

Two errors of widely copied bound code are not repeated here: the Hoeffding term uses
min(r̂, R) (so it binds whenever r̂ < R, not never), and the Bentkus term uses the ceiling ⌈n r̂⌉.
MAPIE takes that ceiling of n·r̂ as float64 computes it, and a mean accumulated in float64 lands
just above an integer (1000 losses of 0.1: n·r̂ = 100.00000000000001), where ⌈·⌉ adds one; n·r̂
is snapped to the nearest integer first when within the rounding error of a float64 sum of n terms
(4·n·ε·|n·r̂|, ε the float64 epsilon), so the bound is Eq. 7's there and a real fractional part
(40,000 + 1e-5 over n = 200,000) is kept.
"""

from __future__ import annotations

import numpy as np

from condeval.core.io import check_integer, open_unit, real_array

__all__ = ["hb_p_value", "hb_ucb", "learn_then_test", "FWER_METHODS"]

FWER_METHODS = {"bonferroni": "bonferroni", "holm": "bonferroni_holm", "fixed_sequence": "fixed_sequence"}
# The UCB is sought below 1: at R = 1 the Hoeffding exponent has log(0).
_R_MAX = 1.0 - 1e-12


def _check_risks(risk_hat) -> np.ndarray:
    risks = real_array(risk_hat, "risk_hat")
    if np.isnan(risks).any():
        raise ValueError("empirical risk contains NaN")
    if ((risks < 0) | (risks > 1)).any():
        bad = risks[(risks < 0) | (risks > 1)].flat[0]
        raise ValueError(f"empirical risk must lie in [0, 1] (losses bounded by 1); got {bad!r}")
    return risks


def hb_p_value(risk_hat, n: int, alpha: float) -> np.ndarray:
    """Hoeffding–Bentkus p-value of H0: R > α given the empirical risk over n points.

    Parameters
    ----------
    risk_hat : float or array_like
        Empirical risks in [0, 1] (one per λ, say).
    n : int
        Number of i.i.d. losses each empirical risk averages.
    alpha : float
        Risk tolerance in (0, 1).

    Returns
    -------
    ndarray
        p-values, shaped like ``risk_hat``. A small value rejects H0: the risk is controlled.
    """
    from mapie.risk_control.methods import compute_hoeffding_bentkus_p_value
    from scipy.stats import binom

    risks, n, alpha = _check_risks(risk_hat), check_integer(n, "n", least=1), open_unit(alpha, "alpha")
    flat = compute_hoeffding_bentkus_p_value(risks.reshape(-1), n, alpha)[:, 0]
    # MAPIE's Bentkus count ⌈n·r̂⌉ can be one too many (module docstring); the exact count never
    # exceeds it, so its tail is the smaller one and the minimum is the exact bound.
    exact_bentkus = np.e * binom.cdf(_exact_ceiling(n * risks.reshape(-1), n), n, alpha)
    return np.minimum(np.minimum(flat, exact_bentkus), 1.0).reshape(risks.shape)


def _exact_ceiling(counts: np.ndarray, n: int) -> np.ndarray:
    """⌈x⌉ of sums of ``n`` terms computed in float64, after snapping those within their rounding error
    (4·n·ε·|x|, the bound of recursive summation with the mean's division and product) of an integer."""
    nearest = np.round(counts)
    tolerance = 4.0 * n * np.finfo(np.float64).eps * np.abs(counts)
    snapped = np.where(np.abs(counts - nearest) <= tolerance, nearest, counts)
    return np.ceil(snapped)


def hb_ucb(risk_hat, n: int, delta: float) -> np.ndarray:
    """(1 − δ) Hoeffding–Bentkus upper confidence bound of the risk, R̂⁺ = sup{R : g(r̂; R) ≥ δ}.

    g(r̂; R) is the p-value :func:`hb_p_value` at α = R, non-increasing in R, so R̂⁺ is the root of
    g(r̂; R) = δ on [r̂, 1), found by Brent's method (to 1e-12).

    Parameters
    ----------
    risk_hat : float or array_like
        Empirical risks in [0, 1].
    n : int
        Number of i.i.d. losses each empirical risk averages (n >= 1).
    delta : float
        Error rate in (0, 1): P(R ≤ R̂⁺) ≥ 1 − δ.

    Returns
    -------
    ndarray
        Upper bounds, shaped like ``risk_hat``.

    Raises
    ------
    ValueError
        On a risk outside [0, 1] or NaN, n < 1, or δ outside (0, 1).
    """
    risks, n, delta = _check_risks(risk_hat), check_integer(n, "n", least=1), open_unit(delta, "delta")
    unique, inverse = np.unique(risks, return_inverse=True)
    bounds = np.array([_ucb_one(r, n, delta) for r in unique])
    return bounds[inverse].reshape(risks.shape)


def _ucb_one(risk: float, n: int, delta: float) -> float:
    def excess(bound: float) -> float:
        return float(hb_p_value(risk, n, bound)) - delta

    if risk >= _R_MAX or excess(_R_MAX) >= 0:
        return 1.0
    # At R = r̂ the p-value is 1 (the Hoeffding term is exp(0)), above any δ < 1.
    from scipy.optimize import brentq  # here, not at import: the crc rules import this package at parse time

    return brentq(excess, max(risk, 1e-15), _R_MAX, xtol=1e-12)


def learn_then_test(p_values, delta: float, method: str = "bonferroni") -> np.ndarray:
    """Indices of the hypotheses H0_j: R(λ_j) > α rejected with family-wise error ≤ δ.

    Parameters
    ----------
    p_values : array_like
        One p-value per λ (e.g. from :func:`hb_p_value`).
    delta : float
        Family-wise error rate in (0, 1).
    method : {"bonferroni", "holm", "fixed_sequence"}
        Bonferroni tests each at δ/N; Holm is its step-down refinement (never fewer rejections);
        fixed-sequence tests in the given order at δ and stops at the first failure, so order the
        λ from the one most likely to control the risk.

    Returns
    -------
    ndarray of int
        Sorted indices of the rejected hypotheses: the λ that control the risk.
    """
    from mapie.risk_control import control_fwer

    if method not in FWER_METHODS:
        raise ValueError(f"method must be one of {sorted(FWER_METHODS)}; got {method!r}")
    p = real_array(p_values, "p_values")
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"p_values must be a non-empty 1-D array; got shape {p.shape}")
    if np.isnan(p).any() or ((p < 0) | (p > 1)).any():
        raise ValueError("p_values must lie in [0, 1] and contain no NaN")
    delta = open_unit(delta, "delta")
    return np.asarray(control_fwer(p, delta, FWER_METHODS[method]), dtype=int)
