"""Risk-controlled word-error sets (Section 4.2 of the CLIPScore paper).

Each word of a caption has a score f_v (Eq. 3); the set S_λ(x) flags the words with f_v > λ.
The risk of a caption is the FDR of its set (multi-class benchmarks: FOIL-it, FOIL-nocaps) or its
FPR (multi-label: Rich-HF), so every caption's loss lies in [0, 1].

The unit of exchangeability. The Hoeffding–Bentkus bound needs i.i.d. losses, but an original
caption and its foil share the image and all words but one, and a judgment set has several
candidates per image: their losses are not independent. By default (``unit="image"``) the loss
of an image is the mean loss of its captions (still in [0, 1]), R̂(λ) is the mean over images and
n the number of images, which makes the guarantee hold when images are drawn i.i.d. With
``unit="caption"`` (the paper's reading) R̂ averages captions and n counts them: the guarantee
then assumes independent captions, which these benchmarks do not have.

λ̂ is Eq. 7 evaluated exactly: the smallest λ such that R̂⁺(λ') ≤ α for every λ' ≥ λ. Since
R̂⁺(λ) ≤ α exactly when the HB p-value of H0: R(λ) > α is ≤ δ, and S_λ changes only at the
scores, the risk is swept once over all distinct scores (O(N log N)), the λ are tested from the
largest down by fixed-sequence testing, and no root is searched. The official code instead runs
brentq on R̂⁺(R̂(λ)) − α over λ ∈ [0, 1], which assumes the risk is monotone in λ; the FDR need not be.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from condeval.core.io import open_unit, real_array
from condeval.core.risk import hb_p_value, learn_then_test
from condeval.crc.metrics import caption_index, caption_losses, caption_weights

__all__ = [
    "RISKS",
    "UNITS",
    "WordRiskControl",
    "WordRiskSettings",
    "set_risk_curve",
    "calibrate_threshold",
    "min_calibration_units",
    "check_alphas",
]

RISKS = ("fdr", "fpr")
UNITS = ("image", "caption")


def _check_words(scores, labels, groups) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    scores = real_array(scores, "scores")
    labels = np.asarray(labels)
    groups = np.asarray(groups)
    if scores.ndim != 1 or labels.ndim != 1 or groups.ndim != 1:
        raise ValueError("scores, labels and groups must be 1-D arrays, one entry per word")
    if not len(scores) == len(labels) == len(groups):
        raise ValueError(f"scores, labels and groups differ in length: {len(scores)}, {len(labels)}, {len(groups)}")
    if len(scores) == 0:
        raise ValueError("no words to calibrate on")
    if np.isnan(scores).any():
        raise ValueError(f"scores contain NaN (first at word {int(np.flatnonzero(np.isnan(scores))[0])})")
    if np.isinf(scores).any():
        raise ValueError(f"scores must be finite; word {int(np.flatnonzero(np.isinf(scores))[0])} is infinite")
    if not np.isin(labels, (0, 1)).all():
        raise ValueError("labels must be 0 (correct word) or 1 (error)")
    return scores, labels.astype(np.int64), caption_index(groups)


def set_risk_curve(
    scores, labels, groups, risk: str = "fdr", grid=None, *, images=None
) -> tuple[np.ndarray, np.ndarray, int]:
    """Empirical risk R̂(λ) of S_λ = {words with score > λ} at every λ where S_λ changes (or on a grid).

    Parameters
    ----------
    scores, labels, groups : array_like
        Per word: its error score, 1 if it is an error, and the caption it belongs to.
    risk : {"fdr", "fpr"}
        The per-caption loss.
    grid : int or array_like, optional
        Evaluate at these λ instead (a count: evenly spaced on [0, 1]); see :func:`calibrate_threshold`.
    images : array_like, optional
        Per word, the image of its caption: R̂ is then the mean over images of the mean loss of
        their captions. Without it, R̂ is the mean over captions.

    Returns
    -------
    thresholds : ndarray
        Descending: the largest score (empty sets), each smaller distinct score, and a value just
        below the smallest score (every word flagged); or the grid, descending.
    risks : ndarray
        R̂ at each threshold.
    n_units : int
        The number of units (images, or captions without ``images``) the risks average.

    Examples
    --------
    Two captions of two words; only the first word of caption "c0" is an error:

    >>> from condeval.crc import set_risk_curve
    >>> thresholds, risks, n = set_risk_curve([0.9, 0.2, 0.7, 0.1], [1, 0, 0, 0], ["c0", "c0", "c1", "c1"])
    >>> thresholds.round(2).tolist()          # the largest score (nothing flagged) down to just below the smallest
    [0.9, 0.7, 0.2, 0.1, 0.1]
    >>> risks.tolist(), n                     # flagging the 0.7 word gives "c1" an FDR of 1, so the mean is 0.5
    ([0.0, 0.0, 0.5, 0.75, 0.75], 2)
    """
    if risk not in RISKS:
        raise ValueError(f"risk must be one of {RISKS}; got {risk!r}")
    if grid is not None:
        return _grid_risk_curve(scores, labels, groups, risk, grid, images)
    scores, labels, group = _check_words(scores, labels, groups)
    weight, n_units = caption_weights(group, images)
    n_captions = int(group.max()) + 1
    order = np.lexsort((group, -scores))  # by descending score, ties by caption
    scores, labels, group = scores[order], labels[order], group[order]
    # Each word's caption counts just before and just after it joins the set, in this order.
    by_caption = np.argsort(group, kind="stable")
    errors_after = np.empty(len(scores), dtype=np.int64)
    correct_after = np.empty(len(scores), dtype=np.int64)
    starts = np.searchsorted(group[by_caption], np.arange(n_captions))
    errors_after[by_caption] = _cumsum_within(labels[by_caption], starts)
    correct_after[by_caption] = _cumsum_within(1 - labels[by_caption], starts)
    correct_total = np.bincount(group, weights=1 - labels, minlength=n_captions)[group]
    gain = caption_losses(errors_after, correct_after, correct_total, risk) - caption_losses(
        errors_after - labels, correct_after - (1 - labels), correct_total, risk
    )
    gain = gain * weight[group]
    # Words sharing a score join together: one step of the curve per distinct score.
    distinct, first = np.unique(-scores, return_index=True)
    step = np.add.reduceat(gain, first)
    risks = np.concatenate([[0.0], np.cumsum(step)]) / n_units
    risks = np.clip(risks, 0.0, 1.0)  # only rounding can leave [0, 1]
    thresholds = np.concatenate([-distinct, [np.nextafter(scores[-1], -np.inf)]])
    return thresholds, risks, n_units


def _cumsum_within(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Cumulative sums restarting at each block start (blocks are contiguous)."""
    total = np.cumsum(values)
    offsets = np.concatenate([[0], total[starts[1:] - 1]]) if len(starts) > 1 else np.array([0])
    block = np.searchsorted(starts, np.arange(len(values)), side="right") - 1
    return total - offsets[block]


