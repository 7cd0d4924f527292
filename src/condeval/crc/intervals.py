"""Calibrated CLIPScore intervals (Section 5): a truncated Gaussian per pair, λ by Learn-then-Test.

Each pair's attention-mask samples give an empirical mean μ and standard deviation σ. The interval
is the truncated Gaussian with mean μ and scale λσ on [lower, upper]; its mean μ̂(λ) and standard
deviation σ̂(λ) are what Eq. 11 scores. The risk R(λ) = 1 − ReLU(UPS), UPS the Pearson correlation
of |μ̂(λ) − y| with σ̂(λ) over the calibration pairs, y the human score. α is R(1), the
uncalibrated risk (Eq. 13); every λ on the grid gets the HB p-value of H0: R(λ) > α with n the
number of calibration units, an FWER procedure keeps the λ that reject, and the pick is the one
with the lowest risk (the highest UPS). The unit is the image by default (a judgment set has
several candidates per image), the pair with ``unit="caption"`` (the paper's n).

R(λ) is one correlation over the calibration set, not a mean of bounded per-pair losses, so the HB
p-value gives no guarantee for it (Section 4's needs i.i.d. losses in [0, 1] and their mean); it is
the paper's device, which we follow, and λ̂ is a heuristic choice, not a certified one.
Truncation bounds: the paper does not give them; the official code uses min(μ)/1.8 and max(μ)·1.8
over the calibration pairs (``bounds_factor``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from condeval.core.conformal import unit_index
from condeval.core.io import open_unit, real_array
from condeval.core.risk import hb_p_value, learn_then_test
from condeval.crc.metrics import ups
from condeval.crc.word_risk import UNITS

__all__ = [
    "NoValidLambdaError",
    "truncated_gaussian",
    "truncation_bounds",
    "ups_risk",
    "IntervalCalibration",
    "IntervalRiskControl",
    "IntervalSettings",
    "calibrate_intervals",
    "PAPER_LAMBDAS",
]

PAPER_LAMBDAS = np.linspace(1, 50, 50)  # the official code's grid of σ scales
_MIN_SCALE = 1e-10  # a pair whose samples all agree still gets a (degenerate) distribution


def truncated_gaussian(mean, std, scale: float, lower: float, upper: float, level: float = 0.95):
    """Mean, standard deviation and central ``level`` interval of N(μ, (scale·σ)²) truncated to [lower, upper].

    Returns
    -------
    tuple of ndarray
        ``(mean, std, low, high)``, each shaped like ``mean``.
    """
    from scipy.stats import truncnorm

    mean, std = np.asarray(mean, dtype=float), np.asarray(std, dtype=float)
    sigma = np.maximum(std * scale, _MIN_SCALE)
    a, b = (lower - mean) / sigma, (upper - mean) / sigma
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        low, high = truncnorm.interval(level, a, b, loc=mean, scale=sigma)
        # One pass for both moments: scipy evaluates them element by element, and mean() and std() would each pay it.
        centre, variance = truncnorm.stats(a, b, loc=mean, scale=sigma, moments="mv")
        moments = centre, np.sqrt(variance)
    # A (near-)degenerate pair far outside [lower, upper] (e.g. every masked score 0): scipy gives
    # NaN there; the limit puts all the mass at the nearest bound.
    degenerate = ~(np.isfinite(moments[0]) & np.isfinite(moments[1]) & np.isfinite(low) & np.isfinite(high))
    nearest = np.clip(mean, lower, upper)
    return (
        np.where(degenerate, nearest, moments[0]),
        np.where(degenerate, 0.0, moments[1]),
        np.where(degenerate, nearest, low),
        np.where(degenerate, nearest, high),
    )


def truncation_bounds(means, factor: float = 1.8) -> tuple[float, float]:
    """The official code's truncation interval: min(μ)/factor to max(μ)·factor."""
    means = np.asarray(means, dtype=float)
    return float(means.min() / factor), float(means.max() * factor)


def ups_risk(mean, std, human) -> float:
    """R = 1 − ReLU(UPS) (Eq. 11); a ``ValueError`` when the UPS is undefined (constant errors or σ)."""
    score = ups(mean, std, human)
    if np.isnan(score):
        raise ValueError("the UPS is undefined: the errors |mean - human| or the std are constant over the pairs")
    return 1.0 - max(score, 0.0)


def _check_interval_settings(delta, lambdas, bounds_factor, images, unit: str, n_pairs: int) -> tuple[np.ndarray, int]:
    """The grid as an array and the number of units, after checking each setting by name."""
    open_unit(delta, "delta")
    lambdas = real_array(lambdas, "lambdas")
    if lambdas.ndim != 1 or lambdas.size == 0 or not (np.isfinite(lambdas) & (lambdas > 0)).all():
        raise ValueError(f"lambdas must be a non-empty 1-D grid of positive finite sigma scales; got {lambdas!r}")
    if not (
        isinstance(bounds_factor, (int, float, np.integer, np.floating))
        and np.isfinite(bounds_factor)
        and bounds_factor > 1.0
    ):
        raise ValueError(
            f"bounds_factor must be a finite number > 1 (the truncation interval must contain every mean); got {bounds_factor!r}"
        )
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}; got {unit!r}")
    if unit == "caption":
        return lambdas, n_pairs
    if images is None:
        raise ValueError(
            "unit='image' needs each pair's image (images=...); unit='caption' is the paper's pair-level reading"
        )
    if np.ndim(images) != 1 or len(images) != n_pairs:
        raise ValueError(f"images must give one image per pair (1-D, {n_pairs} of them); got shape {np.shape(images)}")
    return lambdas, int(unit_index(images, "images", row="pair").max()) + 1


