"""The trust score of a conditional sample (Section 3 of the trust-score paper): global realism plus
attribute-wise faithfulness, fitted only on real features of the training support.

With ``z`` the L2-normalised feature of a sample requested with attribute values ``c = (c_1, …, c_K)``:

- **Realism.** ``E(z) = (z − μ)ᵀ Σ⁻¹ (z − μ)``, the squared Mahalanobis energy to the real features'
  mean under their Ledoit–Wolf covariance plus ``1e-5 · I``; z-scored on real calibration features.
- **Faithfulness.** For attribute ``k`` and value ``v``, ``E_k(z, v) = (z − μ_kv)ᵀ P_k (z − μ_kv)``, with
  ``μ_kv`` the mean of the real features whose ``k``-th value is ``v`` and ``P_k`` the inverse of the
  pooled within-value covariance, shrunk towards ``tr(S)/d · I`` by the Ledoit–Wolf intensity of the
  residuals (plus ``1e-5 · I``). The margin ``E_k(z, c_k) − min_{v ≠ c_k} E_k(z, v)`` is negative when
  ``z`` is closer to the requested value than to every other; each attribute's margin is z-scored on
  real calibration features (the real rows' own values requested), and faithfulness is their mean.
- **Trust** = realism + faithfulness (both z-scored): lower is better.

Calibration rows are held out of the fit by default (``calibration=0.2`` of each condition's rows), so
that the z-scores and the P95 thresholds are set on real features the statistics never saw. The
official code calibrates in-sample, on the rows it fitted: ``calibration=0`` (documented in
docs/trust/departures.md). The z-scores are one-sided (signed), as in the paper: a sample more typical than the
real ones scores better than they do; so does the official pipeline, whose both call sites pass
``two_sided=False``. ``realism="two-sided"`` is the option the official code defines and never turns
on, ``z²``, which also penalises over-typical samples (the code's note: aligned features crowd the real
mean); the faithfulness z-score stays signed either way, as there.

The faithfulness margin needs no quadratic form. About the real mean ``μ`` (``δ_kv = μ_kv − μ``,
``x = z − μ``), ``E_k(z, v) = xᵀP_k x − 2 δ_kvᵀ P_k x + δ_kvᵀ P_k δ_kv`` and the first term is common to
every value, so margins cost one (d × V) product per attribute, on the rows realism centres anyway; only
realism needs a (d × d) product per sample. The centring is what keeps the float32 products precise:
uncentred (``μ_kvᵀ P_k μ_kv − 2 μ_kvᵀ P_k z``) both terms are about ``‖μ‖² λ_max(P_k)``, near 1e5 when
the features share a strong direction (ViT features do), and a margin a few units wide is their
difference, which float32 leaves with its first decimals wrong. The constants ``δ_kvᵀ P_k δ_kv`` are
float64 from the fit.
"""

from __future__ import annotations

import logging

import numpy as np
import polars as pl

from condeval.core.conformal import unit_index
from condeval.metrics import as_numpy, unit_rows
from condeval.trust.checks import attribute_names, attribute_rows

__all__ = ["REALISM_SIDES", "REGULARIZATION", "TrustScorer"]

log = logging.getLogger(__name__)

#: Ridge added to every covariance before inversion (the paper's and the official code's).
REGULARIZATION = 1e-5

#: How realism enters trust: the signed z-score (the paper's, and the official pipeline's), or ``z²``
#: (an option the official code defines and never turns on).
REALISM_SIDES = ("one-sided", "two-sided")

#: Rows per block of the scoring products. Every block is padded to this size, so a row goes through
#: a product of the same shape whatever its batch: its score does not depend on the batch beyond
#: float32 rounding (OpenBLAS's sgemm may round a row by its place in the block, as on AVX2).
_BLOCK = 1024


