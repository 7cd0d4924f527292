"""Shared conformal core: the split-conformal quantile, the empirical quantile, and coverage bookkeeping.

Every track takes its quantiles of scores from here, by one of two rules: a conformal threshold
(CReL's γ) from :func:`conformal_quantile`, the ⌈(n+1)(1−α)⌉-th order statistic, which carries the
finite-sample guarantee; a descriptive quantile (the trust score's P95-real thresholds, bootstrap
intervals, α-Precision's radii) from :func:`empirical_quantile`, linear interpolation between order
statistics, as the papers compute them. No other module computes a quantile of scores.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from condeval.core.io import check_integer, open_unit, real_array

__all__ = [
    "BOOTSTRAP",
    "unit_bootstrap_interval",
    "mean_interval",
    "unit_mean_interval",
    "resampled_rows",
    "conformal_rank",
    "conformal_quantile",
    "empirical_quantile",
    "coverage_bounds",
    "empirical_coverage",
    "unit_index",
    "unit_scores",
]


def conformal_rank(n: int, alpha: float) -> int:
    """1-based rank ⌈(n+1)(1−α)⌉ of the conformal order statistic.

    Parameters
    ----------
    n : int
        Number of calibration scores.
    alpha : float
        Miscoverage level in (0, 1).

    Returns
    -------
    int
        The rank k such that the k-th smallest score is the threshold.

    Raises
    ------
    ValueError
        If α ∉ (0, 1) or k > n, i.e. there are too few calibration points for
        the requested α (at least ⌈1/α⌉ − 1 are needed).
    """
    alpha = open_unit(alpha, "alpha")
    if check_integer(n, "n") < 1:
        raise ValueError("conformal calibration needs at least one score; got 0")
    # round() guards against (n+1)(1-α) landing a hair above an integer in floating point; the rank is
    # at least 1 for every α < 1 (rounding would make it 0 within 1e-9 of α = 1)
    product = (n + 1) * (1.0 - alpha)
    rank = max(1, math.ceil(round(product, 9)))
    if rank > n:
        needed = math.ceil(round(1.0 / alpha, 9)) - 1
        raise ValueError(
            f"too few calibration points for alpha={alpha}: rank ⌈(n+1)(1-α)⌉={rank} exceeds "
            f"n={n}; at least {needed} points are needed"
        )
    return rank


def conformal_quantile(scores, alpha: float) -> float:
    """Split-conformal threshold: the ⌈(n+1)(1−α)⌉-th smallest score.

    No interpolation is done (unlike ``np.quantile``/``torch.quantile``), so
    ``P(score_{n+1} ≤ q) ≥ 1 − α`` holds for exchangeable scores, and with
    continuous scores the coverage is at most ``1 − α + 1/(n+1)``.

    Parameters
    ----------
    scores : array_like, shape (n,)
        Non-conformity scores of the calibration points.
    alpha : float
        Miscoverage level in (0, 1).

    Returns
    -------
    float
        The conformal quantile.

    Raises
    ------
    TypeError
        Scores that are not numbers (strings, bools).
    ValueError
        If α ∉ (0, 1), the scores are not 1-D or contain NaN, or the rank exceeds n.

    Examples
    --------
    >>> conformal_quantile([0.3, 0.1, 0.2, 0.5, 0.4, 0.9, 0.7, 0.6, 0.8, 1.0], 0.2)
    0.9
    """
    # 1-D: a flattened (n, k) array would calibrate n·k scores as one sample
    values = real_array(scores, "scores", ndim=1)
    if np.isnan(values).any():
        bad = int(np.flatnonzero(np.isnan(values))[0])
        raise ValueError(f"scores contain NaN (first at index {bad})")
    rank = conformal_rank(values.size, alpha)
    return float(np.partition(values, rank - 1)[rank - 1])


#: The bootstrap behind the results' intervals: 95% percentile intervals over the units, 2,000 resamples.
BOOTSTRAP = {"confidence_level": 0.95, "n_resamples": 2000, "method": "percentile"}


def unit_bootstrap_interval(statistic, n_units: int, seed: int = 0) -> tuple[float, float]:
    """The 95% bootstrap interval (:data:`BOOTSTRAP`, ``scipy.stats.bootstrap``) of a statistic of
    ``n_units`` exchangeable units drawn with replacement (an item, or an image with all its captions).

    ``statistic(counts)`` reads how often each unit was drawn, (n_units,) ints summing to ``n_units``
    (``np.ones(n_units)`` is the data as it is), so a mean over rows of several units is a weighted
    mean. (NaN, NaN) below two units, or where the statistic of a resample is NaN (undefined there, as a
    correlation of a constant): an interval that leaves those resamples out would be too narrow.

    Examples
    --------
    >>> import numpy as np
    >>> losses = np.array([0.0, 0.1, 0.2, 0.3, 0.9])            # one per image
    >>> low, high = unit_bootstrap_interval(lambda counts: np.average(losses, weights=counts), len(losses))
    >>> bool(low < losses.mean() < high), round(low, 2) >= 0.0
    (True, True)
    """
    from scipy.stats import DegenerateDataWarning, bootstrap

    n_units = check_integer(n_units, "n_units", least=0)
    if n_units < 2:
        return float("nan"), float("nan")

    def resampled(units: np.ndarray, axis: int = -1) -> np.ndarray:
        # a batch of resamples (…, n_units) → each one's counts, in one bincount over offset unit ids
        draws = np.moveaxis(units, axis, -1)
        flat = draws.reshape(-1, n_units)
        offsets = n_units * np.arange(len(flat))[:, None]
        counts = np.bincount((flat + offsets).ravel(), minlength=flat.size).reshape(flat.shape)
        return np.array([statistic(row) for row in counts], dtype=float).reshape(draws.shape[:-1])

    # batch: 100 resamples of the units in memory at a time, not all 2,000 (the same draws either way);
    # vectorized: scipy hands over a batch at once rather than calling a wrapper per resample
    with warnings.catch_warnings():
        # scipy warns and answers NaN when a resample's statistic is NaN; that answer is the documented one
        warnings.simplefilter("ignore", DegenerateDataWarning)
        interval = bootstrap(
            (np.arange(n_units),), resampled, vectorized=True, batch=100, rng=np.random.default_rng(seed), **BOOTSTRAP
        ).confidence_interval
    return float(interval.low), float(interval.high)


def mean_interval(values, weights=None, seed: int = 0) -> tuple[float, float]:
    """The 95% interval of :func:`unit_bootstrap_interval` for the mean of per-unit ``values``, each unit
    weighted by its ``weights`` (default 1) and counted as often as it is drawn. (NaN, NaN) below two units.

    Examples
    --------
    >>> low, high = mean_interval([0.2, 0.4, 0.9, 0.1, 0.6])
    >>> bool(low < 0.44 < high)
    True
    """
    values = np.asarray(values, dtype=float)
    weights = np.ones_like(values) if weights is None else np.asarray(weights, dtype=float)

    def mean(counts: np.ndarray) -> float:
        drawn = counts * weights
        total = drawn.sum()
        return float(drawn @ values / total) if total > 0 else float("nan")

    return unit_bootstrap_interval(mean, len(values), seed)


def unit_mean_interval(values, units=None, seed: int = 0) -> tuple[float, float]:
    """The 95% interval of :func:`mean_interval` for the mean of per-row ``values`` whose rows come in
    exchangeable ``units`` (one id per row: a condition's samples, a well's sites), each unit drawn whole
    with all its rows; every row its own unit without ``units``.

    Examples
    --------
    >>> correct = [1, 1, 0, 1, 0, 0, 1, 1]
    >>> low, high = unit_mean_interval(correct, units=["a", "a", "b", "b", "c", "c", "d", "d"])
    >>> bool(low <= 0.625 <= high)
    True
    """
    values = np.asarray(values, dtype=float).ravel()
    if units is None:
        return mean_interval(values, seed=seed)
    unit_of_row = unit_index(units)
    if len(unit_of_row) != len(values):
        raise ValueError(f"units must hold one id per value; got {len(unit_of_row)} for {len(values)}")
    sizes = np.bincount(unit_of_row).astype(float)
    return mean_interval(np.bincount(unit_of_row, weights=values) / sizes, weights=sizes, seed=seed)


def resampled_rows(counts: np.ndarray, unit_of_row: np.ndarray) -> np.ndarray:
    """The rows of one resample of :func:`unit_bootstrap_interval`'s units: each row of a unit drawn k
    times, k times, in the rows' order.

    Examples
    --------
    >>> import numpy as np
    >>> image_of_caption = np.array([0, 0, 1, 2])                  # image 0 has two captions
    >>> resampled_rows(np.array([2, 0, 1]), image_of_caption)      # image 0 drawn twice, image 1 never
    array([0, 0, 1, 1, 3])
    """
    return np.repeat(np.arange(len(unit_of_row)), counts[unit_of_row])


def empirical_quantile(values, level):
    """The ``level`` quantile of ``values``, interpolated linearly between the order statistics around it
    (NumPy's default, the ``"linear"`` method): the P95 of the P95-real rule at ``level=0.95``.

    Unlike :func:`conformal_quantile` it promises no coverage of a new score; for n exchangeable rows it
    covers about ``(1 + (n − 1)·level) / (n + 1)`` of a fresh one.

    Parameters
    ----------
    values : array_like, shape (n,)
        Finite real numbers, n ≥ 1.
    level : float or array_like of float in [0, 1]
        One level, or several (an array of quantiles comes back).

    Returns
    -------
    float or ndarray
        The quantile(s).

    Raises
    ------
    TypeError
        Values that are not numbers.
    ValueError
        Empty, multi-dimensional or non-finite values, or a level outside [0, 1] (95 for 0.95 included).

    Examples
    --------
    >>> empirical_quantile([1.0, 2.0, 3.0, 4.0, 5.0], 0.95)
    4.8
    """
    values = real_array(values, "values", ndim=1)
    if values.size == 0:
        raise ValueError("values is empty: a quantile needs at least one value")
    if not np.isfinite(values).all():
        raise ValueError(
            f"values hold NaN or infinite entries (first at index {int(np.flatnonzero(~np.isfinite(values))[0])})"
        )
    levels = np.asarray(level)
    if levels.dtype.kind not in "iuf" or levels.dtype == bool or not ((levels >= 0) & (levels <= 1)).all():
        raise ValueError(f"level must be a fraction in [0, 1] (0.95 for the P95); got {level!r}")
    quantiles = np.quantile(values, levels, method="linear")
    return float(quantiles) if levels.ndim == 0 else quantiles


def coverage_bounds(n: int, alpha: float) -> tuple[float, float]:
    """Marginal coverage interval ``[1−α, 1−α + 1/(n+1)]`` of split conformal.

    The upper end assumes continuous (tie-free) scores; it is at most 1.
    """
    alpha = open_unit(alpha, "alpha")
    check_integer(n, "n", least=1)
    return 1.0 - alpha, min(1.0, 1.0 - alpha + 1.0 / (n + 1))


def empirical_coverage(test_scores, threshold: float) -> float:
    """Fraction of test scores at or below ``threshold``."""
    values = np.asarray(test_scores, dtype=np.float64).ravel()
    if values.size == 0:
        raise ValueError("empirical_coverage needs at least one test score")
    return float(np.mean(values <= threshold))


def unit_index(ids, name: str = "units", row: str = "row") -> np.ndarray:
    """Each ``row``'s unit as 0..n_units−1 (sorted ids), whatever ids ``ids`` holds.

    A missing id (None, NaN) or ids of types that do not sort together are refused, naming ``name``
    and the first such ``row``: a missing id must not silently become a unit of its own.
    """
    if isinstance(ids, (list, tuple)):
        kinds = {"str" if isinstance(v, (str, np.str_)) else "other" for v in ids}
        if len(kinds) > 1:  # numpy would turn them all to str: id 1 and id "1" one unit
            raise TypeError(f"{name} must hold ids of one sortable type; got str ids beside others")
    ids = np.asarray(ids)
    missing = np.isnan(ids) if ids.dtype.kind == "f" else None
    if ids.dtype == object:
        missing = np.array([v is None or (isinstance(v, float) and v != v) for v in ids.ravel()], dtype=bool)
    if missing is not None and missing.any():
        raise ValueError(f"{name} has a missing id at {row} {int(np.flatnonzero(missing)[0])}: every {row} needs one")
    try:
        return np.unique(ids, return_inverse=True)[1].reshape(-1)
    except TypeError as error:
        raise TypeError(f"{name} must hold ids of one sortable type; {error}") from None


def unit_scores(scores, units, name: str = "units") -> np.ndarray:
    """The largest score of each exchangeable unit (units in sorted order).

    Rows of one unit (several outputs of one condition) are not exchangeable with each other, but
    units are: calibrating on the units' maxima bounds the chance that *every* row of a new unit is
    covered, ``P(max score ≤ q) ≥ 1 − α``, and so each of its rows.

    Parameters
    ----------
    scores : array_like, shape (n,)
    units : array_like, shape (n,)
        The unit of each row (any sortable ids; None or NaN refused, :func:`unit_index`).
    name : str, default "units"
        The argument's name in error messages (``groups`` in ``CReL.calibrate``).

    Returns
    -------
    ndarray, shape (n_units,)
    """
    values, units = np.asarray(scores, dtype=np.float64).ravel(), np.asarray(units)
    if units.shape != values.shape:
        raise ValueError(f"{name} must hold one id per score; got {units.shape} for {values.shape}")
    unit_of_row = unit_index(units, name)
    maxima = np.full(int(unit_of_row.max(initial=-1)) + 1, -np.inf)
    np.maximum.at(maxima, unit_of_row, values)
    return maxima
