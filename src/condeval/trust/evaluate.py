"""Section 5.1.1 end to end: fit the trust score on real training-support features, score a generator's
samples, run the P95-real selection per queried condition and summarise it as the paper's table row.

- The score is fitted on the real rows of the regime's training support in the scoring space
  (DINOv3 for the vanilla model, a REPA model's teacher for it); nothing of a held-out condition enters.
- KID is always read in DINOv3's space, against each condition's real rows outside the training
  support (a seen condition: its val/test rows; an unseen one: all of its rows, none ever trained on).
- The table row: Accept% (mean over conditions), KID of the accepted and of the random subsets (means
  over conditions, ± the mean of their standard deviations), the relative improvement of those means,
  and the Spearman correlation over conditions between mean trust and the KID of all samples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from condeval.core.conformal import resampled_rows, unit_bootstrap_interval
from condeval.metrics import as_numpy
from condeval.trust.checks import attribute_names, attribute_rows
from condeval.trust.deciles import DecileSettings
from condeval.trust.filtering import (
    UNDEFINED_GAIN,
    KidSettings,
    SelectionProtocol,
    relative_improvement,
    selection_gain,
)
from condeval.trust.score import REGULARIZATION, TrustScorer

__all__ = [
    "RANKED_SCORES",
    "KidReference",
    "ScorerOptions",
    "Translations",
    "Selection",
    "fit_and_score",
    "step_thresholds",
    "select",
    "selection_by_condition",
    "selection_summary",
    "trust_variants",
    "with_interval",
    "score_agreement",
    "translation_agreement",
    "selection_markdown",
    "rankings",
    "graded_shift",
    "scorer_ablation",
    "scorer_markdown",
]


@dataclass(frozen=True)
class ScorerOptions:
    """How a :class:`TrustScorer` is built, but for its attribute names (a config's ``scorer`` section
    and the job's seed); :class:`TrustScorer` checks them when it is built.

    Parameters
    ----------
    calibration : float in [0, 1), default 0.2
        Share of the real rows held out to calibrate (0: the official code's in-sample calibration).
    regularization : float >= 0, default REGULARIZATION
        The covariance's ridge.
    realism : {"one-sided", "two-sided"}, default "one-sided"
    seed : int, default 0
        Seeds the calibration split.

    Examples
    --------
    >>> ScorerOptions(calibration=0.3, seed=1).scorer(["a", "b"]).calibration
    0.3
    """

    calibration: float = 0.2
    regularization: float = REGULARIZATION
    realism: str = "one-sided"
    seed: int = 0

    def scorer(self, names) -> TrustScorer:
        """An unfitted :class:`TrustScorer` with these options and attribute ``names``."""
        return TrustScorer(
            calibration=self.calibration,
            regularization=self.regularization,
            names=names,
            seed=self.seed,
            realism=self.realism,
        )


def fit_and_score(
    real_features,
    real_attributes,
    sample_features,
    sample_attributes,
    names,
    *,
    options: ScorerOptions | None = None,
    groups=None,
) -> tuple[TrustScorer, pl.DataFrame]:
    """A :class:`TrustScorer` built with ``options`` (default ``ScorerOptions()``), fitted on real
    training-support rows (calibrated on whole ``groups``, when given: :meth:`TrustScorer.fit`), and its
    scores of the samples.

    Returns
    -------
    tuple
        The fitted scorer, and the samples' scores with their attribute columns.

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.trust.evaluate import fit_and_score
    >>> rng = np.random.default_rng(0)
    >>> attributes = rng.integers(0, 2, size=(400, 2))
    >>> features = rng.normal(size=(400, 8)) + 2 * attributes @ rng.normal(size=(2, 8))
    >>> samples = features[:50] + rng.normal(scale=3, size=(50, 8))  # noisy copies of 50 real rows
    >>> scorer, scores = fit_and_score(features[50:], attributes[50:], samples, attributes[:50], ["smile", "glasses"])
    >>> scores.columns
    ['realism', 'faithfulness', 'trust', 'margin_smile', 'margin_glasses', 'smile', 'glasses']
    >>> bool(scores["trust"].mean() > scorer.score(features[:50], attributes[:50])["trust"].mean())  # noise: worse
    True
    """
    names = attribute_names(names)
    scorer = (ScorerOptions() if options is None else options).scorer(names)
    scorer.fit(real_features, real_attributes, groups=groups)
    scores = scorer.score(sample_features, sample_attributes)
    attributes = attribute_rows(sample_attributes, scores.height, "sample_attributes")
    return scorer, scores.with_columns(pl.Series(name, attributes[:, k]) for k, name in enumerate(names))


def step_thresholds(scorer: TrustScorer, features, attributes, quantile: float = 0.95) -> pl.DataFrame:
    """Per-step thresholds for scoring during generation: each condition's ``quantile`` of the trust of
    the scorer's real calibration rows, read on the same path as the samples at that step (noised to the
    step's level, through the block and the translator) rather than from their clean features.

    Parameters
    ----------
    scorer : TrustScorer
        Fitted on the real rows whose step features are ``features``.
    features : ndarray, shape (N, D)
        The step's features of the very rows ``scorer`` was fitted on, in the same order.
    attributes : ndarray of int, shape (N, K)
    quantile : float

    Returns
    -------
    polars.DataFrame
        :func:`~condeval.trust.filtering.condition_thresholds` of the calibration rows.

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.trust import TrustScorer
    >>> from condeval.trust.evaluate import step_thresholds
    >>> rng = np.random.default_rng(0)
    >>> attributes = rng.integers(0, 2, size=(400, 2))
    >>> features = rng.normal(size=(400, 8)) + 2 * attributes @ rng.normal(size=(2, 8))
    >>> scorer = TrustScorer().fit(features, attributes)
    >>> noised = features + 2 * rng.normal(size=features.shape)  # the same rows, as a step reads them
    >>> step_thresholds(scorer, noised, attributes)["threshold"].round(1).to_list()
    [2.5, 2.7, 2.9, 1.1]
    >>> scorer.thresholds()["threshold"].round(1).to_list()  # read from the clean features instead
    [2.2, 0.5, 0.7, -0.2]
    >>> step_thresholds(scorer, noised[:100], attributes[:100])
    Traceback (most recent call last):
    ...
    ValueError: 100 step features and 100 attribute rows: need the 400 rows the scorer was fitted on, in its order
    """
    from condeval.trust.filtering import condition_thresholds

    features, rows = np.asarray(features), scorer.fitted_calibration_rows()
    attributes = attribute_rows(attributes, name="attributes")
    if not len(features) == len(attributes) == scorer.n_fit_rows_:
        raise ValueError(
            f"{len(features)} step features and {len(attributes)} attribute rows: need the "
            f"{scorer.n_fit_rows_} rows the scorer was fitted on, in its order"
        )
    fitted = scorer.calibration_.select(scorer.names_).to_numpy()
    if not np.array_equal(attributes[rows], fitted):
        raise ValueError(
            "attributes are not the scorer's fit rows in its order: its calibration rows hold other "
            "attribute values (shuffled or other rows would give other conditions' thresholds)"
        )
    trust = scorer.score(features[rows], attributes[rows])["trust"]
    return condition_thresholds(trust, attributes[rows], scorer.names_, quantile)


@dataclass(frozen=True)
class KidReference:
    """What the selection is judged against: each queried condition's real rows outside every training
    support (its KID target) and the queried conditions, checked against ``names`` on construction.

    Parameters
    ----------
    features : array-like, shape (M, D)
        Real rows in KID's space.
    attributes : array-like of int, shape (M, K)
    conditions : array-like of int, shape (C, K) or (K,)
        The queried conditions.
    names : sequence of str
        The K attribute names.

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.trust import KidReference
    >>> rng = np.random.default_rng(0)
    >>> features, attributes = rng.normal(size=(100, 8)), rng.integers(0, 2, size=(100, 2))
    >>> KidReference(features, attributes, [1, 0], ["smile", "glasses"]).conditions.tolist()  # one (K,) query
    [[1, 0]]
    >>> KidReference(features, attributes, [1, 0, 1], ["smile", "glasses"])
    Traceback (most recent call last):
    ...
    ValueError: conditions have 3 attributes; names give 2
    """

    features: np.ndarray
    attributes: np.ndarray
    conditions: np.ndarray
    names: list

    def __post_init__(self):
        names = attribute_names(self.names)
        features = as_numpy(self.features)
        attributes = attribute_rows(self.attributes, len(features), "reference_attributes")
        conditions = attribute_rows(np.atleast_2d(as_numpy(self.conditions)), name="conditions")
        for name, rows in (("conditions", conditions), ("reference_attributes", attributes)):
            if rows.shape[1] != len(names):
                raise ValueError(f"{name} have {rows.shape[1]} attributes; names give {len(names)}")
        for field, value in (
            ("features", features),
            ("attributes", attributes),
            ("conditions", conditions),
            ("names", names),
        ):
            object.__setattr__(self, field, value)


@dataclass(frozen=True)
class Selection:
    """One run of the Section 5.1.1 protocol (:func:`select`).

    Attributes
    ----------
    per_condition : polars.DataFrame
        :func:`selection_by_condition`'s rows.
    summary : dict
        :func:`selection_summary` of them: the table's row.
    accepted : ndarray of bool
        Each sample's single accept decision (:func:`~condeval.trust.filtering.accepted_mask`).

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.trust import KidReference, select
    >>> from condeval.trust.evaluate import fit_and_score
    >>> rng = np.random.default_rng(0)
    >>> attributes = rng.integers(0, 2, size=(1000, 2))
    >>> features = rng.normal(size=(1000, 8)) + 2 * attributes @ rng.normal(size=(2, 8))
    >>> samples = features[800:].copy()  # "generated" features (one space for trust and KID here)
    >>> samples[::2] += rng.normal(scale=3, size=(100, 8))  # every other sample degraded
    >>> scorer, scores = fit_and_score(features[:500], attributes[:500], samples, attributes[800:], ["a", "b"])
    >>> conditions = [[0, 0], [0, 1], [1, 0], [1, 1]]
    >>> reference = KidReference(features[500:800], attributes[500:800], conditions, ["a", "b"])
    >>> selection = select(scores, samples, scorer.thresholds(), reference)
    >>> selection.per_condition.height, selection.summary["accept"], round(float(100 * selection.accepted.mean()), 1)
    (4, 55.5, 55.5)
    >>> int(selection.accepted[::2].sum()), int(selection.accepted[1::2].sum())  # degraded samples, intact ones
    (21, 90)
    """

    per_condition: pl.DataFrame
    summary: dict
    accepted: np.ndarray


def select(
    scores: pl.DataFrame,
    kid_features,
    thresholds: pl.DataFrame,
    reference: KidReference,
    protocol: SelectionProtocol | None = None,
) -> Selection:
    """The P95-real selection protocol once: per-condition KID gains, the table's row, and each sample's
    accept decision, all from the same ``thresholds``.

    Parameters
    ----------
    scores : polars.DataFrame
        The samples' ``trust`` and attribute columns (:func:`fit_and_score`).
    kid_features : array-like, shape (N, D)
        The samples in KID's space, row-aligned with ``scores``.
    thresholds : polars.DataFrame
        :meth:`TrustScorer.thresholds`, or per-step ones (:func:`step_thresholds`).
    reference : KidReference
    protocol : SelectionProtocol, optional
        :func:`~condeval.trust.filtering.selection_gain`'s sizes, kernel and seed (default
        ``SelectionProtocol()``; its ``quantile`` is the caller's, who computed ``thresholds``).

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.trust import KidReference, select
    >>> from condeval.trust.evaluate import fit_and_score
    >>> rng = np.random.default_rng(0)
    >>> attributes = rng.integers(0, 2, size=(1000, 2))
    >>> features = rng.normal(size=(1000, 8)) + 2 * attributes @ rng.normal(size=(2, 8))
    >>> samples = features[800:].copy()  # "generated" features (one space for trust and KID here)
    >>> samples[::2] += rng.normal(scale=3, size=(100, 8))  # every other sample degraded
    >>> scorer, scores = fit_and_score(features[:500], attributes[:500], samples, attributes[800:], ["a", "b"])
    >>> conditions = [[0, 0], [0, 1], [1, 0], [1, 1]]
    >>> reference = KidReference(features[500:800], attributes[500:800], conditions, ["a", "b"])
    >>> summary = select(scores, samples, scorer.thresholds(), reference).summary
    >>> summary["conditions"], summary["accept"]  # conditions evaluated, Accept% of all samples
    (4, 55.5)
    >>> bool(summary["kid_trust"] < summary["kid_random"])  # the accepted samples are closer to the real ones
    True
    """
    from condeval.trust.filtering import accepted_mask

    per_condition = selection_by_condition(scores, kid_features, thresholds, reference, protocol)
    attributes = scores.select(reference.names).to_numpy()
    accepted = accepted_mask(scores["trust"].to_numpy(), attributes, thresholds, reference.names)
    return Selection(per_condition, selection_summary(per_condition), accepted)


def selection_by_condition(
    scores: pl.DataFrame,
    kid_features,
    thresholds: pl.DataFrame,
    reference: KidReference,
    protocol: SelectionProtocol | None = None,
    score: str = "trust",
) -> pl.DataFrame:
    """:func:`~condeval.trust.filtering.selection_gain` for every queried condition, one row each.

    Parameters
    ----------
    scores : polars.DataFrame
        :func:`fit_and_score`'s sample scores (``score`` and the attribute columns), row-aligned with
        ``kid_features``.
    kid_features : array-like, shape (N, D)
        The samples' features in KID's space.
    thresholds : polars.DataFrame
        :meth:`TrustScorer.thresholds`.
    reference : KidReference
        Each condition's KID target and the queried conditions.
    protocol : SelectionProtocol, optional
        ``selection_gain``'s sizes, seed and kernel (default ``SelectionProtocol()``).
    score : str
        The column selected on (lower is better): ``trust``, or an ablation scorer's.

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.trust import KidReference
    >>> from condeval.trust.evaluate import fit_and_score, selection_by_condition
    >>> rng = np.random.default_rng(0)
    >>> attributes = rng.integers(0, 2, size=(1000, 2))
    >>> features = rng.normal(size=(1000, 8)) + 2 * attributes @ rng.normal(size=(2, 8))
    >>> samples = features[800:].copy()  # "generated" features (one space for trust and KID here)
    >>> samples[::2] += rng.normal(scale=3, size=(100, 8))  # every other sample degraded
    >>> scorer, scores = fit_and_score(features[:500], attributes[:500], samples, attributes[800:], ["a", "b"])
    >>> conditions = [[0, 0], [0, 1], [1, 0], [1, 1]]
    >>> reference = KidReference(features[500:800], attributes[500:800], conditions, ["a", "b"])
    >>> from condeval.trust.filtering import SelectionProtocol
    >>> protocol = SelectionProtocol(min_real=80)  # a condition needs 80 real rows here
    >>> per_condition = selection_by_condition(scores, samples, scorer.thresholds(), reference, protocol)
    >>> for row in per_condition.iter_rows(named=True):
    ...     print(row["a"], row["b"], row["n_real"], round(row["accept"], 2), row["skipped"])
    0 0 67 0.74 fewer than 20 generated or 80 real samples
    0 1 79 0.59 fewer than 20 generated or 80 real samples
    1 0 93 0.52 None
    1 1 61 0.41 fewer than 20 generated or 80 real samples
    """
    protocol = SelectionProtocol() if protocol is None else protocol
    names = reference.names
    attributes = scores.select(names).to_numpy()
    trust = scores[score].to_numpy()
    kid_features = as_numpy(kid_features)
    if len(kid_features) != scores.height:
        raise ValueError(f"kid_features has {len(kid_features)} rows for {scores.height} scored samples")
    rows = []
    for condition in reference.conditions:
        mine = (attributes == condition).all(axis=1)
        real = reference.features[(reference.attributes == condition).all(axis=1)]
        gain = dict.fromkeys(_GAIN_COLUMNS) | selection_gain(
            kid_features[mine], trust[mine], real, condition, thresholds, names, protocol
        )
        # every condition's KID of all its samples, accepted or not (Spearman, graded shift): selection_gain
        # measured it unless it skipped the condition
        if gain["kid_all"] is None and min(mine.sum(), len(real)) >= 2:
            gain["kid_all"] = protocol.kid.measure(kid_features[mine], real)[0]
        rows.append(
            {name: int(v) for name, v in zip(names, condition, strict=True)}
            | {"mean_trust": float(trust[mine].mean()) if mine.any() else None}
            | gain
        )
    return pl.DataFrame(rows, infer_schema_length=None)


_GAIN_COLUMNS = (
    "accept",
    "kid_accepted",
    "kid_accepted_std",
    "kid_random",
    "kid_random_std",
    "improvement",
    "band",
    "kid_all",
    "skipped",
)


def score_agreement(during: pl.DataFrame, post: pl.DataFrame) -> dict:
    """Per-sample Spearman of realism, faithfulness and trust scored during generation against the same
    samples scored after it (Appendix L.1's correlation columns, as read here).

    Parameters
    ----------
    during, post : polars.DataFrame
        :meth:`TrustScorer.score` tables of the same samples in the same order.

    Returns
    -------
    dict
        ``rho_realism``, ``rho_faithfulness``, ``rho_trust``.
    """
    from scipy.stats import spearmanr

    if during.height != post.height:
        raise ValueError(f"{during.height} samples scored during generation against {post.height} after it")
    return {f"rho_{c}": float(spearmanr(during[c], post[c]).statistic) for c in ("realism", "faithfulness", "trust")}


@dataclass(frozen=True)
class Translations:
    """A translator's features of real rows outside the training support, one block per noise level (what
    one held-out check's shard holds), for :func:`translation_agreement`.

    Parameters
    ----------
    features : array-like, shape (T, M, D)
        The translated features of ``rows``, in that order, one block per noise level.
    t_values : sequence of float, length T
        The noise levels, in block order.
    rows : array-like of int, shape (M,), optional
        The real rows translated, all outside the support (the workflow checks a seeded sample of them);
        default every row outside the support, in row order.
    """

    features: np.ndarray
    t_values: Sequence[float]
    rows: np.ndarray | None = None

    def checked_rows(self, support: np.ndarray) -> np.ndarray:
        """The rows translated (``rows``, or every row outside the boolean ``support``), refused when one
        lies in the support or when ``features`` is not one block of them per noise level."""
        held = np.flatnonzero(~support) if self.rows is None else np.asarray(self.rows, dtype=np.int64)
        inside = held[support[held]]
        if len(inside):
            raise ValueError(
                f"rows: row {int(inside[0])} lies in the support (the translated rows must lie outside it)"
            )
        shape = np.shape(self.features)
        if shape[:2] != (len(self.t_values), len(held)):
            raise ValueError(
                f"translated features of shape {shape}: need ({len(self.t_values)}, {len(held)}, D), "
                "one block per t of the rows translated"
            )
        return held


def translation_agreement(
    real_features,
    real_attributes,
    support,
    translations: Translations,
    names,
    *,
    options: ScorerOptions | None = None,
    groups=None,
) -> list[dict]:
    """How well a translator's features rank real images by trust: per noise level, the Spearman between the
    trust of translated features of real images outside the support and the trust of their true features,
    both scored by one :class:`TrustScorer` fitted on the support's true features (:func:`fit_and_score`).

    Parameters
    ----------
    real_features : ndarray, shape (N, D)
        True features (the translator's target space) of every real row.
    real_attributes : ndarray of int, shape (N, K)
    support : ndarray of bool, shape (N,)
        The training support's rows; the others are the ones translated.
    translations : Translations
        The translated features of rows outside the support, their noise levels and rows.
    names : sequence of str
    options : ScorerOptions, optional
        The scorer's settings and seed (:func:`fit_and_score`).
    groups : ndarray, shape (N,), optional
        Every real row's calibration unit (:meth:`TrustScorer.fit`).

    Returns
    -------
    list of dict
        ``t`` and ``spearman`` per noise level.
    """
    from scipy.stats import spearmanr

    support, translated = np.asarray(support, dtype=bool), np.asarray(translations.features)
    held = translations.checked_rows(support)
    scorer, true_scores = fit_and_score(
        real_features[support],
        real_attributes[support],
        real_features[held],
        real_attributes[held],
        names,
        options=options,
        groups=None if groups is None else np.asarray(groups)[support],
    )
    rho = [
        spearmanr(scorer.score(block, real_attributes[held])["trust"], true_scores["trust"]).statistic
        for block in translated
    ]
    return [{"t": float(t), "spearman": float(r)} for t, r in zip(translations.t_values, rho, strict=True)]


def selection_summary(per_condition: pl.DataFrame) -> dict:
    """The Section 5.1.1 row: Accept% over every generated sample; KIDs and the improvement over the
    conditions that were not skipped; Spearman over every condition with a KID of all its samples.

    Returns
    -------
    dict
        ``conditions`` (not skipped), ``accept`` (% of all generated samples; the official code averages
        the kept conditions' shares instead, which overstates it when a condition is skipped for too few
        accepted samples), ``kid_trust`` / ``kid_trust_std``, ``kid_random`` / ``kid_random_std``,
        ``improvement`` (%): the ratio of the mean KIDs, with ``band`` (its ±1.96·√(s_acc² + s_rand²)
        half-width, in points; both None when the random subsets' mean KID is ≤ 0:
        :func:`~condeval.trust.filtering.relative_improvement`), ``improvement_official`` (%): the
        official code's aggregation, the conditions' own improvements averaged with their accepted
        samples as weights (None when no condition has one), ``spearman`` (mean trust against KID of
        all samples). Every estimate but the standard deviations has a 95% bootstrap interval over the
        conditions, each drawn whole (``<key>_low``, ``<key>_high``; None below two conditions, or where
        a resample leaves the statistic undefined, as Spearman's on three conditions).

    Examples
    --------
    >>> import polars as pl
    >>> from condeval.trust.evaluate import selection_summary
    >>> per_condition = pl.DataFrame({  # two conditions, the second skipped (too few accepted samples)
    ...     "mean_trust": [0.1, 0.5], "kid_all": [0.02, 0.05], "accept": [0.9, 0.05], "n_generated": [100, 100],
    ...     "kid_accepted": [0.01, None], "kid_accepted_std": [0.002, None], "kid_random": [0.02, None],
    ...     "kid_random_std": [0.002, None], "improvement": [0.5, None], "skipped": [None, "too few accepted"]})
    >>> summary = selection_summary(per_condition)
    >>> summary["conditions"], round(summary["accept"], 1), round(summary["improvement"], 1)  # Accept% counts both
    (1, 47.5, 50.0)
    """
    kept = per_condition.filter(pl.col("skipped").is_null())
    ranked = per_condition.filter(pl.col("kid_all").is_not_null() & pl.col("mean_trust").is_not_null())
    counted = per_condition.filter(pl.col("accept").is_not_null())
    defined = kept.filter(pl.col("improvement").is_not_null())
    statistics = {
        "accept": (_accepted_share(counted), counted.height),
        "spearman": (_trust_kid_spearman(ranked), ranked.height),
        "improvement_official": (_weighted_improvement(defined), defined.height),
        "kid_trust": (_mean_over_conditions(kept["kid_accepted"]), kept.height),
        "kid_random": (_mean_over_conditions(kept["kid_random"]), kept.height),
        "improvement": (_ratio_improvement(kept), kept.height),
    }
    summary = {key: _value(statistic(np.ones(units, dtype=int))) for key, (statistic, units) in statistics.items()}
    for key, (statistic, units) in statistics.items():
        low, high = unit_bootstrap_interval(statistic, units) if summary[key] is not None else (None, None)
        summary[f"{key}_low"], summary[f"{key}_high"] = _value(low), _value(high)
    if kept.height == 0:  # every key, so that rows with and without kept conditions share one schema
        return {"conditions": 0} | summary | dict.fromkeys(("kid_trust_std", "kid_random_std", "band"))
    kid_trust_std, kid_random_std = kept["kid_accepted_std"].mean(), kept["kid_random_std"].mean()
    _, band = relative_improvement(summary["kid_trust"], summary["kid_random"], kid_trust_std, kid_random_std)
    return {
        "conditions": kept.height,
        **summary,
        "kid_trust_std": kid_trust_std,
        "kid_random_std": kid_random_std,
        "band": None if band is None else 100 * band,
    }


def _value(number) -> float | None:
    """A summary's number, None where it is not defined (NaN)."""
    return None if number is None or np.isnan(number) else float(number)


def _accepted_share(counted: pl.DataFrame):
    """statistic(counts): Accept% of every generated sample of the drawn conditions."""
    accepted, generated = (counted["accept"] * counted["n_generated"]).to_numpy(), counted["n_generated"].to_numpy()

    def share(counts: np.ndarray) -> float:
        total = counts @ generated
        return float(100 * (counts @ accepted) / total) if total else float("nan")

    return share


def _trust_kid_spearman(ranked: pl.DataFrame):
    """statistic(counts): Spearman's ρ over the drawn conditions of mean trust against the KID of all
    samples (NaN below three conditions or where either is constant)."""
    from scipy.stats import spearmanr

    trust, kid = ranked["mean_trust"].to_numpy(), ranked["kid_all"].to_numpy()

    def rho(counts: np.ndarray) -> float:
        rows = resampled_rows(counts, np.arange(len(trust)))
        if len(np.unique(rows)) < 3 or np.ptp(trust[rows]) == 0 or np.ptp(kid[rows]) == 0:
            return float("nan")
        return float(spearmanr(trust[rows], kid[rows]).statistic)

    return rho


def _mean_over_conditions(values: pl.Series):
    """statistic(counts): the mean over the drawn conditions of one value per condition."""
    values = values.to_numpy().astype(np.float64)

    def mean(counts: np.ndarray) -> float:
        return float(counts @ values / counts.sum()) if counts.sum() > 0 else float("nan")

    return mean


def _ratio_improvement(kept: pl.DataFrame):
    """statistic(counts): 100 · (1 − mean KID (trust) / mean KID (random)) over the drawn conditions, NaN
    where the random subsets' mean KID is ≤ 0 (:func:`~condeval.trust.filtering.relative_improvement`)."""
    kid_trust, kid_random = _mean_over_conditions(kept["kid_accepted"]), _mean_over_conditions(kept["kid_random"])

    def ratio(counts: np.ndarray) -> float:
        improvement, _ = relative_improvement(kid_trust(counts), kid_random(counts), 0.0, 0.0)
        return float("nan") if improvement is None else 100 * improvement

    return ratio


def _weighted_improvement(defined: pl.DataFrame):
    """statistic(counts): the official aggregation over the drawn conditions, in %: each condition's
    improvement weighted by its accepted samples."""
    improvement = defined["improvement"].to_numpy()
    weights = (defined["accept"] * defined["n_generated"]).to_numpy()

    def weighted(counts: np.ndarray) -> float:
        drawn = counts * weights
        return float(100 * (drawn @ improvement) / drawn.sum()) if drawn.sum() > 0 else float("nan")

    return weighted


#: What a table cell holds where nothing was measured (no evaluated condition, no rank correlation).
NO_VALUE = "—"


def selection_markdown(rows: list[dict], keys=("dataset", "regime", "variant")) -> str:
    """The Section 5.1.1 table: one row per :func:`selection_summary`, led by its ``keys`` columns
    (:data:`NO_VALUE` where a row has nothing measured)."""
    header = " | ".join("model" if key == "variant" else key for key in keys)
    lines = [
        f"| {header} | conditions | Accept% (95% CI) | KID (trust) ± sd (95% CI) | KID (random) ± sd (95% CI) | "
        "gain %, the official code's (per condition, accepted-weighted; 95% CI) | gain %, ratio of mean KIDs "
        "± band (95% CI) | Spearman (95% CI) |",
        "|---" * (len(keys) + 7) + "|",
    ]
    for row in rows:
        lead = " | ".join(str(row[key]) for key in keys)
        spearman, accept = with_interval(row, "spearman", 2, NO_VALUE), with_interval(row, "accept", 1, NO_VALUE)
        if not row.get("conditions"):
            lines.append(f"| {lead} | 0 | {accept} | {NO_VALUE} | {NO_VALUE} | {NO_VALUE} | {NO_VALUE} | {spearman} |")
            continue
        kids = " | ".join(with_interval(row, key, 3, spread=f"{key}_std") for key in ("kid_trust", "kid_random"))
        gain = UNDEFINED_GAIN if row["improvement"] is None else with_interval(row, "improvement", 1, spread="band")
        official = with_interval(row, "improvement_official", 1, UNDEFINED_GAIN)
        lines.append(f"| {lead} | {row['conditions']} | {accept} | {kids} | {official} | {gain} | {spearman} |")
    return "\n".join(lines) + "\n"


def with_interval(row: dict, key: str, digits: int, missing: str = "", spread: str | None = None) -> str:
    """A table cell: ``row[key]`` to ``digits`` decimals, ``± row[spread]`` in the paper's style where
    ``spread`` is given, then its 95% interval (``row[key + "_low"]``, ``row[key + "_high"]``) in
    parentheses where the row has one; ``missing`` where it has no value.

    Examples
    --------
    >>> with_interval({"accept": 22.64, "accept_low": 13.0, "accept_high": 33.9}, "accept", 1)
    '22.6 (13.0, 33.9)'
    >>> with_interval({"accept": 22.64}, "accept", 1), with_interval({}, "accept", 1, "—")
    ('22.6', '—')
    >>> with_interval({"kid": 0.0123, "kid_std": 0.004, "kid_low": 0.01, "kid_high": 0.015}, "kid", 3, spread="kid_std")
    '0.012 ± 0.004 (0.010, 0.015)'
    """
    value, low, high = row.get(key), row.get(f"{key}_low"), row.get(f"{key}_high")
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return missing
    cell = f"{value:.{digits}f}" + ("" if spread is None else f" ± {row[spread]:.{digits}f}")
    if low is None or high is None or np.isnan(low) or np.isnan(high):
        return cell
    return f"{cell} ({low:.{digits}f}, {high:.{digits}f})"


def scorer_markdown(ablation: pl.DataFrame) -> str:
    """Appendix J's table: every scorer's :func:`selection_summary` per dataset, regime and generator."""
    return selection_markdown(ablation.to_dicts(), keys=("dataset", "regime", "variant", "scorer"))


#: The scores ranked in Section 5.1.2 and Appendix K (Figs. 2, 8, 9): the trust score and its two terms.
RANKED_SCORES = ("trust", "realism", "faithfulness")


def rankings(
    scores: pl.DataFrame,
    kid_features: np.ndarray,
    reference_features: np.ndarray,
    reference_attributes: np.ndarray,
    names,
    *,
    kid_settings: KidSettings | None = None,
    deciles: DecileSettings | None = None,
) -> pl.DataFrame:
    """Section 5.1.2 for each of :data:`RANKED_SCORES`: within-condition deciles merged across
    conditions, each bin's KID and z-KID against its conditions' real rows and the accuracy of a
    condition classifier trained on the bin, on the real rows of the queried conditions (a real row of
    a condition no sample was generated for is one it cannot name).

    ``kid_settings`` (default ``KidSettings()``) reads each bin's KID, and its ``subset_size`` and kernel
    the real–real null's halves; ``deciles`` (default ``DecileSettings()``) gives the bins, the null's
    resamples and the classifiers' seeds.

    Returns
    -------
    polars.DataFrame
        ``score``, ``bin`` (0 = the most trusted), ``kid``, ``z_kid``, ``conditions``, ``accuracy``,
        ``accuracy_sd``, ``train_rows``, and each metric's 95% interval over conditions and change
        from bin 0 (:func:`~condeval.trust.deciles.decile_kid`,
        :func:`~condeval.trust.deciles.decile_classifier`).
    """
    from condeval.trust.deciles import condition_codes, decile_bins, decile_classifier, decile_kid, kid_null

    kid_settings = KidSettings() if kid_settings is None else kid_settings
    deciles = DecileSettings() if deciles is None else deciles
    names = list(names)
    attributes = scores.select(names).to_numpy()
    conditions, codes = condition_codes(np.concatenate([attributes, np.asarray(reference_attributes)]))
    sample_codes, real_codes = codes[: len(attributes)], codes[len(attributes) :]
    null = kid_null(
        reference_features,
        real_codes,
        n_resamples=deciles.null_resamples,
        max_per_half=kid_settings.subset_size,
        kernel=kid_settings.kernel,
    )
    # the classifier knows only the queried conditions: a real row of any other caps its accuracy
    queried = np.isin(real_codes, sample_codes)
    frames = []
    for score in RANKED_SCORES:
        bins = decile_bins(sample_codes, scores[score].to_numpy(), deciles.n_bins)
        by_kid = decile_kid(
            kid_features, sample_codes, bins, reference_features, real_codes, null, kid_settings=kid_settings
        )
        by_accuracy = decile_classifier(
            kid_features,
            sample_codes,
            bins,
            reference_features[queried],
            real_codes[queried],
            seeds=deciles.classifier_seeds,
        )
        frames.append(
            by_kid.join(by_accuracy, on="bin", maintain_order="left").with_columns(pl.lit(score).alias("score"))
        )
    return pl.concat(frames).select("score", pl.exclude("score"))


def graded_shift(per_condition: pl.DataFrame, support: np.ndarray, names) -> pl.DataFrame:
    """Appendix J's graded shift: each queried condition's minimum Hamming distance to the training
    ``support`` (M, K) beside its mean trust and the KID of all its samples (:func:`selection_by_condition`'s rows)."""
    from condeval.trust.filtering import support_distance

    names = attribute_names(names)
    missing = [name for name in (*names, "mean_trust", "kid_all") if name not in per_condition.columns]
    if missing:
        raise ValueError(f"per_condition has no column(s) {missing} (selection_by_condition's rows with these names)")
    support = attribute_rows(np.atleast_2d(as_numpy(support)), name="support")
    if support.shape[1] != len(names):
        raise ValueError(f"support has {support.shape[1]} attributes; names give {len(names)}")
    distance = support_distance(per_condition.select(names).to_numpy(), support)
    return per_condition.select(*names, "mean_trust", "kid_all").with_columns(pl.Series("hamming", distance))


def scorer_ablation(
    scorer: TrustScorer,
    real: tuple,
    samples: tuple,
    kid_features,
    reference: KidReference,
    protocol: SelectionProtocol | None = None,
    *,
    trusted: pl.DataFrame | None = None,
    precomputed: dict | None = None,
) -> pl.DataFrame:
    """Appendix J: each alternative scorer of :mod:`condeval.trust.scorers` under the same P95-real
    protocol as trust, fitted on the same real rows as the fitted ``scorer`` and thresholded on the
    same held-out calibration rows; one :func:`selection_summary` row per scorer, trust's first.

    Beside them, trust's own variants from the same fit (:func:`trust_variants`): its two terms alone
    (``realism_only``, ``faithfulness_only``) and trust with the other realism
    (``trust_realism_two_sided`` for the default one-sided scorer).

    Parameters
    ----------
    scorer : TrustScorer
        Fitted on ``real``; its ``calibration_rows_`` calibrate every scorer.
    real : tuple of ndarray
        ``(features, attributes)``: the real support rows ``scorer`` was fitted on, in its order.
    samples : tuple
        ``(features, scores)``: the samples in the scoring space and their trust and attribute columns
        (:func:`fit_and_score`), row-aligned.
    kid_features, reference
        As :func:`selection_by_condition`.
    protocol : SelectionProtocol, optional
        :func:`selection_by_condition`'s, and the thresholds' ``quantile`` (default ``SelectionProtocol()``).
    trusted : polars.DataFrame, optional
        Trust's own :func:`selection_by_condition` rows, when already computed with the same settings.
    precomputed : dict, optional
        Scorers that need no fit here, by name: (scores of the real rows, scores of the samples),
        lower is better (the CLIP alignment, :func:`condeval.trust.scorers.clip_alignment`); thresholded
        on the same calibration rows.
    """
    from condeval.trust.filtering import condition_thresholds

    protocol = SelectionProtocol() if protocol is None else protocol
    names = reference.names
    real_features, sample_features, scores = as_numpy(real[0]), samples[0], samples[1]
    real_attributes = attribute_rows(real[1], len(real_features), "real_attributes")
    calibration = _calibration_mask(scorer, len(real_features))
    fit_rows = ~calibration if scorer.calibration > 0 else calibration
    if trusted is None:
        thresholds = scorer.thresholds(protocol.quantile)
        trusted = selection_by_condition(scores, kid_features, thresholds, reference, protocol)
    rows = [{"scorer": "trust"} | selection_summary(trusted)]
    scored = _alternative_scores(
        (real_features, real_attributes), fit_rows, calibration, sample_features, scores, names
    )
    scored |= _precomputed_scores(
        trust_variants(scorer, (real_features, real_attributes), (sample_features, scores.select(names).to_numpy())),
        calibration,
        scores.height,
    )
    scored |= _precomputed_scores(precomputed or {}, calibration, scores.height)
    for name, (real_scores, sample_scores) in scored.items():
        thresholds = condition_thresholds(real_scores, real_attributes[calibration], names, protocol.quantile)
        frame = scores.select(names).with_columns(pl.Series(name, sample_scores))
        per_condition = selection_by_condition(frame, kid_features, thresholds, reference, protocol, score=name)
        rows.append({"scorer": name} | selection_summary(per_condition))
    return pl.DataFrame(rows, infer_schema_length=None)


def trust_variants(scorer: TrustScorer, real: tuple, samples: tuple) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Trust's own variants from one fitted ``scorer``, as :func:`scorer_ablation`'s ``precomputed``:
    its two terms alone, and trust with the other realism (``realism="two-sided"`` for a one-sided
    scorer, or back), each as (scores of the ``real`` rows, scores of the ``samples``), lower is better.

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.trust import TrustScorer
    >>> rng = np.random.default_rng(0)
    >>> attributes = np.repeat([[0], [1]], 100, axis=0)
    >>> features = rng.normal(size=(200, 4)) + attributes
    >>> scorer = TrustScorer().fit(features, attributes)
    >>> variants = trust_variants(scorer, (features, attributes), (features[:5], attributes[:5]))
    >>> sorted(variants), [len(rows) for rows in variants["trust_realism_two_sided"]]
    (['faithfulness_only', 'realism_only', 'trust_realism_two_sided'], [200, 5])
    """
    import copy

    other = "two-sided" if scorer.realism == "one-sided" else "one-sided"
    twin = copy.copy(scorer)  # the same fit, thresholds and calibration; only how realism enters trust differs
    twin.realism = other
    real_scores, sample_scores = scorer.score(*real), scorer.score(*samples)
    variants = {
        f"{term}_only": (real_scores[term].to_numpy(), sample_scores[term].to_numpy())
        for term in ("realism", "faithfulness")
    }
    variants[f"trust_realism_{other.replace('-', '_')}"] = (
        twin.score(*real)["trust"].to_numpy(),
        twin.score(*samples)["trust"].to_numpy(),
    )
    return variants


def _calibration_mask(scorer: TrustScorer, n_real: int) -> np.ndarray:
    """Which of the ``n_real`` rows ``scorer`` was fitted on calibrate it, refused when it was fitted on more."""
    calibration_rows = scorer.fitted_calibration_rows()
    if n_real <= calibration_rows.max(initial=-1):
        raise ValueError(
            f"real_features has {n_real} rows; the scorer was fitted on at least "
            f"{calibration_rows.max() + 1}: pass the very rows it was fitted on, in its order"
        )
    calibration = np.zeros(n_real, dtype=bool)
    calibration[calibration_rows] = True
    return calibration


def _precomputed_scores(precomputed: dict, calibration: np.ndarray, n_samples: int) -> dict:
    """Each precomputed scorer's (scores of the calibration rows, of the samples), its lengths checked."""
    scored = {}
    for name, (real_scores, sample_scores) in precomputed.items():
        if len(real_scores) != len(calibration) or len(sample_scores) != n_samples:
            raise ValueError(
                f"scorer {name!r}: {len(real_scores)} real and {len(sample_scores)} sample scores for "
                f"{len(calibration)} real rows and {n_samples} samples"
            )
        scored[name] = np.asarray(real_scores)[calibration], np.asarray(sample_scores)
    return scored


def _alternative_scores(real, fit_rows, calibration, sample_features, scores, names) -> dict:
    """Each alternative scorer fitted on ``real``'s ``fit_rows``: (scores of its calibration rows, of the samples)."""
    from condeval.trust.scorers import AlphaPrecisionDistance, KnnPerAttribute, LinearProbeEnergy

    real_features, real_attributes = real
    attributes = scores.select(names).to_numpy()
    alternatives = {
        "linear_probe_energy": LinearProbeEnergy(),
        "knn_per_attribute": KnnPerAttribute(),
        "alpha_precision_distance": AlphaPrecisionDistance(),
    }
    scored = {}
    for name, alternative in alternatives.items():
        alternative.fit(real_features[fit_rows], real_attributes[fit_rows])
        real_scores = alternative.score(real_features[calibration], real_attributes[calibration])
        scored[name] = real_scores, alternative.score(sample_features, attributes)
    return scored
