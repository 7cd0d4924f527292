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
    """Per bin: the mean over conditions of KID(bin's samples of c, real of c), raw and z-scored by ``null``.

    ``kid_settings`` (:class:`~condeval.trust.filtering.KidSettings`, default ``KidSettings()``) reads
    every KID; a condition needs ``min_rows`` samples in the bin and real rows.

    Returns
    -------
    polars.DataFrame
        ``bin``, ``kid``, ``z_kid``, ``conditions`` (how many entered the mean; a condition needs
        ``min_rows`` samples in the bin and a null).
    """
    kid_settings = KidSettings() if kid_settings is None else kid_settings
    same_rows(len(generated), generated_codes=generated_codes, bins=bins)
    same_rows(len(real), real_codes=real_codes)
    rows = []
    for b in np.unique(bins):
        raw, z = [], []
        for code, (mu, sd) in null.items():
            mine = generated[(bins == b) & (generated_codes == code)]
            target = real[real_codes == code]
            if len(mine) < min_rows or len(target) < min_rows:
                continue
            value = kid_settings.measure(mine, target)[0]
            raw.append(value)
            z.append((value - mu) / sd)
        rows.append(
            {
                "bin": int(b),
                "kid": float(np.mean(raw)) if raw else float("nan"),
                "z_kid": float(np.mean(z)) if z else float("nan"),
                "conditions": len(raw),
            }
        )
    return pl.DataFrame(rows)


#: The columns of :func:`decile_classifier`'s table (also when it has no row).
DECILE_CLASSIFIER_SCHEMA = {"bin": pl.Int64, "accuracy": pl.Float64, "accuracy_sd": pl.Float64, "train_rows": pl.Int64}


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
    standardised features) trained on the bin's generated rows, mean and sd over ``seeds``.

    Returns
    -------
    polars.DataFrame
        ``bin``, ``accuracy``, ``accuracy_sd``, ``train_rows``.
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    same_rows(len(generated), generated_codes=generated_codes, bins=bins)
    same_rows(len(real), real_codes=real_codes)
    rows = []
    for b in np.unique(bins):
        x, y = generated[bins == b], generated_codes[bins == b]
        if len(np.unique(y)) < 2:  # a bin of one class trains the constant classifier
            rows.append(
                {
                    "bin": int(b),
                    "accuracy": float(np.mean(real_codes == y[0])) if len(y) else float("nan"),
                    "accuracy_sd": 0.0,
                    "train_rows": len(x),
                }
            )
            continue
        scores = []
        for seed in seeds:
            model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=max_iter, random_state=seed))
            order = np.random.default_rng(seed).permutation(len(x))
            scores.append(model.fit(x[order], y[order]).score(real, real_codes))
        rows.append(
            {
                "bin": int(b),
                "accuracy": float(np.mean(scores)),
                "accuracy_sd": float(np.std(scores)),
                "train_rows": len(x),
            }
        )
    return pl.DataFrame(rows, schema=DECILE_CLASSIFIER_SCHEMA)  # no bin (no generated row measured): no row
