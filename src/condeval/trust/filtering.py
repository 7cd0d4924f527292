"""Selection by trust (Section 5.1.1): the P95-real rule per condition, its Hamming-distance fallback
for conditions without real calibration rows, and what the accepted samples gain in KID.

For a condition ``c`` with generated samples ``G_c`` and held-out real samples ``R_c``:

- ``τ_c`` is the 95th percentile of the trust of ``c``'s real calibration rows
  (:meth:`TrustScorer.thresholds`). A condition with no calibration rows (unseen under the held-out
  regime) takes the thresholds of every seen condition at the minimum Hamming distance, each once: the
  protocol runs per tied condition and its numbers are averaged (the official code).
- Accepted ``A_c = {g ∈ G_c : trust(g) ≤ τ_c}``; Accept% = |A_c| / |G_c|.
- KID(A_c, R_c) against ``n_random`` random subsets ``B_c`` of ``G_c`` of the same size; the relative
  improvement is ``(KID(B_c) − KID(A_c)) / KID(B_c)``, with the band ``±1.96 √(s_acc² + s_rand²)`` from
  the KIDs' standard deviations (:func:`relative_improvement`). It is undefined (None) when KID(B_c) ≤ 0:
  the unbiased KID of a good generator's random subsets can fall to or below zero, where the ratio
  would flip its sign and report a loss as a gain.
- A condition needs ``min_generated`` (20) generated, ``min_real`` (20) real and ``min_accepted`` (10)
  accepted samples, else its row says why it was skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from condeval.core.conformal import empirical_quantile
from condeval.metrics import kid
from condeval.trust.checks import attribute_names, attribute_rows, score_values

log = logging.getLogger(__name__)

#: Calibration rows below which a condition's threshold is named in the log (the official code's minimum).
MIN_CALIBRATION_ROWS = 20

__all__ = [
    "condition_thresholds",
    "nearest_seen",
    "acceptance",
    "accepted_mask",
    "selection_gain",
    "KidSettings",
    "SelectionProtocol",
    "relative_improvement",
    "support_distance",
    "UNDEFINED_GAIN",
]


def condition_thresholds(scores, attributes, names: list[str], quantile: float = 0.95, groups=None) -> pl.DataFrame:
    """Each condition's acceptance threshold: the ``quantile`` (:func:`~condeval.core.conformal.empirical_quantile`,
    linear interpolation) of its real
    calibration rows' ``scores``, with ``n_real``, their number (the P95-real rule at 0.95), and
    ``coverage``, about the share of fresh real samples of the condition it accepts in expectation.

    The k-th of n exchangeable rows covers k/(n + 1) of fresh ones on average, whatever their
    distribution; interpolated linearly between the two order statistics around the quantile, that is
    ``(1 + (n − 1)·quantile) / (n + 1)`` (the interpolation's own effect depends on the distribution:
    within 0.02 on Gaussian scores): 0.65 at n = 2, 0.77 at n = 4, 0.93 at n = 40 for the P95. Thresholds on fewer than
    :data:`MIN_CALIBRATION_ROWS` rows are named in the log (the official code skips those conditions).

    Parameters
    ----------
    scores : array-like, shape (N,)
        Any per-sample score (lower is better) of held-out real rows: trust or an ablation scorer's.
    attributes : array-like of int, shape (N, K)
    names : list of str
        The attribute columns of the result.
    quantile : float in (0, 1]
        0.95 for the P95 (not 95).
    groups : array-like, shape (N,), optional
        Each row's exchangeable unit (a well): adds ``n_units`` and states ``coverage`` with ``n`` the
        condition's units, not its rows, since rows of one unit are not independent draws.

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.trust import condition_thresholds
    >>> scores = np.arange(60.0)  # 20 calibration rows without a smile, then 40 with one
    >>> attributes = np.repeat([[0], [1]], [20, 40], axis=0)
    >>> for smile, threshold, n_real, coverage in condition_thresholds(scores, attributes, ["smile"]).rows():
    ...     print(smile, round(threshold, 2), n_real, round(coverage, 3))
    0 18.05 20 0.907
    1 57.05 40 0.928
    """
    if isinstance(quantile, bool) or not isinstance(quantile, (int, float, np.number)) or not 0 < quantile <= 1:
        raise ValueError(f"quantile must be a fraction in (0, 1] (0.95 for the P95); got {quantile!r}")
    scores = score_values(scores)
    attributes = attribute_rows(attributes, len(scores))
    names = attribute_names(names, attributes.shape[1])
    scores = np.asarray(scores)
    conditions, condition = np.unique(attributes, axis=0, return_inverse=True)
    rows = [condition == c for c in range(len(conditions))]
    columns = {name: conditions[:, k] for k, name in enumerate(names)}
    columns["threshold"] = [empirical_quantile(scores[mine], quantile) for mine in rows]
    columns["n_real"] = np.bincount(condition, minlength=len(conditions))
    if groups is not None:
        groups = np.asarray(groups)
        if groups.shape != (len(scores),):
            raise ValueError(f"groups must name one unit per score ({len(scores)}); got shape {groups.shape}")
        columns["n_units"] = [len(np.unique(groups[mine])) for mine in rows]
    n = pl.col("n_units" if groups is not None else "n_real")
    thresholds = pl.DataFrame(columns).with_columns(coverage=(1 + (n - 1) * quantile) / (n + 1))
    few = thresholds.filter(pl.col("n_real") < MIN_CALIBRATION_ROWS)
    if few.height:
        log.warning(
            "%d of %d conditions' P%g thresholds rest on fewer than %d calibration rows (%d to %d): they "
            "accept %.0f–%.0f%% of fresh real samples in expectation, not %g%%",
            few.height,
            thresholds.height,
            100 * quantile,
            MIN_CALIBRATION_ROWS,
            few["n_real"].min(),
            few["n_real"].max(),
            100 * few["coverage"].min(),
            100 * few["coverage"].max(),
            100 * quantile,
        )
    return thresholds


def nearest_seen(condition, seen: np.ndarray) -> np.ndarray:
    """Rows of ``seen`` (M, K) at the minimum Hamming distance from ``condition`` (K,), all ties.

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.trust import nearest_seen
    >>> nearest_seen([0, 1], np.array([[0, 0], [1, 1], [1, 0]])).tolist()  # both one attribute away
    [[0, 0], [1, 1]]
    >>> nearest_seen([0, 1, 1], np.array([[0, 0], [1, 1], [1, 0]]))
    Traceback (most recent call last):
    ...
    ValueError: seen must be (M, K) conditions with M >= 1 and K = 3; got shape (3, 2)
    """
    seen, condition = np.atleast_2d(seen), np.asarray(condition)
    if not seen.size or seen.shape[1] != condition.size:
        raise ValueError(f"seen must be (M, K) conditions with M >= 1 and K = {condition.size}; got shape {seen.shape}")
    distance = (seen != condition).sum(axis=1)
    return seen[distance == distance.min()]


def acceptance(
    trust: np.ndarray, condition, thresholds: pl.DataFrame, names: list[str]
) -> list[tuple[tuple, np.ndarray]]:
    """``[(threshold condition, accepted mask)]`` for samples of one requested ``condition``: its own
    threshold when it was calibrated, else one entry per seen condition tied at the minimum Hamming distance.

    Examples
    --------
    >>> import numpy as np
    >>> import polars as pl
    >>> from condeval.trust import acceptance
    >>> thresholds = pl.DataFrame({"a": [0, 1], "b": [0, 1], "threshold": [1.0, 3.0]})
    >>> for seen, accepted in acceptance(np.array([0.5, 2.0]), [0, 1], thresholds, ["a", "b"]):  # (0, 1) unseen
    ...     print(seen, accepted.tolist())
    (0, 0) [True, False]
    (1, 1) [True, True]
    """
    _check_threshold_columns(thresholds, names)
    seen = thresholds.select(names).to_numpy()
    by_condition = {tuple(row[:-1]): row[-1] for row in thresholds.select(*names, "threshold").iter_rows()}
    own = tuple(int(v) for v in condition)
    references = [own] if own in by_condition else [tuple(int(v) for v in row) for row in nearest_seen(own, seen)]
    return [(ref, np.asarray(trust) <= by_condition[ref]) for ref in references]


def _check_threshold_columns(thresholds: pl.DataFrame, names) -> None:
    missing = [column for column in (*names, "threshold") if column not in thresholds.columns]
    if missing:
        raise ValueError(f"thresholds have no column(s) {missing} (TrustScorer.thresholds() gives one per name)")


def accepted_mask(trust: np.ndarray, attributes: np.ndarray, thresholds: pl.DataFrame, names: list[str]) -> np.ndarray:
    """One accept/reject per sample, for analyses that need a single selected set (CellProfiler's,
    Section 5.1.3): its condition's own threshold, or, for a fallback condition, acceptance by at
    least half of the tied seen conditions' thresholds (the KID protocol averages over them instead).

    ``trust`` (N,) finite reals, ``attributes`` integer (N, K) and ``names`` (K) are checked first, naming
    the argument.

    Examples
    --------
    >>> import numpy as np
    >>> import polars as pl
    >>> from condeval.trust.filtering import accepted_mask
    >>> thresholds = pl.DataFrame({"a": [0, 1], "b": [0, 1], "threshold": [1.0, 3.0]})
    >>> trust = np.array([0.5, 2.0, 2.0, 4.0])
    >>> attributes = np.array([[0, 0], [0, 0], [0, 1], [0, 1]])  # (0, 1) is unseen: one of its two ties suffices
    >>> accepted_mask(trust, attributes, thresholds, ["a", "b"]).tolist()
    [True, False, True, False]
    """
    trust = score_values(trust, name="trust")  # NaN would be rejected silently, -inf accepted
    attributes = attribute_rows(attributes)
    if len(attributes) != len(trust):
        raise ValueError(f"trust has {len(trust)} scores and attributes {len(attributes)} rows: one of each per sample")
    names = attribute_names(names, attributes.shape[1])
    _check_threshold_columns(thresholds, names)
    mask = np.zeros(len(trust), dtype=bool)
    for condition in np.unique(attributes, axis=0):
        rows = (attributes == condition).all(axis=1)
        votes = np.mean([accepted for _, accepted in acceptance(trust[rows], condition, thresholds, names)], axis=0)
        mask[rows] = votes >= 0.5
    return mask


@dataclass(frozen=True)
class KidSettings:
    """How :func:`condeval.metrics.kid` is read throughout the trust track: the subsets' size and number,
    their seed and the kernel (the official code's 500 rows, 10 subsets, seed 0, cosine kernel).

    Parameters
    ----------
    subset_size : int >= 1, default 500
        Rows per KID subset (fewer when a side has fewer rows).
    n_subsets : int >= 1, default 10
        Subsets averaged.
    seed : int, default 0
        Seeds the subsets (and the protocol's random subsets: :func:`selection_gain`).
    kernel : str, default "cosine"
        KID's kernel (:data:`condeval.metrics.KID_KERNELS`).

    Examples
    --------
    >>> KidSettings.from_config({"subset_size": 200, "n_random": 5}, seed=3)
    KidSettings(subset_size=200, n_subsets=10, seed=3, kernel='cosine')
    """

    subset_size: int = 500
    n_subsets: int = 10
    seed: int = 0
    kernel: str = "cosine"

    @classmethod
    def from_config(cls, section: Mapping, *, seed: int = 0) -> KidSettings:
        """The settings of a config's ``selection`` section (``subset_size``, ``n_subsets``, ``kernel``;
        an absent key keeps its default; other keys are not KID's and are left alone), with the job's ``seed``."""
        return cls(**{key: section[key] for key in ("subset_size", "n_subsets", "kernel") if key in section}, seed=seed)

    def measure(self, x, y) -> tuple[float, float]:
        """:func:`condeval.metrics.kid` of ``x`` against ``y`` under these settings: (mean, sd)."""
        return kid(x, y, subset_size=self.subset_size, n_subsets=self.n_subsets, seed=self.seed, kernel=self.kernel)


@dataclass(frozen=True)
class SelectionProtocol:
    """The P95-real protocol's settings (a config's ``selection`` section; the official code's defaults).

    Parameters
    ----------
    quantile : float in (0, 1], default 0.95
        The thresholds' quantile of the real calibration rows' scores (0.95 for the P95), read where the
        thresholds are computed (:meth:`TrustScorer.thresholds`, :func:`condeval.trust.evaluate.scorer_ablation`).
    n_random : int >= 1, default 10
        Random subsets of the generated samples, each the accepted set's size, that the accepted set is
        judged against.
    min_generated, min_real : int, default 20
        Generated and real samples a condition needs, else it is skipped.
    min_accepted : int, default 10
        Accepted samples a (tied fallback) threshold needs, else it is left out.
    kid : KidSettings, default KidSettings()
        How every KID is read; its seed also seeds the random subsets.

    Examples
    --------
    >>> protocol = SelectionProtocol.from_config({"quantile": 0.9, "n_random": 5, "subset_size": 200}, seed=1)
    >>> protocol.n_random, protocol.kid.subset_size, protocol.kid.seed, protocol.min_real
    (5, 200, 1, 20)
    """

    quantile: float = 0.95
    n_random: int = 10
    min_generated: int = 20
    min_real: int = 20
    min_accepted: int = 10
    kid: KidSettings = field(default_factory=KidSettings)

    @classmethod
    def from_config(cls, section: Mapping, *, seed: int = 0) -> SelectionProtocol:
        """The protocol of a config's ``selection`` section (an absent key keeps its default; a key that is
        neither the protocol's nor KID's is refused), with the job's ``seed``."""
        own = ("quantile", "n_random", "min_generated", "min_real", "min_accepted")
        unknown = sorted(set(section) - {*own, "subset_size", "n_subsets", "kernel"})
        if unknown:
            raise ValueError(
                f"selection settings {unknown} are not the protocol's (keys: {[*own, 'subset_size', 'n_subsets', 'kernel']})"
            )
        return cls(
            **{key: section[key] for key in own if key in section}, kid=KidSettings.from_config(section, seed=seed)
        )


def selection_gain(
    generated: np.ndarray,
    trust: np.ndarray,
    real: np.ndarray,
    condition,
    thresholds: pl.DataFrame,
    names: list[str],
    protocol: SelectionProtocol | None = None,
) -> dict:
    """The P95-real selection protocol for one condition's generated features against its real features.

    Parameters
    ----------
    generated : ndarray, shape (n, D)
        Features of the samples generated for ``condition``.
    trust : ndarray, shape (n,)
        Their trust (:meth:`TrustScorer.score`).
    real : ndarray, shape (m, D)
        Held-out real features of ``condition`` (the target, never used by the score).
    condition : sequence of int
        The requested attribute values.
    thresholds : polars.DataFrame
        :meth:`TrustScorer.thresholds` (columns ``names`` and ``threshold``).
    names : list of str
        The attribute columns.
    protocol : SelectionProtocol, optional
        The protocol's sizes, seed and kernel (default: the official code's, ``SelectionProtocol()``).

    Returns
    -------
    dict
        ``accept`` (share accepted, averaged over every tied fallback condition, also when the condition
        is skipped), ``kid_accepted`` and ``kid_random`` (means) with their standard deviations,
        ``kid_all``, ``improvement`` and ``band`` (None where :func:`relative_improvement` is undefined),
        averaged over the tied fallback conditions with ``min_accepted`` accepted samples;
        ``fallback`` (how many thresholds were used, 0 for a calibrated condition), ``n_generated`` and
        ``n_real`` (the rows compared) and ``skipped`` (the reason, or None).

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.trust import TrustScorer, selection_gain
    >>> rng = np.random.default_rng(0)
    >>> w = rng.normal(size=(2, 8))  # how the two attributes move the features
    >>> attributes = rng.integers(0, 2, size=(400, 2))
    >>> scorer = TrustScorer().fit(rng.normal(size=(400, 8)) + 2 * attributes @ w, attributes)
    >>> condition = np.array([1, 0])
    >>> real = rng.normal(size=(40, 8)) + 2 * condition @ w  # held-out real rows of the condition
    >>> generated = rng.normal(size=(60, 8)) + 2 * condition @ w
    >>> generated[::2] += rng.normal(scale=3, size=(30, 8))  # every other sample degraded
    >>> trust = scorer.score(generated, np.tile(condition, (60, 1)))["trust"]
    >>> gain = selection_gain(generated, trust, real, condition, scorer.thresholds(), scorer.names_)
    >>> round(gain["accept"], 2), bool(gain["kid_accepted"] < gain["kid_random"]), gain["skipped"]
    (0.62, True, None)
    """
    protocol = SelectionProtocol() if protocol is None else protocol
    generated, real = np.asarray(generated), np.asarray(real)
    trust = score_values(trust, len(generated), "trust")
    entries = acceptance(trust, condition, thresholds, names)
    own = tuple(int(v) for v in condition)
    row = {
        "fallback": 0 if entries[0][0] == own else len(entries),
        "n_generated": len(generated),
        "n_real": len(real),
        # every sample counts in Accept%, skipped condition or not (the paper's "samples that pass")
        "accept": float(np.mean([accepted.mean() for _, accepted in entries])) if len(generated) else None,
    }
    if len(generated) < protocol.min_generated or len(real) < protocol.min_real:
        return row | {"skipped": f"fewer than {protocol.min_generated} generated or {protocol.min_real} real samples"}
    per_entry = [
        _entry_gain(generated, real, accepted, protocol)
        for _, accepted in entries
        if accepted.sum() >= protocol.min_accepted
    ]
    if not per_entry:
        return row | {"skipped": f"fewer than {protocol.min_accepted} accepted samples"}
    return row | _averaged(per_entry) | {"kid_all": protocol.kid.measure(generated, real)[0], "skipped": None}


def _averaged(per_entry: list[dict]) -> dict:
    """Each key's mean over the tied fallback entries; a tied entry without a defined improvement leaves
    the condition's undefined (None)."""
    return {
        key: None if any(e[key] is None for e in per_entry) else float(np.mean([e[key] for e in per_entry]))
        for key in per_entry[0]
    }


def _entry_gain(generated: np.ndarray, real: np.ndarray, accepted: np.ndarray, protocol: SelectionProtocol) -> dict:
    """One threshold's accepted samples against ``n_random`` random subsets of their size: KIDs and gain."""
    rng = np.random.default_rng(protocol.kid.seed)
    acc_mean, acc_std = protocol.kid.measure(generated[accepted], real)
    randoms = [
        protocol.kid.measure(generated[rng.choice(len(generated), int(accepted.sum()), replace=False)], real)[0]
        for _ in range(protocol.n_random)
    ]
    rand_mean, rand_std = float(np.mean(randoms)), float(np.std(randoms))
    improvement, band = relative_improvement(acc_mean, rand_mean, acc_std, rand_std)
    return {
        "kid_accepted": acc_mean,
        "kid_accepted_std": acc_std,
        "kid_random": rand_mean,
        "kid_random_std": rand_std,
        "improvement": improvement,
        "band": band,
    }


#: A table's cell for an improvement that :func:`relative_improvement` leaves undefined.
UNDEFINED_GAIN = "undefined (KID random ≤ 0)"


def relative_improvement(kid_trust: float, kid_random: float, std_trust: float, std_random: float):
    """``(KID_random − KID_trust) / KID_random`` and its band ``1.96 √(s_trust² + s_random²) / KID_random``.

    Returns ``(None, None)`` when ``KID_random ≤ 0``: the unbiased KID estimate of random subsets can
    reach zero or below (a good generator, small subsets), where the ratio is meaningless and its sign
    flips (a worse selection would read as a large gain).
    """
    if not kid_random > 0:
        return None, None
    return (kid_random - kid_trust) / kid_random, 1.96 * float(np.hypot(std_trust, std_random)) / kid_random


def support_distance(conditions: np.ndarray, support: np.ndarray) -> np.ndarray:
    """Each condition's minimum Hamming distance to the training support (Appendix J's graded shift):
    0 for a seen condition, 1 for one attribute away, and so on.

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.trust import support_distance
    >>> support_distance(np.array([[0, 0], [0, 1], [1, 1]]), np.array([[0, 0], [1, 0]])).tolist()
    [0, 1, 1]
    """
    conditions, support = np.atleast_2d(conditions), np.atleast_2d(support)
    if not support.size or support.shape[1] != conditions.shape[1]:
        raise ValueError(
            f"support must be (S, K) conditions with S >= 1 and the conditions' K = "
            f"{conditions.shape[1]}; got shape {support.shape}"
        )
    return (conditions[:, None, :] != support[None, :, :]).sum(axis=2).min(axis=1)