class NoValidLambdaError(ValueError):
    """Learn-then-Test rejected no λ on the grid: no σ scale is shown to beat the uncalibrated risk."""


@dataclass
class IntervalCalibration:
    """The outcome of :func:`calibrate_intervals` (everything a report or a test needs)."""

    lambdas: np.ndarray
    risks: np.ndarray
    p_values: np.ndarray
    valid: np.ndarray  # indices of the λ that control the risk
    alpha: float
    lambda_hat: float
    bounds: tuple[float, float]


@dataclass(frozen=True, eq=False)
class IntervalSettings:
    """How :func:`calibrate_intervals` picks λ̂: the FWER, the grid of σ scales, the procedure, the truncation and
    the unit n counts (checked by :func:`calibrate_intervals`, each by name).

    Parameters
    ----------
    delta : float, default 0.05
        FWER of the Learn-then-Test step.
    lambdas : array_like, default :data:`PAPER_LAMBDAS`
        The grid Λ of σ scales (the paper's: 1, 2, …, 50).
    method : {"bonferroni", "holm", "fixed_sequence"}, default "bonferroni"
        The FWER procedure (the paper: Bonferroni).
    bounds_factor : float, default 1.8
        The truncation interval is min(μ)/factor to max(μ)·factor (> 1, the official code's 1.8).
    unit : {"image", "caption"}, default "image"
        What n in the HB p-value counts: images (default) or pairs (the paper's).
    """

    delta: float = 0.05
    lambdas: object = field(default_factory=lambda: PAPER_LAMBDAS)
    method: str = "bonferroni"
    bounds_factor: float = 1.8
    unit: str = "image"


def calibrate_intervals(
    mean, std, human, settings: IntervalSettings = IntervalSettings(), *, images=None
) -> IntervalCalibration:
    """λ̂, the scale of σ whose intervals' uncertainty best tracks the error against human scores.

    Parameters
    ----------
    mean, std : array_like
        Per calibration pair: mean and standard deviation of its masked CLIPScores.
    human : array_like
        Per pair: the human score.
    settings : IntervalSettings
        δ, the grid of σ scales, the FWER procedure, the truncation factor and the unit.
    images : array_like, optional
        Per pair, its image; required with ``settings.unit="image"``.

    Returns
    -------
    IntervalCalibration
        The grid, each λ's risk and p-value, the λ that control the risk (``valid``), α (1 − the
        uncalibrated UPS), λ̂ and the truncation bounds.

    Raises
    ------
    ValueError
        On NaN or mismatched lengths, fewer than 3 pairs, δ outside (0, 1), a λ that is not a
        positive finite number, ``bounds_factor`` ≤ 1 or not finite, an unknown unit or missing
        ``images`` (each named); :class:`NoValidLambdaError` (a
        ``ValueError``) when no λ on the grid rejects, or when the uncalibrated UPS ≤ 0 (α would be
        1: nothing to improve on).

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.crc.intervals import IntervalSettings, calibrate_intervals
    >>> rng = np.random.default_rng(0)
    >>> human = rng.uniform(0.3, 1.0, 300)                     # 300 pairs, two per image
    >>> error = rng.uniform(0.02, 0.3, 300)                    # how far each pair's mean strays
    >>> mean = np.clip(human + rng.normal(0, error), 0.05, None)
    >>> std = error**2                                         # the samples' spread tracks it, not linearly
    >>> settings = IntervalSettings(lambdas=[1, 4, 16, 64, 256])
    >>> result = calibrate_intervals(mean, std, human, settings, images=np.arange(300) // 2)
    >>> round(result.alpha, 3), result.lambdas[result.valid].tolist(), result.lambda_hat
    (0.562, [16.0, 64.0], 64.0)
    >>> round(float(result.risks[result.valid].min()), 3)       # R(λ̂) = 1 - UPS, below α = R(1)
    0.263
    """
    delta, method, unit = settings.delta, settings.method, settings.unit
    mean, std, human = _check_pairs(mean, std, human)
    lambdas, n_units = _check_interval_settings(
        delta, settings.lambdas, settings.bounds_factor, images, unit, len(mean)
    )
    lower, upper = truncation_bounds(mean, settings.bounds_factor)
    risks = np.array([ups_risk(*truncated_gaussian(mean, std, lam, lower, upper)[:2], human) for lam in lambdas])
    alpha = ups_risk(*truncated_gaussian(mean, std, 1.0, lower, upper)[:2], human)
    if alpha >= 1.0:
        raise NoValidLambdaError(
            "the uncalibrated UPS is <= 0, so alpha = R(1) = 1: there is no risk level to improve on"
        )
    p_values = hb_p_value(risks, n_units, alpha)
    valid = learn_then_test(p_values, delta, method)
    if len(valid) == 0:
        raise NoValidLambdaError(
            f"no lambda on the grid controls the risk below alpha = {alpha:.4f} at delta = {delta} ({n_units} {unit}s)"
        )
    best = valid[np.argmin(risks[valid])]
    return IntervalCalibration(lambdas, risks, p_values, valid, alpha, float(lambdas[best]), (lower, upper))