def min_calibration_units(alpha: float, delta: float) -> int:
    """The fewest units with which any λ controls the risk: the empty set's p-value (1 − α)^n ≤ δ.

    With fewer, :func:`calibrate_threshold` refuses for every input, so a workflow can refuse
    such an α before computing anything.
    """
    alpha, delta = open_unit(alpha, "alpha"), open_unit(delta, "delta")
    return int(np.ceil(np.log(delta) / np.log1p(-alpha) - 1e-9))


def check_alphas(alphas, delta: float, n_units: int, unit: str, source: str, key: str = "crc.words.alphas") -> None:
    """Refuse, naming ``key``, every α for which ``n_units`` calibration units are too few.

    Raises
    ------
    ValueError
        When some α needs more than ``n_units`` units (:func:`min_calibration_units`).
    """
    short = [
        (float(alpha), min_calibration_units(alpha, delta))
        for alpha in alphas
        if min_calibration_units(alpha, delta) > n_units
    ]
    if short:
        needs = ", ".join(f"alpha {alpha:g} needs {needed}" for alpha, needed in short)
        raise ValueError(
            f"config key '{key}': {source} has {n_units} calibration {unit}s, too few at delta {delta:g} ({needs}); "
            "raise alpha or delta, or calibrate on more"
        )


@dataclass(frozen=True, eq=False)
class WordRiskSettings:
    """The guarantee :func:`calibrate_threshold` calibrates for: which risk, at which α and δ, counted in which
    unit, over which candidate λ (checked by :func:`calibrate_threshold`, each by name).

    Parameters
    ----------
    risk : {"fdr", "fpr"}, default "fdr"
        The per-caption FDR (0 for an empty set) or FPR, averaged over the units.
    alpha : float, default 0.2
        Risk tolerance in (0, 1).
    delta : float, default 0.05
        Error rate in (0, 1) of the guarantee.
    unit : {"image", "caption"}, default "image"
        The unit of exchangeability (module docstring): "image" averages each image's captions and counts
        images; "caption" (the paper's reading) counts captions as independent.
    grid : int or array_like, optional
        Candidate λ: every distinct score (default, exact), ``grid`` evenly spaced values on
        [0, 1] (f_v is a sigmoid), or the given values. Eq. 7 is then taken over the grid, as the
        official code's search over λ ∈ [0, 1] is; sorting grid indices instead of raw scores
        makes it about twice as fast on 10⁶ words.
    """

    risk: str = "fdr"
    alpha: float = 0.2
    delta: float = 0.05
    unit: str = "image"
    grid: object = None


