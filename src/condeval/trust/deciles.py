"""Ranking by trust (Section 5.1.2, Appendix K): within-condition deciles merged across conditions,
each judged by KID against a real–real null and by a condition classifier trained on it.

- :func:`decile_bins`: each condition's samples sorted by score (ascending: bin 0 holds the most
  trusted) and cut into ``n_bins`` equal bins, the last taking the remainder (the official code).
- :func:`kid_null`: per condition, the KID of two disjoint random halves of its real features
  (``n_resamples`` splits, at most ``max_per_half`` rows per half), its mean and standard deviation;
  conditions with fewer than ``min_real`` real rows have none.
- :func:`decile_kid`: per bin, each condition's KID against its real features, z-scored by the null,
  averaged over conditions.
- :func:`decile_classifier`: per bin, a logistic-regression condition classifier trained on the bin's
  generated features and tested on held-out real features.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from condeval.core.conformal import mean_interval
from condeval.metrics import kid
from condeval.trust.checks import same_rows, score_values
from condeval.trust.filtering import KidSettings

__all__ = ["decile_bins", "kid_null", "decile_kid", "decile_classifier", "condition_codes", "DecileSettings"]


@dataclass(frozen=True)
class DecileSettings:
    """Section 5.1.2's deciles (a config's ``rankings`` section): how many bins, the real–real null's
    resamples and the seeds each bin's condition classifier is fitted with.

    Parameters
    ----------
    n_bins : int >= 1, default 10
        Bins per condition (:func:`decile_bins`).
    null_resamples : int >= 1, default 100
        Real–real half-splits per condition (:func:`kid_null`'s ``n_resamples``).
    classifier_seeds : tuple of int, default (0, 1, 2, 3, 4)
        :func:`decile_classifier`'s ``seeds``.

    Examples
    --------
    >>> DecileSettings.from_config({"n_bins": 5, "null_resamples": 20, "classifier_seeds": 2})
    DecileSettings(n_bins=5, null_resamples=20, classifier_seeds=(0, 1))
    """

    n_bins: int = 10
    null_resamples: int = 100
    classifier_seeds: tuple[int, ...] = (0, 1, 2, 3, 4)

    @classmethod
    def from_config(cls, section: Mapping) -> DecileSettings:
        """The settings of a config's ``rankings`` section: ``n_bins``, ``null_resamples`` and
        ``classifier_seeds``, a count (seeds 0 to count − 1)."""
        return cls(
            n_bins=section["n_bins"],
            null_resamples=section["null_resamples"],
            classifier_seeds=tuple(range(section["classifier_seeds"])),
        )


def condition_codes(attributes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(conditions (C, K), code per row): each row's index into its distinct attribute tuples."""
    conditions, codes = np.unique(np.asarray(attributes), axis=0, return_inverse=True)
    return conditions, codes.ravel()


def decile_bins(codes: np.ndarray, scores: np.ndarray, n_bins: int = 10) -> np.ndarray:
    """Each sample's bin (0 = lowest score, the most trusted) within its condition ``codes``.

    A condition needs at least ``n_bins`` samples: with fewer, every bin but the last is empty and
    all of them, the most trusted included, land in the least trusted bin (refused).
    """
    from condeval.core.io import check_integer

    check_integer(n_bins, "n_bins", least=1)
    codes, scores = np.asarray(codes), score_values(scores)  # a NaN score would rank last, silently
    if codes.shape != scores.shape:
        raise ValueError(f"one condition code per score: {codes.shape} codes, {scores.shape} scores")
    distinct, counts = np.unique(codes, return_counts=True)
    if len(counts) and counts.min() < n_bins:
        raise ValueError(
            f"condition {distinct[np.argmin(counts)].item()!r} has {counts.min()} samples for {n_bins} bins: "
            "each condition needs at least n_bins"
        )
    bins = np.empty(len(scores), dtype=np.int64)
    for code in np.unique(codes):
        rows = np.flatnonzero(codes == code)
        ranked = rows[np.argsort(scores[rows], kind="stable")]
        size = len(ranked) // n_bins
        for b in range(n_bins):
            bins[ranked[b * size : (b + 1) * size if b < n_bins - 1 else len(ranked)]] = b
    return bins


def kid_null(
    real: np.ndarray,
    codes: np.ndarray,
    *,
    n_resamples: int = 100,
    max_per_half: int = 500,
    min_real: int = 10,
    seed: int = 42,
    kernel: str = "cosine",
) -> dict[int, tuple[float, float]]:
    """Condition code → (mean, sd with ddof=1) of the KID between two random halves of its real rows."""
    rng = np.random.default_rng(seed)
    null = {}
    for code in np.unique(codes):
        rows = np.flatnonzero(np.asarray(codes) == code)
        if len(rows) < min_real:
            continue
        half = min(len(rows) // 2, max_per_half)
        values = []
        for _ in range(n_resamples):
            order = rng.permutation(rows)
            a, b = order[:half], order[len(rows) // 2 : len(rows) // 2 + half]
            values.append(kid(real[a], real[b], subset_size=half, n_subsets=1, seed=0, kernel=kernel)[0])
        sd = float(np.std(values, ddof=1))
        if sd > 1e-12:
            null[int(code)] = (float(np.mean(values)), sd)
    return null


def decile_kid(
    generated: np.ndarray,
    generated_codes: np.ndarray,
    bins: np.ndarray,
    real: np.ndarray,
    real_codes: np.ndarray,
    null: dict[int, tuple[float, float]],
    *,
    kid_settings: KidSettings | None = None,
    min_rows: int = 5,
) -> pl.DataFrame:
    """Per bin: the mean over conditions of KID(bin's samples of c, real of c), raw and z-scored by ``null``,
    with 95% intervals over the conditions and the change from the first bin.

    ``kid_settings`` (:class:`~condeval.trust.filtering.KidSettings`, default ``KidSettings()``) reads
    every KID; a condition needs ``min_rows`` samples in the bin and real rows. The intervals draw
    conditions whole (:func:`~condeval.core.conformal.mean_interval`); each condition's KID is taken as
    measured.

    Returns
    -------
    polars.DataFrame
        ``bin``, ``kid``, ``z_kid``, ``conditions`` (how many entered the mean; a condition needs
        ``min_rows`` samples in the bin and a null), ``kid_low`` … ``z_kid_high``, and
        ``kid_change`` and ``z_kid_change`` (each with ``_low`` and ``_high``): the mean over the
        conditions measured in both of this bin's value minus the first bin's (0 in the first bin).
    """
    kid_settings = KidSettings() if kid_settings is None else kid_settings
    same_rows(len(generated), generated_codes=generated_codes, bins=bins)
    same_rows(len(real), real_codes=real_codes)
    measured = {}  # bin → {condition: (kid, z-kid)}
    for b in np.unique(bins):
        measured[int(b)] = {}
        for code, (mu, sd) in null.items():
            mine = generated[(bins == b) & (generated_codes == code)]
            target = real[real_codes == code]
            if len(mine) < min_rows or len(target) < min_rows:
                continue
            value = kid_settings.measure(mine, target)[0]
            measured[int(b)][code] = (value, (value - mu) / sd)
    first = measured[min(measured)] if measured else {}
    return pl.DataFrame(
        [_decile_kid_row(b, by_condition, first) for b, by_condition in measured.items()], schema=DECILE_KID_SCHEMA
    )


#: The columns of :func:`decile_kid`'s table (also when it has no row).
DECILE_KID_SCHEMA = {
    "bin": pl.Int64,
    "kid": pl.Float64,
    "z_kid": pl.Float64,
    "conditions": pl.Int64,
    **{
        f"{metric}{change}{end}": pl.Float64
        for change in ("", "_change")
        for metric in ("kid", "z_kid")
        for end in (("_low", "_high") if not change else ("", "_low", "_high"))
    },
}


def _decile_kid_row(b: int, by_condition: dict, first: dict) -> dict:
    """One bin's row of :func:`decile_kid` from its conditions' (KID, z-KID) and the first bin's."""
    values = np.array(list(by_condition.values()), dtype=float).reshape(-1, 2)
    shared = [code for code in by_condition if code in first]
    changes = np.array([np.subtract(by_condition[code], first[code]) for code in shared], dtype=float).reshape(-1, 2)
    row = {"bin": b, "conditions": len(by_condition)}
    for column, metric in enumerate(("kid", "z_kid")):
        row |= _mean_with_interval(metric, values[:, column])
        row |= _mean_with_interval(f"{metric}_change", changes[:, column])
    return row


def _mean_with_interval(name: str, values: np.ndarray, weights=None) -> dict:
    """``name``: the (weighted) mean of per-condition ``values``, with ``name_low`` and ``name_high``, its
    95% interval over conditions; NaN where no condition was measured."""
    if not len(values) or (weights is not None and not np.sum(weights)):
        return dict.fromkeys((name, f"{name}_low", f"{name}_high"), float("nan"))
    low, high = mean_interval(values, weights)
    return {name: float(np.average(values, weights=weights)), f"{name}_low": low, f"{name}_high": high}


#: The columns of :func:`decile_classifier`'s table (also when it has no row).
DECILE_CLASSIFIER_SCHEMA = {
    "bin": pl.Int64,
    "accuracy": pl.Float64,
    "accuracy_sd": pl.Float64,
    "train_rows": pl.Int64,
    **{f"accuracy{part}": pl.Float64 for part in ("_low", "_high", "_change", "_change_low", "_change_high")},
}


def decile_classifier(
    generated: np.ndarray,
    generated_codes: np.ndarray,
    bins: np.ndarray,
    real: np.ndarray,
    real_codes: np.ndarray,
    *,
    seeds: tuple[int, ...] = (0, 1, 2, 3, 4),
    max_iter: int = 2000,
) -> pl.DataFrame:
    """Per bin: accuracy on the held-out ``real`` rows of a logistic condition classifier (scikit-learn,
    standardised features) trained on the bin's generated rows, mean and sd over ``seeds``, with its
    95% interval over the real rows' conditions (each drawn with all its rows, the classifiers as
    trained) and the change from the first bin on the same rows.

    Returns
    -------
    polars.DataFrame
        ``bin``, ``accuracy``, ``accuracy_sd``, ``train_rows``, ``accuracy_low``, ``accuracy_high``,
        ``accuracy_change`` (this bin's accuracy minus the first bin's; 0 in the first bin) with
        ``accuracy_change_low`` and ``accuracy_change_high``.
    """
    same_rows(len(generated), generated_codes=generated_codes, bins=bins)
    same_rows(len(real), real_codes=real_codes)
    _, condition_of_row = np.unique(real_codes, return_inverse=True)
    rows, first = [], None
    for b in np.unique(bins):
        x, y = generated[bins == b], generated_codes[bins == b]
        correct = _correct_on_real(x, y, real, real_codes, seeds, max_iter)  # (seeds, real rows)
        first = correct if first is None else first
        by_seed = correct.mean(axis=1)
        rows.append(
            {
                "bin": int(b),
                "accuracy": float(by_seed.mean()),
                "accuracy_sd": float(by_seed.std()),
                "train_rows": len(x),
            }
            | _accuracy_intervals(correct, first, condition_of_row)
        )
    return pl.DataFrame(rows, schema=DECILE_CLASSIFIER_SCHEMA)  # no bin (no generated row measured): no row


def _correct_on_real(x, y, real, real_codes, seeds, max_iter: int) -> np.ndarray:
    """(seeds, real rows): whether each seed's classifier, trained on (x, y), names each real row's
    condition; one row, the constant classifier's, where the bin holds one condition."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    if len(np.unique(y)) < 2:  # a bin of one class trains the constant classifier
        return (real_codes == y[0])[None].astype(float)
    correct = []
    for seed in seeds:
        model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=max_iter, random_state=seed))
        order = np.random.default_rng(seed).permutation(len(x))
        correct.append(model.fit(x[order], y[order]).predict(real) == real_codes)
    return np.array(correct, dtype=float)


def _accuracy_intervals(correct: np.ndarray, first: np.ndarray, condition_of_row: np.ndarray) -> dict:
    """The accuracy's interval and its change from the first bin's, over the real rows' conditions: each
    condition's accuracy weighted by its rows."""
    rows = np.bincount(condition_of_row).astype(float)

    def by_condition(row_values: np.ndarray) -> np.ndarray:
        return np.bincount(condition_of_row, weights=row_values, minlength=len(rows)) / rows

    accuracy, first_accuracy = by_condition(correct.mean(axis=0)), by_condition(first.mean(axis=0))
    interval = _mean_with_interval("accuracy", accuracy, rows)
    change = _mean_with_interval("accuracy_change", accuracy - first_accuracy, rows)
    return {key: value for key, value in (interval | change).items() if key != "accuracy"}