def _blocks(rows: np.ndarray):
    """``(block, n)``: ``rows`` in consecutive zero-padded blocks of :data:`_BLOCK` rows, ``n`` of them real."""
    for start in range(0, len(rows), _BLOCK):
        part = rows[start : start + _BLOCK]
        if len(part) < _BLOCK:
            part = np.concatenate([part, np.zeros((_BLOCK - len(part), rows.shape[1]), rows.dtype)])
        yield part, min(_BLOCK, len(rows) - start)


def _precision(covariance: np.ndarray, regularization: float) -> np.ndarray:
    """``(covariance + regularization · I)⁻¹`` by Cholesky, the pseudo-inverse if that fails."""
    from scipy.linalg import LinAlgError, cho_factor, cho_solve

    regularized = covariance + regularization * np.eye(len(covariance))
    try:
        return cho_solve(cho_factor(regularized), np.eye(len(covariance)))
    except LinAlgError:
        log.warning("covariance not positive definite: using its pseudo-inverse")
        return np.linalg.pinv(regularized)


def _pooled_within_precision(z: np.ndarray, codes: np.ndarray, n_values: int, regularization: float):
    """(value means (V, d), precision (d, d)) of one attribute: the pooled within-value scatter
    ``S = Σ rᵀr / N`` shrunk as ``(1 − s) S + s tr(S)/d I``, ``s`` the Ledoit–Wolf intensity of the residuals."""
    from sklearn.covariance import LedoitWolf

    means = np.stack([z[codes == v].mean(axis=0) for v in range(n_values)])
    residuals = z - means[codes]
    scatter = residuals.T @ residuals / len(z)
    shrinkage = LedoitWolf().fit(residuals).shrinkage_
    d = z.shape[1]
    shrunk = (1 - shrinkage) * scatter + shrinkage * np.trace(scatter) / d * np.eye(d)
    return means, _precision(shrunk, regularization)