def calibrate_threshold(
    scores, labels, groups, settings: WordRiskSettings = WordRiskSettings(), *, images=None
) -> float:
    """λ̂ such that flagging the words with score > λ̂ has risk ≤ α with probability ≥ 1 − δ.

    Parameters
    ----------
    scores : array_like
        Per-word error scores f_v (Eq. 3), 1-D.
    labels : array_like
        Per word, 1 if it is an error, else 0.
    groups : array_like
        Per word, the caption it belongs to (any hashable id).
    settings : WordRiskSettings
        The risk, α, δ, the unit of exchangeability and the candidate λ (default: every distinct score).
    images : array_like, optional
        Per word, the image of its caption; required with ``settings.unit="image"`` and not read with
        ``unit="caption"`` (so one call site can pass it and switch the unit).

    Returns
    -------
    float
        λ̂ (Eq. 7 with the Hoeffding–Bentkus UCB, n = the number of units).

    Raises
    ------
    ValueError
        On mismatched lengths, NaN, labels other than 0/1, α or δ outside (0, 1), an unknown unit
        or a missing ``images``, or when no λ controls the risk (too few units for α and δ: even
        the empty set's bound exceeds α).

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.crc.metrics import fdr
    >>> from condeval.crc.word_risk import WordRiskSettings, calibrate_threshold
    >>> rng = np.random.default_rng(0)
    >>> captions = np.repeat(np.arange(1000), 4)                  # four words per caption
    >>> images = captions // 2                                    # two captions per image
    >>> labels = (rng.random(4000) < 0.25).astype(int)            # 1: the word is an error
    >>> scores = np.clip(0.4 * labels + rng.normal(0.3, 0.1, 4000), 0, 1)
    >>> settings = WordRiskSettings(risk="fdr", alpha=0.1, delta=0.05)
    >>> lam = calibrate_threshold(scores, labels, captions, settings, images=images)
    >>> round(lam, 3), round(fdr(scores > lam, labels, captions, images), 3)   # flag scores > λ̂: FDR ≤ 0.1
    (0.481, 0.07)
    >>> calibrate_threshold(scores[:40], labels[:40], captions[:40], WordRiskSettings(alpha=0.1, unit="caption"))
    Traceback (most recent call last):
    ...
    ValueError: no threshold controls the FDR at alpha=0.1 with delta=0.05: 10 calibration captions are too few
    (the bound of an empty set already exceeds alpha; 29 are needed)
    """
    risk, alpha, delta, unit, grid = settings.risk, settings.alpha, settings.delta, settings.unit, settings.grid
    alpha, delta = open_unit(alpha, "alpha"), open_unit(delta, "delta")
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}; got {unit!r}")
    if unit == "image" and images is None:
        raise ValueError(
            "unit='image' needs each word's image (images=...); unit='caption' is the paper's caption-level reading"
        )
    thresholds, risks, n_units = set_risk_curve(
        scores, labels, groups, risk, grid, images=images if unit == "image" else None
    )
    # From the largest λ (empty sets) down, each λ is certified only if every larger one is.
    certified = learn_then_test(hb_p_value(risks, n_units, alpha), delta, "fixed_sequence")
    if len(certified) == 0 and thresholds[0] < np.max(np.asarray(scores, dtype=float)):
        raise ValueError(
            f"no threshold controls the {risk.upper()} at alpha={alpha} with delta={delta}: the largest grid λ "
            f"({thresholds[0]:g}) lies below the largest score, so even it flags words and its bound exceeds alpha; "
            "give a grid that reaches the scores (the exact default starts from flagging nothing)"
        )
    if len(certified) == 0:
        raise ValueError(
            f"no threshold controls the {risk.upper()} at alpha={alpha} with delta={delta}: {n_units} calibration "
            f"{unit}s are too few (the bound of an empty set already exceeds alpha; {min_calibration_units(alpha, delta)} are needed)"
        )
    return float(thresholds[len(certified) - 1])


def _grid_risk_curve(scores, labels, groups, risk: str, grid, images) -> tuple[np.ndarray, np.ndarray, int]:
    """R̂ at each grid λ, descending: the exact curve of the scores' grid positions, read at the grid.

    A score s lies above grid point G[j] exactly when more than j grid points lie below s, so the
    sets of the scores and of their positions k(s) = #{g ∈ G : g < s} agree at every grid point.
    """
    if np.ndim(grid) == 0 and (
        isinstance(grid, (bool, np.bool_)) or not isinstance(grid, (int, np.integer)) or grid < 2
    ):
        raise ValueError(
            f"grid must be a count of at least 2 evenly spaced values on [0, 1], or the values; got {grid!r}"
        )
    values = np.sort(np.asarray(np.linspace(0.0, 1.0, grid) if np.ndim(grid) == 0 else grid, dtype=float))
    if values.ndim != 1 or len(values) < 1 or not np.isfinite(values).all():
        raise ValueError("grid must be a count of at least 2 or finite 1-D values")
    scores, _, _ = _check_words(scores, labels, groups)
    positions = np.searchsorted(values, scores, side="left").astype(float)
    thresholds, risks, n_units = set_risk_curve(positions, labels, groups, risk, images=images)
    index = np.arange(len(values))[::-1]
    # The first curve step at or below each j; below every position all words are flagged (the last step).
    at_grid = np.minimum(np.searchsorted(-thresholds, -index, side="left"), len(risks) - 1)
    return values[::-1], risks[at_grid], n_units