def _check_pairs(mean, std, human) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The calibration pairs' mean, std and human score as real 1-D arrays, each refusal naming its array."""
    mean, std, human = (real_array(values, name) for name, values in (("mean", mean), ("std", std), ("human", human)))
    if not mean.shape == std.shape == human.shape or mean.ndim != 1:
        raise ValueError(f"mean, std and human must be 1-D of one length; got {mean.shape}, {std.shape}, {human.shape}")
    if len(mean) < 3:
        raise ValueError(f"calibrating intervals needs at least 3 pairs for a correlation; got {len(mean)}")
    for name, values in (("mean", mean), ("std", std), ("human", human)):
        if not np.isfinite(values).all():
            raise ValueError(
                f"{name} contains NaN or inf (first at pair {int(np.flatnonzero(~np.isfinite(values))[0])})"
            )
    if (std < 0).any():
        raise ValueError(f"std must be >= 0 (a standard deviation); pair {int(np.flatnonzero(std < 0)[0])} is negative")
    if (mean < 0).any():  # the truncation interval [min / f, max * f] holds every mean only when none is < 0
        raise ValueError(
            f"mean must be >= 0 (CLIPScores; the truncation interval scales the extreme means); pair "
            f"{int(np.flatnonzero(mean < 0)[0])} is {float(mean[mean < 0][0])}"
        )
    return mean, std, human


class IntervalRiskControl:
    """Calibrated CLIPScore intervals (Section 5, Table 5) in MAPIE's life cycle: :meth:`calibrate` on
    pairs with human scores, then :meth:`predict` the intervals of new pairs.

    Parameters
    ----------
    delta : float in (0, 1), default 0.05
        FWER of the Learn-then-Test step.
    lambdas : array-like, default :data:`PAPER_LAMBDAS`
        The grid of σ scales.
    method : {"bonferroni", "holm", "fixed_sequence"}, default "bonferroni"
        The FWER procedure (the paper's: Bonferroni).
    bounds_factor : float > 1, default 1.8
        The truncation interval is min(μ)/factor to max(μ)·factor over the calibration pairs.
    unit : {"image", "caption"}, default "image"
        What n counts: images, or pairs (the paper's).

    Attributes
    ----------
    calibration_ : IntervalCalibration
        Every λ's risk and p-value, α, λ̂ and the truncation bounds (:func:`calibrate_intervals`).

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.crc import IntervalRiskControl
    >>> rng = np.random.default_rng(0)
    >>> human = rng.integers(1, 5, 400).astype(float)          # human scores 1-4
    >>> std = rng.uniform(0.02, 0.3, 400)
    >>> mean = np.clip(0.35 * human + rng.normal(0, 3 * std), 0.05, 2.4)   # noisier where std is larger
    >>> control = IntervalRiskControl(unit="caption").calibrate(mean, std, human)
    >>> bool(control.calibration_.lambda_hat > 1)              # the raw spread understates the error
    True
    >>> centre, spread, low, high = control.predict(mean[:3], std[:3])
    >>> bool((low <= centre).all() and (centre <= high).all())
    True
    """

    def __init__(
        self,
        delta: float = 0.05,
        lambdas=PAPER_LAMBDAS,
        method: str = "bonferroni",
        bounds_factor: float = 1.8,
        unit: str = "image",
    ):
        self.delta, self.lambdas, self.method = delta, lambdas, method
        self.bounds_factor, self.unit = bounds_factor, unit

    def calibrate(self, mean, std, human, images=None) -> IntervalRiskControl:
        """Pick λ̂ on calibration pairs (:func:`calibrate_intervals`; its errors, :class:`NoValidLambdaError`
        included). ``mean`` and ``std`` are each pair's masked CLIPScores' mean and standard deviation,
        ``human`` its human score, ``images`` its image (required with ``unit="image"``)."""
        settings = IntervalSettings(self.delta, self.lambdas, self.method, self.bounds_factor, self.unit)
        self.calibration_ = calibrate_intervals(mean, std, human, settings, images=images)
        return self

    def predict(self, mean, std, level: float = 0.95) -> tuple[np.ndarray, ...]:
        """Each pair's calibrated interval: ``(mean, std, low, high)`` of its truncated Gaussian at λ̂."""
        if not hasattr(self, "calibration_"):
            raise ValueError("IntervalRiskControl is not calibrated: call calibrate(mean, std, human, images) first")
        lower, upper = self.calibration_.bounds
        return truncated_gaussian(mean, std, self.calibration_.lambda_hat, lower, upper, level)