class TrustScorer:
    """Per-sample trust of conditional samples, from real training-support features alone.

    Parameters
    ----------
    calibration : float, default 0.2
        Share of each condition's real rows held out of the fit to z-score realism and margins
        and to set acceptance thresholds. ``0`` calibrates in-sample on the fitted rows (the official
        code's reading).
    regularization : float, default 1e-5
        Ridge added to every covariance (:data:`REGULARIZATION`).
    names : sequence of str, optional
        Attribute names (the ``margin_<name>`` columns); default ``a0, a1, …``.
    seed : int, default 0
        Seed of the calibration hold-out.
    realism : {"one-sided", "two-sided"}, default "one-sided"
        The ``realism`` column: the signed z-score of the energy (the paper and the official pipeline),
        or its square (an option the official code defines and does not use, :data:`REALISM_SIDES`).

    Attributes
    ----------
    calibration_ : polars.DataFrame
        The calibration rows' scores (as :meth:`score` returns them) and their attribute values, one
        column per attribute name: what thresholds are read from.
    calibration_rows_ : ndarray of int or None
        Which rows of the fitted arrays calibrate (all of them when ``calibration=0``); None after
        :meth:`calibrate`, whose rows lie outside the fit.
    calibration_groups_ : ndarray or None
        The calibration rows' units, when given.
    values_ : list of ndarray
        The values seen for each attribute in the fit.
    mean_, precision_ : ndarray
        The real features' mean and the realism precision.
    value_means_, attribute_precisions_ : list of ndarray
        Per attribute: the (V, D) value means and the shared (D, D) precision.
    """

    def __init__(
        self,
        calibration: float = 0.2,
        regularization: float = REGULARIZATION,
        names=None,
        seed: int = 0,
        realism: str = "one-sided",
    ):
        for name, value in (("calibration", calibration), ("regularization", regularization)):
            if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool):
                raise TypeError(f"{name} must be a number; got {type(value).__name__} {value!r}")
        if not 0 <= calibration < 1:
            raise ValueError(f"calibration must be in [0, 1); got {calibration}")
        if not 0 <= regularization < np.inf:
            raise ValueError(f"regularization must be a finite ridge >= 0; got {regularization}")
        if realism not in REALISM_SIDES:
            raise ValueError(f"realism must be one of {REALISM_SIDES}; got {realism!r}")
        self.calibration, self.regularization, self.names, self.seed = calibration, regularization, names, seed
        self.realism = realism

    # ----------------------------------------------------------------------------------- fit
    def fit(self, features, attributes, groups=None) -> TrustScorer:
        """Fit the real statistics and calibrate on real rows.

        Parameters
        ----------
        features : array-like, shape (N, D)
            Real features of the training support (normalised inside).
        attributes : array-like of int, shape (N, K)
            Each row's attribute values.
        groups : array-like, shape (N,), optional
            The exchangeable unit of each row (RxRx1: its well, whose sites share a plate and a well
            effect): the calibration rows are whole units, so no unit lies on both sides. Each unit
            belongs to one condition. None: each row is its own unit.

        Returns
        -------
        TrustScorer
            ``self``.
        """
        from sklearn.covariance import LedoitWolf

        z, attributes = self._checked(features, attributes, fitting=True)
        fit_rows, calibration_rows = self._split(attributes, groups)
        uncalibrated = len(np.unique(attributes, axis=0)) - len(np.unique(attributes[calibration_rows], axis=0))
        if uncalibrated:
            log.warning(
                "%d support condition(s) too small to hold out a calibration row: their samples take the "
                "thresholds of the nearest calibrated conditions, as an unseen one does",
                uncalibrated,
            )
        self.calibration_rows_, self.n_fit_rows_ = calibration_rows, len(attributes)
        fitted = z[fit_rows]
        self.mean_ = fitted.mean(axis=0)
        self.precision_ = _precision(LedoitWolf().fit(fitted).covariance_, self.regularization)
        self.values_, self.value_means_, self.attribute_precisions_ = [], [], []
        self._projections, self._offsets = [], []
        for k in range(attributes.shape[1]):
            values, codes = np.unique(attributes[fit_rows, k], return_inverse=True)
            if len(values) < 2:
                raise ValueError(f"attribute {self.names_[k]!r} takes one value in the fit; faithfulness needs two")
            means, precision = _pooled_within_precision(fitted, codes, len(values), self.regularization)
            self.values_.append(values)
            self.value_means_.append(means)
            self.attribute_precisions_.append(precision)
            shifts = means - self.mean_  # (V, d): δ_kv = μ_kv − μ, the value means about the realism centre
            self._projections.append(precision @ shifts.T)  # (d, V): P_k δ_kv
            self._offsets.append(np.einsum("vd,dv->v", shifts, self._projections[-1]))  # δ_kvᵀ P_k δ_kv
        self._check_calibration_values(attributes[calibration_rows])
        units = None if groups is None else np.asarray(groups)[calibration_rows]
        self._calibrate(z[calibration_rows], attributes[calibration_rows], units)
        return self

    def calibrate(self, features, attributes, groups=None) -> TrustScorer:
        """Calibrate on a lab's own held-out real rows, replacing the calibration :meth:`fit` set.

        The z-scores of realism and of each margin, and the thresholds of :meth:`thresholds` and
        :meth:`accept`, are read from these rows. Given the rows :meth:`fit` held out, it reproduces
        :meth:`fit`'s calibration exactly. To fit on every training row and calibrate on other rows,
        construct with ``calibration=0``.

        Parameters
        ----------
        features : array-like, shape (N, D)
            Real features that the fit never saw, in the fitted extractor's space.
        attributes : array-like of int, shape (N, K)
            Each row's attribute values; every value was seen in the fit.
        groups : array-like, shape (N,), optional
            The exchangeable unit of each row (a well, a donor), each within one condition. The
            thresholds then count units (``n_units``) and state their coverage by them: rows of one unit
            are not independent draws.

        Returns
        -------
        TrustScorer
            ``self``.

        Examples
        --------
        >>> import numpy as np
        >>> from condeval.trust import TrustScorer
        >>> rng = np.random.default_rng(0)
        >>> attributes = rng.integers(0, 2, size=(400, 2))
        >>> features = rng.normal(size=(400, 8)) + 2 * attributes @ rng.normal(size=(2, 8))
        >>> scorer = TrustScorer(calibration=0).fit(features[:300], attributes[:300])
        >>> scorer = scorer.calibrate(features[300:], attributes[300:])
        >>> scorer.thresholds(0.95).height  # one threshold per calibrated condition
        4
        """
        self._require_fitted()
        z, attributes = self._checked(features, attributes, fitting=False, dtype=np.float64)
        self.calibration_rows_ = None  # calibrated outside the fitted rows
        self._calibrate(z, attributes, None if groups is None else self._unit_groups(groups, attributes))
        return self

    def _check_calibration_values(self, attributes: np.ndarray) -> None:
        """Every calibration row's value was fitted: a value held out whole has no mean to score against."""
        for k, values in enumerate(self.values_):
            unfitted = np.setdiff1d(attributes[:, k], values)
            if len(unfitted):
                raise ValueError(
                    f"attribute {self.names_[k]!r} value {unfitted[0]} lies only in calibration rows (fitted: "
                    f"{values.tolist()}): lower calibration={self.calibration} or give the value more rows"
                )

    def _split(self, attributes: np.ndarray, groups=None) -> tuple[np.ndarray, np.ndarray]:
        """(fit rows, calibration rows): ``calibration`` of each condition's units (``groups``; None: each
        row its own) held out whole, at random."""
        groups = self._unit_groups(np.arange(len(attributes)) if groups is None else groups, attributes)
        everything = np.arange(len(attributes))
        if self.calibration == 0:
            return everything, everything
        _, condition = np.unique(attributes, axis=0, return_inverse=True)
        unit = unit_index(groups, "groups")
        rng = np.random.default_rng(self.seed)
        held = np.zeros(len(attributes), dtype=bool)
        for c in np.unique(condition):
            units = rng.permutation(np.unique(unit[condition == c]))
            held[np.isin(unit, units[: int(round(self.calibration * len(units)))])] = True
        return everything[~held], everything[held]

    @staticmethod
    def _unit_groups(groups, attributes: np.ndarray) -> np.ndarray:
        """``groups`` as an array of one unit per row, each unit within one condition (else a ValueError)."""
        groups = np.asarray(groups)
        if groups.shape != (len(attributes),):
            raise ValueError(f"groups must name one unit per row ({len(attributes)}); got shape {groups.shape}")
        _, condition = np.unique(attributes, axis=0, return_inverse=True)
        unit = unit_index(groups, "groups")
        conditions_per_unit = np.bincount(np.unique(np.stack([unit, condition], axis=1), axis=0)[:, 0])
        if (conditions_per_unit > 1).any():
            bad = groups[unit == np.argmax(conditions_per_unit > 1)][0]
            raise ValueError(f"group {bad!r} spans conditions: a calibration unit must lie within one condition")
        return groups

    def _calibrate(self, z: np.ndarray, attributes: np.ndarray, groups: np.ndarray | None) -> None:
        if len(z) < 2:
            raise ValueError(f"calibration needs at least 2 real rows; got {len(z)}")
        energy, margins = self._energies(z, attributes)
        self.energy_calibration_ = (float(energy.mean()), float(energy.std(ddof=1)))
        self.margin_calibration_ = [(float(m.mean()), float(m.std(ddof=1))) for m in margins.T]
        spreads = {"realism": self.energy_calibration_[1]} | {
            f"margin_{name}": spread for name, (_, spread) in zip(self.names_, self.margin_calibration_, strict=True)
        }
        flat = [name for name, spread in spreads.items() if not spread > 0]
        if flat:
            raise ValueError(
                f"the {len(z)} calibration rows' {flat} do not vary (identical features?): nothing to z-score against"
            )
        scores = self._scores(energy, margins)
        self.calibration_ = scores.with_columns(pl.Series(name, attributes[:, k]) for k, name in enumerate(self.names_))
        self.calibration_groups_ = groups

    def thresholds(self, quantile: float = 0.95) -> pl.DataFrame:
        """Each calibrated condition's acceptance threshold: the ``quantile`` of its real calibration
        rows' trust (:func:`~condeval.trust.filtering.condition_thresholds`; the P95-real rule at 0.95)."""
        from condeval.trust.filtering import condition_thresholds

        self._require_fitted()
        calibration = self.calibration_
        attributes = calibration.select(self.names_).to_numpy()
        return condition_thresholds(
            calibration["trust"], attributes, self.names_, quantile, groups=self.calibration_groups_
        )

    def accept(self, features, attributes, quantile: float = 0.95, *, thresholds: pl.DataFrame | None = None):
        """Which samples the P95-real rule keeps: trust at most their condition's threshold.

        A condition without calibration rows (unseen in the fit's support) takes the thresholds of the
        calibrated conditions at the least Hamming distance, and a sample is kept when at least half of
        them keep it (:func:`~condeval.trust.filtering.accepted_mask`).

        Parameters
        ----------
        features : array-like, shape (N, D)
            Sample features in the fitted extractor's space.
        attributes : array-like of int, shape (N, K)
            The values each sample was requested with.
        quantile : float in (0, 1], default 0.95
            The thresholds' quantile of the real calibration rows' trust.
        thresholds : polars.DataFrame, optional
            Thresholds to use instead of :meth:`thresholds` (per-step thresholds during generation).

        Returns
        -------
        ndarray of bool, shape (N,)
            True where the sample is kept.

        Examples
        --------
        >>> import numpy as np
        >>> from condeval.trust import TrustScorer
        >>> rng = np.random.default_rng(0)
        >>> attributes = rng.integers(0, 2, size=(400, 2))
        >>> features = rng.normal(size=(400, 8)) + 2 * attributes @ rng.normal(size=(2, 8))
        >>> scorer = TrustScorer().fit(features, attributes)
        >>> kept = scorer.accept(features[:100], attributes[:100])
        >>> bool(0.8 < kept.mean() <= 1)  # real rows pass the P95-real rule about 95% of the time
        True
        """
        from condeval.trust.filtering import accepted_mask

        trust = self.score(features, attributes)["trust"].to_numpy()
        thresholds = self.thresholds(quantile) if thresholds is None else thresholds
        return accepted_mask(trust, attribute_rows(attributes, len(trust)), thresholds, self.names_)

    # --------------------------------------------------------------------------------- score
    def score(self, features, attributes) -> pl.DataFrame:
        """Realism, faithfulness and trust of each sample (lower is better).

        Parameters
        ----------
        features : array-like, shape (N, D)
            Sample features in the fitted extractor's space.
        attributes : array-like of int, shape (N, K)
            The values each sample was requested with.

        Returns
        -------
        polars.DataFrame
            One row per sample: ``realism`` and ``faithfulness`` (both z-scored), ``trust`` (their
            sum) and ``margin_<name>`` (each attribute's raw margin).

        Raises
        ------
        ValueError
            On a feature width other than the fit's, NaN or infinite features, a wrong attribute
            shape, or an attribute value the fit never saw.
        """
        z, attributes = self._checked(features, attributes, fitting=False)
        return self._scores(*self._energies(z, attributes))

    def _scores(self, energy: np.ndarray, margins: np.ndarray) -> pl.DataFrame:
        realism = (energy - self.energy_calibration_[0]) / self.energy_calibration_[1]
        if self.realism == "two-sided":
            realism = realism**2
        standardised = [(margins[:, k] - m) / s for k, (m, s) in enumerate(self.margin_calibration_)]
        faithfulness = np.mean(standardised, axis=0)
        columns = {"realism": realism, "faithfulness": faithfulness, "trust": realism + faithfulness}
        columns |= {f"margin_{name}": margins[:, k] for k, name in enumerate(self.names_)}
        return pl.DataFrame(columns)

    def _energies(self, z: np.ndarray, attributes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(realism energy (N,), margins (N, K)) of unit rows ``z``, from the centred rows ``x = z − μ``
        (products in ``z``'s precision, float32 when scoring; sums in float64): ``xᵀ P x`` and every
        attribute's ``xᵀ P_k δ_kv``."""
        if len(z) == 0:
            return np.zeros(0), np.zeros((0, attributes.shape[1]))
        mean, precision = self.mean_.astype(z.dtype), self.precision_.astype(z.dtype)
        projections = np.concatenate(self._projections, axis=1).astype(z.dtype)  # (d, ΣV): every P_k δ_kv
        energy, products = [], []
        for block, n in _blocks(z):
            centred = block - mean
            energy.append(np.einsum("nd,nd->n", centred @ precision, centred, dtype=np.float64)[:n])
            products.append((centred @ projections)[:n])
        return np.concatenate(energy), self._margins(np.concatenate(products).astype(np.float64), attributes)

    def _margins(self, products: np.ndarray, attributes: np.ndarray) -> np.ndarray:
        """(N, K): ``E_k(z, requested) − min over the other values`` from ``products`` (N, ΣV), the rows'
        ``xᵀ P_k δ_kv``; the common ``xᵀ P_k x`` cancels."""
        out = np.empty(attributes.shape)
        rows, first = np.arange(len(products)), 0
        for k, (values, offset) in enumerate(zip(self.values_, self._offsets, strict=True)):
            energy = offset - 2.0 * products[:, first : first + len(values)]  # (N, V), up to the common term
            first += len(values)
            requested = np.searchsorted(values, attributes[:, k])
            others = energy.copy()
            others[rows, requested] = np.inf
            out[:, k] = energy[rows, requested] - others.min(axis=1)
        return out

    # ---------------------------------------------------------------------------- validation
    def _checked(self, features, attributes, *, fitting: bool, dtype=None) -> tuple[np.ndarray, np.ndarray]:
        features = as_numpy(features)
        if features.dtype.kind not in "iuf":
            raise TypeError(f"features must be real numbers; got dtype {features.dtype}")
        if features.ndim != 2:
            raise ValueError(f"features must be (N, D); got shape {features.shape}")
        if not np.isfinite(features).all():
            bad = int(np.flatnonzero(~np.isfinite(features).all(axis=1))[0])
            raise ValueError(f"features hold NaN or infinite values (first at row {bad})")
        attributes = attribute_rows(attributes, len(features))
        if fitting:
            k = attributes.shape[1]
            self.names_ = attribute_names([f"a{j}" for j in range(k)] if self.names is None else self.names, k)
            self.dim_ = features.shape[1]
        else:
            self._check_fitted_shape(features, attributes)
        # the fit and calibration in float64; scores in float32, the precision of their products
        if dtype is None:
            dtype = np.float64 if fitting else np.float32
        return unit_rows(features, dtype=dtype), attributes

    def fitted_calibration_rows(self) -> np.ndarray:
        """The fitted rows that calibrate (:attr:`calibration_rows_`); a ValueError after :meth:`calibrate`,
        whose rows are not among them."""
        self._require_fitted()
        if self.calibration_rows_ is None:
            raise ValueError(
                "the scorer was calibrated by calibrate() on rows outside its fit: this needs the "
                "calibration fit() held out of its own rows"
            )
        return self.calibration_rows_

    def _require_fitted(self) -> None:
        if not hasattr(self, "calibration_"):
            raise ValueError("TrustScorer is not fitted: call fit(features, attributes) first")

    def _check_fitted_shape(self, features: np.ndarray, attributes: np.ndarray) -> None:
        self._require_fitted()
        if features.shape[1] != self.dim_:
            raise ValueError(f"features have D = {features.shape[1]}; the scorer was fitted on D = {self.dim_}")
        if attributes.shape[1] != len(self.values_):
            raise ValueError(
                f"attributes have K = {attributes.shape[1]}; the scorer was fitted on K = {len(self.values_)}"
            )
        for k, values in enumerate(self.values_):
            unseen = np.setdiff1d(attributes[:, k], values)
            if len(unseen):
                raise ValueError(
                    f"attribute {self.names_[k]!r} value {unseen[0]} was never seen in the fit (seen: {values.tolist()})"
                )