class WordRiskControl:
    """Word-error sets whose risk is at most ``alpha`` with probability at least 1 − ``delta`` (Section 4.2).

    The life cycle of MAPIE's estimators: construct with the guarantee, :meth:`calibrate` on scored
    and labelled calibration captions, then :meth:`flag` the words of new ones.

    Parameters
    ----------
    risk : {"fdr", "fpr"}, default "fdr"
        The per-caption loss: FDR of the flagged words (FOIL-it, FOIL-nocaps) or FPR (Rich-HF).
    alpha : float in (0, 1), default 0.2
        Risk tolerance.
    delta : float in (0, 1), default 0.05
        Error rate of the guarantee.
    unit : {"image", "caption"}, default "image"
        The unit of exchangeability (module docstring): images (their captions share them) or captions
        as independent draws (the paper's reading).
    grid : int or array-like, optional
        Candidate thresholds (:func:`calibrate_threshold`); every distinct score by default, exact.

    Attributes
    ----------
    threshold_ : float
        λ̂: the words with a score above it are flagged.
    n_units_ : int
        The calibration units the bound counted.

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.crc import WordRiskControl
    >>> rng = np.random.default_rng(0)
    >>> captions = np.repeat(np.arange(2000), 5)            # five words per caption
    >>> images = captions // 2                              # two captions per image
    >>> labels = (rng.random(len(captions)) < 0.2).astype(int)   # 1: the word is an error
    >>> scores = np.clip(0.3 * labels + rng.normal(0.4, 0.15, len(captions)), 0, 1)
    >>> control = WordRiskControl(risk="fdr", alpha=0.3, delta=0.05).calibrate(scores, labels, captions, images)
    >>> flags = control.flag(scores)
    >>> bool(control.risk(scores, labels, captions, images) <= 0.3)
    True
    """

    def __init__(self, risk: str = "fdr", alpha: float = 0.2, delta: float = 0.05, unit: str = "image", grid=None):
        if risk not in RISKS:
            raise ValueError(f"risk must be one of {RISKS}; got {risk!r}")
        if unit not in UNITS:
            raise ValueError(f"unit must be one of {UNITS}; got {unit!r}")
        self.risk_name, self.unit, self.grid = risk, unit, grid
        self.alpha, self.delta = open_unit(alpha, "alpha"), open_unit(delta, "delta")

    def calibrate(self, scores, labels, captions, images=None) -> WordRiskControl:
        """Set :attr:`threshold_` on calibration words.

        Parameters
        ----------
        scores : array-like, shape (N,)
            Each word's error score f_v (Eq. 3).
        labels : array-like of {0, 1}, shape (N,)
            1 where the word is an error.
        captions : array-like, shape (N,)
            Each word's caption (any hashable id).
        images : array-like, shape (N,), optional
            Each word's image; required with ``unit="image"``.

        Returns
        -------
        WordRiskControl
            ``self``.

        Raises
        ------
        ValueError
            On malformed words (named) or when no threshold controls the risk (too few units for α and δ).
        """
        unit_images = images if self.unit == "image" else None
        settings = WordRiskSettings(self.risk_name, self.alpha, self.delta, self.unit, self.grid)
        self.threshold_ = calibrate_threshold(scores, labels, captions, settings, images=images)
        self.n_units_ = len(np.unique(np.asarray(unit_images if unit_images is not None else captions)))
        return self

    def flag(self, scores) -> np.ndarray:
        """Which words the set flags: ``scores > threshold_`` (bool, shaped like ``scores``)."""
        if not hasattr(self, "threshold_"):
            raise ValueError(
                "WordRiskControl is not calibrated: call calibrate(scores, labels, captions, images) first"
            )
        return real_array(scores, "scores") > self.threshold_

    def risk(self, scores, labels, captions, images=None) -> float:
        """The empirical risk of :meth:`flag`'s sets on labelled words, averaged over this control's units
        (images with ``unit="image"``): the quantity the guarantee bounds in expectation on new data."""
        from condeval.crc.metrics import fdr, fpr

        loss = fdr if self.risk_name == "fdr" else fpr
        return loss(self.flag(scores), labels, captions, images if self.unit == "image" else None)
