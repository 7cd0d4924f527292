"""Validation in CellProfiler's morphology space (Section 5.1.3 and its appendix).

From CellProfiler's ``Image.csv`` (:mod:`condeval.trust.cellprofiler`) of real and generated sites:

- :class:`MorphologyFeatures`, the paper's feature pipeline: (i) drop metadata columns (the paper's
  regex: metadata, file and path names, image and object numbers, execution times, module errors,
  series, frame, group, url) and keep the numeric rest; (ii) drop rows with a NaN (counted) and keep
  the queried conditions; (iii) a variance threshold (1e-5) and an outlier filter, both on real data:
  a column is dropped when any real value lies more than 5 real standard deviations from the real
  mean (the paper: 621 of 2,467 columns kept); (iv) a StandardScaler fitted on real rows, reused for
  every readout. ``unfiltered=True`` stops after zero-variance pruning (the sanity check's set).
- The centroid analysis runs on every kept column (the paper: "the kept-621 set used throughout the
  centroid and per-feature correlation analyses"). :func:`centroid_features` is the official code's
  narrower option for it: by ANOVA F on the condition, skipping any column whose |Pearson r| with one
  already kept exceeds 0.7, the top ``k`` (its 15; 5 and 20 as sensitivity).
- :func:`real_spread`: per condition, ``T`` random half-splits of its real rows: the distances of one
  half's rows to the other half's centroid give the real–real mean ``m_c`` and spread ``s_c``.
- :func:`centroid_z`: a generated sample's distance to its condition's real centroid, standardised,
  ``z = (d − m_c) / s_c``: 0 is as far as a typical real sample, above 0 excess deviation.
- :func:`selection_contrast`: trust-selected samples against condition-matched random subsets of the
  same size, the difference in mean ``z`` and its bootstrap CI, resampled within each condition
  (stratified, as the paper says; paired, since both arms are drawn from the same samples) or each
  arm's pool as a whole (the official code's).
- :func:`feature_correlations`: per feature, the Pearson correlation across conditions between the
  generated subset's per-condition means and the real ones, under trust and under random selection.
"""

from __future__ import annotations

import logging
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import polars as pl

from condeval.core.conformal import empirical_quantile
from condeval.core.io import integer_array
from condeval.trust.checks import attribute_names, flags, same_rows

__all__ = [
    "METADATA_PATTERN",
    "DECILE_BINNINGS",
    "MorphologyFeatures",
    "drop_nan_rows",
    "real_rows",
    "generated_rows",
    "morphology_readouts",
    "CentroidSettings",
    "MorphologyDeciles",
    "centroid_features",
    "real_spread",
    "centroid_z",
    "random_matched",
    "selection_contrast",
    "feature_correlations",
]

log = logging.getLogger(__name__)

#: Columns that describe the image or the run, not the cells (the paper's list, case-insensitive).
METADATA_PATTERN = re.compile(
    r"metadata|filename|pathname|imagenumber|objectnumber|executiontime|moduleerror|series|frame|^group_|url"
    r"|md5digest|^name$",
    re.IGNORECASE,
)
VARIANCE_THRESHOLD = 1e-5
OUTLIER_Z = 5.0
CORRELATION_PRUNE = 0.7
#: Fig. 3's binnings: class-balanced within each condition (the paper), or global (the official code's legacy).
DECILE_BINNINGS = ("within_condition", "global")
#: Conditions a per-feature correlation across conditions needs (with 2 it is ±1).
MIN_CORRELATION_CONDITIONS = 3
#: The attribute column of Fig. 3's cell-type classifier (RxRx1's, as condeval.trust.data names it).
CELL_TYPE = "cell_type_id"
#: The per-feature correlation table, also when no arm has one.
CORRELATION_SCHEMA = {
    "feature": pl.String,
    "conditions": pl.Int64,
    "r_trust": pl.Float64,
    "r_trust_low": pl.Float64,
    "r_trust_high": pl.Float64,
    "r_random": pl.Float64,
    "gain": pl.Float64,
    "arm": pl.String,
    "set": pl.String,
}


def real_rows(
    table: pl.DataFrame, conditions: np.ndarray, names: list[str], per_condition: int | None = None
) -> pl.DataFrame:
    """The rows of the queried ``conditions`` (the paper's canonical 50), every split; at most the first
    ``per_condition`` of each, in table order."""
    wanted = pl.DataFrame({name: np.asarray(conditions)[:, k] for k, name in enumerate(names)})
    rows = table.join(wanted.unique(), on=names, how="semi", maintain_order="left")
    if per_condition is None:
        return rows
    return rows.filter(pl.int_range(pl.len()).over(names) < per_condition)


def generated_rows(sample_ids: np.ndarray, per_condition: int, measured: int) -> np.ndarray:
    """Indices of the samples CellProfiler measures: the first ``measured`` of each condition's
    ``per_condition`` (a sample's condition is ``sample_id // per_condition``, as trust_generate writes)."""
    sample_ids = np.asarray(sample_ids)
    return np.flatnonzero(sample_ids % per_condition < measured)


def _numeric_features(frame: pl.DataFrame) -> list[str]:
    return [c for c, t in frame.schema.items() if t.is_numeric() and not METADATA_PATTERN.search(c)]


def drop_nan_rows(frame: pl.DataFrame, exclude=(), what: str = "rows") -> pl.DataFrame:
    """``frame`` without the rows that hold a NaN or infinite value in any CellProfiler feature column
    (numeric, not metadata, not in ``exclude``), the count in the log: the paper's step (ii)."""
    columns = [c for c in _numeric_features(frame) if c not in set(exclude)]
    finite = np.isfinite(frame.select(columns).to_numpy().astype(np.float64)).all(axis=1)
    if not finite.all():
        log.warning(
            "%s: %d of %d rows dropped for NaN or infinite CellProfiler features",
            what,
            int((~finite).sum()),
            len(finite),
        )
    return frame.filter(pl.Series(finite))


class MorphologyFeatures:
    """The feature pipeline, fitted on real rows (see the module's description).

    Parameters
    ----------
    unfiltered : bool
        Stop after zero-variance pruning (the sanity check's set).
    exclude : tuple of str
        Numeric columns that are not CellProfiler's (the attributes and ids a caller joined).

    Attributes
    ----------
    columns : list of str
        The kept columns, in ``Image.csv`` order.
    counts : dict
        Columns after each step: ``numeric``, ``variance``, ``outlier`` (the kept count).
    """

    def __init__(self, unfiltered: bool = False, exclude: tuple[str, ...] = ()):
        self.unfiltered, self.exclude = unfiltered, set(exclude)

    def fit(self, real: pl.DataFrame) -> MorphologyFeatures:
        """Choose the columns and fit the scaler on ``real`` (its NaN rows dropped, counted in the log)."""
        from sklearn.feature_selection import VarianceThreshold
        from sklearn.preprocessing import StandardScaler

        numeric = [c for c in _numeric_features(real) if c not in self.exclude]
        x = self._rows(real, numeric, "real")
        variance = VarianceThreshold(0.0 if self.unfiltered else VARIANCE_THRESHOLD).fit(x).get_support()
        kept = variance.copy()
        if not self.unfiltered:
            z = (x - x.mean(axis=0)) / np.where(x.std(axis=0) > 0, x.std(axis=0), 1.0)
            kept &= np.abs(z).max(axis=0) <= OUTLIER_Z
        self.columns = [c for c, keep in zip(numeric, kept, strict=True) if keep]
        self.counts = {"numeric": len(numeric), "variance": int(variance.sum()), "outlier": len(self.columns)}
        self.scaler = StandardScaler().fit(x[:, kept])
        log.info("morphology features: %s (unfiltered=%s)", self.counts, self.unfiltered)
        return self

    def transform(self, frame: pl.DataFrame, what: str = "rows") -> tuple[np.ndarray, np.ndarray]:
        """(standardised features of the rows without a NaN, mask of the rows kept)."""
        missing = [c for c in self.columns if c not in frame.columns]
        if missing:
            raise ValueError(f"{what}: CellProfiler columns missing: {missing[:5]} ({len(missing)} in all)")
        x = frame.select(self.columns).to_numpy().astype(np.float64)
        finite = np.isfinite(x).all(axis=1)
        if not finite.all():
            log.warning(
                "%s: %d of %d rows dropped for NaN or infinite CellProfiler features%s",
                what,
                int((~finite).sum()),
                len(x),
                "" if finite.any() else " (none left: did CellProfiler find no cells in these images?)",
            )
        if not finite.any():  # a generator that draws no cells: nothing measured, reported as such, not a crash
            return np.zeros((0, len(self.columns))), finite
        return self.scaler.transform(x[finite]), finite

    @staticmethod
    def _rows(frame: pl.DataFrame, columns: list[str], what: str) -> np.ndarray:
        x = frame.select(columns).to_numpy().astype(np.float64)
        finite = np.isfinite(x).all(axis=1)
        if not finite.all():
            log.warning("%s: %d of %d rows dropped for NaN CellProfiler features", what, int((~finite).sum()), len(x))
        if finite.sum() < 2:
            raise ValueError(f"{what}: fewer than two rows without NaN ({int(finite.sum())} of {len(x)})")
        return x[finite]


def centroid_features(x: np.ndarray, codes: np.ndarray, k: int = 15, prune: float = CORRELATION_PRUNE) -> np.ndarray:
    """Indices of the top ``k`` columns of real ``x`` by ANOVA F on ``codes``, skipping any with |r| > ``prune``
    against a column already kept."""
    from sklearn.feature_selection import f_classif

    f_values, _ = f_classif(x, codes)
    order = np.argsort(-np.nan_to_num(f_values, nan=-np.inf), kind="stable")
    correlation = np.abs(np.corrcoef(x, rowvar=False))
    kept: list[int] = []
    for column in order:
        if len(kept) == k:
            break
        if all(correlation[column, other] <= prune for other in kept):
            kept.append(int(column))
    return np.asarray(kept)


def real_spread(
    x: np.ndarray, codes: np.ndarray, *, n_splits: int = 10, seed: int = 42, min_real: int = 4
) -> dict[int, tuple[float, float]]:
    """Condition code → (m_c, s_c): mean and sd of held-out real rows' distance to the other half's
    centroid; a condition with fewer than ``min_real`` real rows has none (logged)."""
    rng = np.random.default_rng(seed)
    spread = {}
    for code in np.unique(codes):
        rows = np.flatnonzero(codes == code)
        if len(rows) < min_real:
            log.warning(
                "condition %d: %d real rows, fewer than the %d a real-real spread needs; its samples get no centroid z",
                int(code),
                len(rows),
                min_real,
            )
            continue
        distances = []
        for _ in range(n_splits):
            order = rng.permutation(rows)
            a, b = order[: len(rows) // 2], order[len(rows) // 2 :]
            distances.append(np.linalg.norm(x[b] - x[a].mean(axis=0), axis=1))
        distances = np.concatenate(distances)
        spread[int(code)] = (float(distances.mean()), float(distances.std(ddof=1)))
    return spread


def centroid_z(
    real: np.ndarray,
    real_codes: np.ndarray,
    generated: np.ndarray,
    generated_codes: np.ndarray,
    spread: dict[int, tuple[float, float]],
) -> np.ndarray:
    """Each generated row's ``(d − m_c) / s_c``, ``d`` its distance to its condition's real centroid;
    NaN where the condition has no ``spread``."""
    z = np.full(len(generated), np.nan)
    for code, (mean, sd) in spread.items():
        rows = generated_codes == code
        if rows.any():
            centroid = real[real_codes == code].mean(axis=0)
            z[rows] = (np.linalg.norm(generated[rows] - centroid, axis=1) - mean) / sd
    return z


def random_matched(codes: np.ndarray, accepted: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A random mask with, in each condition, as many rows as ``accepted`` has there."""
    mask = np.zeros(len(codes), dtype=bool)
    for code in np.unique(codes):
        rows = np.flatnonzero(codes == code)
        mask[rng.choice(rows, size=int(accepted[rows].sum()), replace=False)] = True
    return mask


def _paired_bootstrap(z: np.ndarray, codes: np.ndarray, accepted: np.ndarray, n_boot: int, rng) -> dict:
    """Per replicate, resampling samples within each condition with their accept flags: the trust arm's
    mean, the random arm's expectation (each condition's mean, weighted by its accepted count) and the
    accepted share, in %."""
    accepted_z = np.zeros(n_boot)
    accepted_n = np.zeros(n_boot)
    matched = np.zeros(n_boot)
    for code in np.unique(codes):
        rows = np.flatnonzero(codes == code)
        drawn = rows[rng.integers(0, len(rows), (n_boot, len(rows)))]
        flags = accepted[drawn]
        accepted_z += (z[drawn] * flags).sum(axis=1)
        accepted_n += flags.sum(axis=1)
        matched += flags.sum(axis=1) * z[drawn].mean(axis=1)
    share = 100.0 * accepted_n / len(z)
    accepted_n = np.maximum(accepted_n, 1)
    return {"z_trust": accepted_z / accepted_n, "z_random": matched / accepted_n, "accept_pct": share}


def _pooled_bootstrap(trust_arm: np.ndarray, random_arm: np.ndarray, n_boot: int, rng) -> dict:
    """Per replicate, each arm's pool resampled whole and on its own (the official code's): its means."""

    def means(pool):
        return pool[rng.integers(0, len(pool), (n_boot, len(pool)))].mean(axis=1)

    return {"z_trust": means(trust_arm), "z_random": means(random_arm)}


def selection_contrast(
    z: np.ndarray,
    codes: np.ndarray,
    accepted: np.ndarray,
    *,
    n_random: int = 5,
    n_boot: int = 2000,
    level: float = 0.95,
    stratified: bool = True,
    seed: int = 42,
) -> dict:
    """Trust-selected against condition-matched random samples in centroid ``z``.

    Parameters
    ----------
    z, codes : ndarray, shape (N,)
        Each generated sample's :func:`centroid_z` (NaN rows are left out) and condition code.
    accepted : ndarray of bool, shape (N,)
        Trust's P95-real acceptance.
    n_random : int
        Random subsets averaged for the random arm (each condition-matched: :func:`random_matched`).
    n_boot, level : int, float
        Bootstrap replicates and the CI's level (percentile interval).
    seed : int
        Of the random subsets and the bootstrap.
    stratified : bool
        The paper's bootstrap, stratified by condition: samples resampled within each condition with
        their accept flags, the trust arm's mean set against the random arm's expectation under that
        resample (paired). ``False``: the official code's, each arm's pool resampled whole and alone
        (it ignores that the two arms share samples, and is wider).

    Returns
    -------
    dict
        ``n_accepted``, ``accept_pct``, ``z_trust``, ``z_random``, ``delta`` (trust − random),
        ``ci_low``, ``ci_high`` (``delta``'s interval), ``removed_pct`` (share of the random arm's excess
        the selection removes), and from the same replicates ``z_trust_low`` / ``_high``,
        ``z_random_low`` / ``_high`` and, stratified, ``accept_pct_low`` / ``_high``.
    """
    z = np.asarray(z, dtype=np.float64)
    accepted = flags(accepted, len(z), "accepted")  # 0/1 integers as indices would pick rows 0 and 1
    same_rows(len(z), codes=codes)
    keep = np.isfinite(z)
    z, codes, accepted = z[keep], np.asarray(codes)[keep], accepted[keep]
    if not accepted.any():
        raise ValueError(f"no accepted sample among the {len(z)} with a centroid z: nothing to contrast")
    rng = np.random.default_rng(seed)
    randoms = [random_matched(codes, accepted, rng) for _ in range(n_random)]
    z_trust = float(z[accepted].mean())
    z_random = float(np.mean([z[mask].mean() for mask in randoms]))
    if stratified:
        replicates = _paired_bootstrap(z, codes, accepted, n_boot, rng)
    else:
        replicates = _pooled_bootstrap(z[accepted], np.concatenate([z[mask] for mask in randoms]), n_boot, rng)
    replicates["delta"] = replicates["z_trust"] - replicates["z_random"]
    ends = [(1 - level) / 2, (1 + level) / 2]
    bounds = {name: [float(end) for end in empirical_quantile(values, ends)] for name, values in replicates.items()}
    intervals = {
        f"{name}_{end}": bound for name, (low, high) in bounds.items() for end, bound in (("low", low), ("high", high))
    }
    return {
        "n_accepted": int(accepted.sum()),
        "accept_pct": 100.0 * float(accepted.mean()),
        "z_trust": z_trust,
        "z_random": z_random,
        "delta": z_trust - z_random,
        "ci_low": intervals.pop("delta_low"),
        "ci_high": intervals.pop("delta_high"),
        "removed_pct": 100.0 * (1.0 - z_trust / z_random) if z_random > 0 else float("nan"),
    } | intervals


def feature_correlations(
    real: np.ndarray,
    real_codes: np.ndarray,
    generated: np.ndarray,
    generated_codes: np.ndarray,
    accepted: np.ndarray,
    columns: list[str],
    *,
    n_random: int = 5,
    seed: int = 0,
) -> pl.DataFrame:
    """Per feature: Pearson r across conditions between the generated subset's per-condition means and
    the real ones, under trust (``r_trust``, with its 95% interval by Fisher's z from scipy's ``pearsonr``,
    ``r_trust_low`` / ``_high``: (−1, 1) across 3 conditions) and under condition-matched random selection
    (``r_random``, the mean over ``n_random`` draws), ``gain = r_trust − r_random``, and the number of
    ``conditions`` they run across.

    The conditions are those with real sites and accepted samples; with fewer than 3 a correlation
    across them is undefined (or ±1), and ``ValueError`` says so. A feature constant across the
    conditions in either arm has no correlation and no row (the log counts them).
    """
    codes = _correlated_conditions(real_codes, generated_codes, accepted)
    if len(codes) < MIN_CORRELATION_CONDITIONS:
        raise ValueError(
            f"accepted samples in {len(codes)} condition(s) with real sites: a correlation across "
            f"conditions needs {MIN_CORRELATION_CONDITIONS}"
        )
    real_means = np.stack([real[real_codes == c].mean(axis=0) for c in codes])

    def correlation(mask: np.ndarray):
        from scipy.stats import ConstantInputWarning, pearsonr

        means = np.stack([generated[mask & (generated_codes == c)].mean(axis=0) for c in codes])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConstantInputWarning)  # counted below, as features without a row
            return pearsonr(means, real_means, axis=0)

    rng = np.random.default_rng(seed)
    trust = correlation(accepted)
    r_trust, (r_low, r_high) = trust.statistic, trust.confidence_interval(0.95)
    r_random = np.mean(
        [correlation(random_matched(generated_codes, accepted, rng)).statistic for _ in range(n_random)], axis=0
    )
    defined = np.isfinite(r_trust) & np.isfinite(r_random)
    if not defined.all():
        log.info(
            "%d of %d features constant across the %d conditions: no correlation",
            int((~defined).sum()),
            len(columns),
            len(codes),
        )
    frame = pl.DataFrame(
        {
            "feature": columns,
            "conditions": len(codes),
            "r_trust": r_trust,
            "r_trust_low": r_low,
            "r_trust_high": r_high,
            "r_random": r_random,
            "gain": r_trust - r_random,
        }
    )
    return frame.filter(pl.Series(defined))


def _correlated_conditions(real_codes: np.ndarray, generated_codes: np.ndarray, accepted: np.ndarray) -> np.ndarray:
    """The conditions a per-feature correlation runs across: those with real sites and accepted samples."""
    return np.intersect1d(np.unique(real_codes), np.unique(generated_codes[accepted]))


def _codes(attributes: np.ndarray, conditions: np.ndarray) -> np.ndarray:
    lookup = {tuple(row): k for k, row in enumerate(np.asarray(conditions).tolist())}
    return np.array([lookup.get(tuple(row), -1) for row in np.asarray(attributes).tolist()], dtype=np.int64)


def _attribute_columns(frame: pl.DataFrame, names: list[str], what: str) -> pl.DataFrame:
    """``frame`` with its attribute columns ``names`` as Int64 (a CSV may read them as floats; joins need one
    type), refused naming the table and column when one is missing or holds a value that is not whole."""
    missing = [name for name in names if name not in frame.columns]
    if missing:
        raise ValueError(f"the {what} table lacks attribute column(s) {missing}")
    for name in names:
        values = frame[name].to_numpy()
        if values.dtype.kind == "f" and np.isfinite(values).all() and (values == np.round(values)).all():
            values = values.astype(np.int64)  # 3.0 read from a CSV is the id 3; 0.6 is no id
        integer_array(values, f"the {what} table's {name!r}")
    return frame.with_columns(pl.col(names).cast(pl.Int64))


@dataclass(frozen=True)
class CentroidSettings:
    """Section 5.1.3's centroid analysis (:func:`morphology_readouts`): the features its distance reads,
    the real–real spread, the random arm and the bootstrap.

    Parameters
    ----------
    top_k : int, optional
        None (or 0): the centroid distance over every kept column (the paper); k: over the top k of
        :func:`centroid_features` (the official code's raw-distance stage: 15).
    half_splits : int, default 10
        Real–real half-splits per condition (:func:`real_spread`'s ``n_splits``; the paper's T).
    n_boot : int, default 2000
        Bootstrap replicates (:func:`selection_contrast`).
    stratified : bool, default True
        The paper's bootstrap within each condition; False: the official code's, each pool whole.
    n_random : int, default 5
        Condition-matched random subsets averaged (the contrast's and the per-feature correlations').
    seed : int, default 42
        Of the spread, the random subsets and the bootstrap.

    Examples
    --------
    >>> CentroidSettings.from_config({"top_k": 0, "half_splits": 10, "bootstrap": 200, "stratified": True,
    ...                               "random_draws": 5, "seed": 42}).n_boot
    200
    """

    top_k: int | None = None
    half_splits: int = 10
    n_boot: int = 2000
    stratified: bool = True
    n_random: int = 5
    seed: int = 42

    @classmethod
    def from_config(cls, section: Mapping) -> CentroidSettings:
        """The settings of a config's ``morphology`` section (``top_k``, ``half_splits``, ``bootstrap``,
        ``stratified``, ``random_draws``, ``seed``)."""
        return cls(
            top_k=section["top_k"],
            half_splits=section["half_splits"],
            n_boot=section["bootstrap"],
            stratified=section["stratified"],
            n_random=section["random_draws"],
            seed=section["seed"],
        )


@dataclass(frozen=True)
class MorphologyDeciles:
    """Fig. 3's trust bins in CellProfiler's space (:func:`morphology_readouts`), each training logistic
    classifiers (cell type; condition) tested on real rows.

    Parameters
    ----------
    n_bins : int, default 10
        Trust bins.
    binning : str, default "within_condition"
        One of :data:`DECILE_BINNINGS`: ``"within_condition"`` (class-balanced: each condition's samples
        ranked into equal bins, bin i merged across conditions, as Fig. 9(a) which the paper repeats) or
        ``"global"`` (equal bins of all samples, the official code's legacy binning).
    classifier_seeds : tuple of int, default (0, 1, 2, 3, 4)
        Each bin's classifiers' seeds (:func:`~condeval.trust.deciles.decile_classifier`).

    Examples
    --------
    >>> MorphologyDeciles.from_config({"n_bins": 3, "deciles": "global", "classifier_seeds": 2})
    MorphologyDeciles(n_bins=3, binning='global', classifier_seeds=(0, 1))
    """

    n_bins: int = 10
    binning: str = "within_condition"
    classifier_seeds: tuple[int, ...] = (0, 1, 2, 3, 4)

    def __post_init__(self):
        if self.binning not in DECILE_BINNINGS:
            raise ValueError(f"deciles={self.binning!r}: one of {DECILE_BINNINGS}")

    @classmethod
    def from_config(cls, section: Mapping) -> MorphologyDeciles:
        """The settings of a config's ``morphology`` section: ``n_bins``, ``deciles`` (the binning) and
        ``classifier_seeds``, a count (seeds 0 to count − 1)."""
        return cls(
            n_bins=section["n_bins"],
            binning=section["deciles"],
            classifier_seeds=tuple(range(section["classifier_seeds"])),
        )


@dataclass(frozen=True)
class _Measured:
    """One feature set's rows of both tables: standardised features, condition codes, accept flags."""

    x_real: np.ndarray
    real_codes: np.ndarray
    x_gen: np.ndarray
    gen_codes: np.ndarray
    accepted: np.ndarray
    columns: list


def morphology_readouts(
    real: pl.DataFrame,
    generated: pl.DataFrame,
    names: list[str],
    conditions: np.ndarray,
    seen: np.ndarray,
    *,
    centroid: CentroidSettings | None = None,
    deciles: MorphologyDeciles | None = None,
) -> dict:
    """Section 5.1.3's readouts of one generator from CellProfiler tables of real and generated sites.

    Parameters
    ----------
    real, generated : polars.DataFrame
        ``Image.csv`` rows with the attribute columns ``names``; ``generated`` also has ``trust`` and
        ``accepted`` (P95-real, :func:`~condeval.trust.filtering.accepted_mask`).
    names : list of str
        The attribute columns (integers; RxRx1's ``cell_type_id`` among them, for Fig. 3's cell-type
        classifier).
    conditions : ndarray, shape (M, K)
        The queried conditions.
    seen : ndarray of bool, shape (M,)
        Which conditions are in the training support (the two arms); 0/1 integers are read as flags.
    centroid : CentroidSettings, optional
        The centroid analysis (default ``CentroidSettings()``: the paper's 10 half-splits, 2,000
        stratified bootstrap replicates, seed 42, every kept column).
    deciles : MorphologyDeciles, optional
        Fig. 3's bins and classifiers (default ``MorphologyDeciles()``).

    Returns
    -------
    dict
        ``counts`` (the feature pipeline's column counts, filtered and unfiltered), ``contrast`` (one row
        per arm: :func:`selection_contrast`), ``correlations`` (per arm, set and feature) and ``deciles``.
    """
    centroid = CentroidSettings() if centroid is None else centroid
    deciles = MorphologyDeciles() if deciles is None else deciles
    names, conditions, seen, real, generated = _readout_inputs(real, generated, names, conditions, seen)
    joined = (*names, "sample_id", "trust", "accepted")  # what the workflow joined to CellProfiler's columns
    # the paper's step (ii), once: every readout and both feature sets use the same real rows
    real = drop_nan_rows(real_rows(real, conditions, names), joined, "real")
    generated = real_rows(generated, conditions, names)
    filtered = MorphologyFeatures(exclude=joined).fit(real)
    unfiltered = MorphologyFeatures(unfiltered=True, exclude=joined).fit(real)
    kept, real_kept, gen_kept = _measure(filtered, real, generated, names, conditions, "")
    top, z = _centroid_distances(kept, centroid)
    sets = {"kept": kept, "unfiltered": _measure(unfiltered, real, generated, names, conditions, " (unfiltered)")[0]}
    contrast, correlations = _arm_readouts(z, seen, sets, centroid)
    counts = filtered.counts | {"unfiltered": unfiltered.counts["outlier"]} | _row_counts(kept, filtered, top, centroid)
    cell_types = _cell_types(real, generated, names, real_kept, gen_kept)
    return {
        "counts": counts,
        "contrast": pl.DataFrame(contrast),
        "correlations": pl.concat(correlations) if correlations else pl.DataFrame(schema=CORRELATION_SCHEMA),
        "deciles": _cp_deciles(kept, generated["trust"].to_numpy()[gen_kept], cell_types, deciles),
    }


def _centroid_distances(kept: _Measured, centroid: CentroidSettings) -> tuple[np.ndarray, np.ndarray]:
    """(the columns the centroid distance reads, each generated row's :func:`centroid_z` in them)."""
    top = centroid_features(kept.x_real, kept.real_codes, k=centroid.top_k) if centroid.top_k else None
    top = np.arange(kept.x_real.shape[1]) if top is None else top
    spread = real_spread(kept.x_real[:, top], kept.real_codes, n_splits=centroid.half_splits, seed=centroid.seed)
    return top, centroid_z(kept.x_real[:, top], kept.real_codes, kept.x_gen[:, top], kept.gen_codes, spread)


def _row_counts(kept: _Measured, filtered: MorphologyFeatures, top: np.ndarray, centroid: CentroidSettings) -> dict:
    """The readouts' counts beside the pipeline's: rows measured, the centroid's features."""
    return {
        "real_rows": len(kept.x_real),
        "generated_rows": len(kept.x_gen),
        "centroid_features": [filtered.columns[k] for k in top],
        "centroid_top_k": centroid.top_k or None,
    }


def _cell_types(real, generated, names, real_kept, gen_kept) -> tuple[np.ndarray, np.ndarray]:
    """(generated, real) cell type of each measured row: Fig. 3's first classifier's target."""
    cell_type = names.index(CELL_TYPE)
    return (
        generated.select(names).to_numpy()[gen_kept][:, cell_type],
        real.select(names).to_numpy()[real_kept][:, cell_type],
    )


def _readout_inputs(real, generated, names, conditions, seen) -> tuple:
    """:func:`morphology_readouts`'s inputs checked: (names, conditions, seen flags, real, generated), the
    tables' attribute columns as Int64."""
    names = attribute_names(names)
    if CELL_TYPE not in names:
        raise ValueError(f"names {names} lack {CELL_TYPE!r}: Fig. 3's first classifier predicts the cell type")
    conditions = np.asarray(conditions)
    if conditions.ndim != 2 or conditions.shape[1] != len(names):
        raise ValueError(f"conditions must be (M, K) with K = {len(names)} (names); got shape {conditions.shape}")
    seen = flags(seen, len(conditions), "seen")  # ~ of 0/1 integers is -1/-2: every condition unseen
    real, generated = _attribute_columns(real, names, "real"), _attribute_columns(generated, names, "generated")
    missing = [column for column in ("trust", "accepted") if column not in generated.columns]
    if missing:
        raise ValueError(f"the generated table lacks column(s) {missing} (its samples' trust and P95-real acceptance)")
    return names, conditions, seen, real, generated


def _measure(features: MorphologyFeatures, real, generated, names, conditions, label: str) -> tuple:
    """(:class:`_Measured` of both tables in ``features``' columns, real rows kept, generated rows kept)."""
    x_real, real_kept = features.transform(real, f"real{label}")
    x_gen, gen_kept = features.transform(generated, f"generated{label}")
    real_codes = _codes(real.select(names).to_numpy()[real_kept], conditions)
    gen_codes = _codes(generated.select(names).to_numpy()[gen_kept], conditions)
    accepted = flags(generated["accepted"].to_numpy(), name="generated['accepted']")[gen_kept]
    return _Measured(x_real, real_codes, x_gen, gen_codes, accepted, features.columns), real_kept, gen_kept


def _arm_readouts(z: np.ndarray, seen: np.ndarray, sets: dict, centroid: CentroidSettings) -> tuple[list, list]:
    """Per arm (seen, unseen): the contrast row in centroid ``z`` (of the ``kept`` set) and each set's
    per-feature correlations."""
    kept = sets["kept"]
    contrast, correlations = [], []
    for arm, in_arm in (("seen", np.flatnonzero(seen)), ("unseen", np.flatnonzero(~seen))):
        rows = np.isin(kept.gen_codes, in_arm) & np.isfinite(z)  # z is NaN where a condition has too few real sites
        if not kept.accepted[rows].any():
            log.warning("%s arm: no accepted sample with a real-real spread to compare; no row", arm)
            continue
        contrast.append(
            {"arm": arm, "n_generated": int(rows.sum())}
            | selection_contrast(
                z[rows],
                kept.gen_codes[rows],
                kept.accepted[rows],
                n_random=centroid.n_random,
                n_boot=centroid.n_boot,
                stratified=centroid.stratified,
                seed=centroid.seed,
            )
        )
        for name, measured in sets.items():
            frame = _arm_correlations(measured, in_arm, arm, name, centroid)
            if frame is not None:
                correlations.append(frame.with_columns(arm=pl.lit(arm), set=pl.lit(name)))
    return contrast, correlations


def _arm_correlations(measured: _Measured, in_arm, arm: str, name: str, centroid: CentroidSettings):
    """:func:`feature_correlations` of one arm in one feature set, or None (logged) with too few conditions."""
    gc, acc = measured.gen_codes, measured.accepted
    mine = np.isin(gc, in_arm)
    conditions_accepted = len(_correlated_conditions(measured.real_codes, gc[mine], acc[mine]))
    if conditions_accepted < MIN_CORRELATION_CONDITIONS:
        log.warning(
            "%s arm, %s set: accepted samples in %d condition(s); no per-feature correlations (they need %d)",
            arm,
            name,
            conditions_accepted,
            MIN_CORRELATION_CONDITIONS,
        )
        return None
    return feature_correlations(
        measured.x_real,
        measured.real_codes,
        measured.x_gen[mine],
        gc[mine],
        acc[mine],
        measured.columns,
        n_random=centroid.n_random,
        seed=centroid.seed,
    )


def _cp_deciles(kept: _Measured, trust: np.ndarray, cell_types: tuple, deciles: MorphologyDeciles) -> pl.DataFrame:
    """Fig. 3: the generated rows binned by ``trust``, each bin's classifiers of the cell type
    (``cell_types``: generated, real) and of the condition, tested on the real rows."""
    from condeval.trust.deciles import decile_bins, decile_classifier

    within = deciles.binning == "within_condition"
    strata = kept.gen_codes if within else np.zeros(len(kept.x_gen), dtype=np.int64)
    smallest = int(np.bincount(np.unique(strata, return_inverse=True)[1]).min()) if len(strata) else 0
    if smallest < deciles.n_bins:
        log.warning(
            "Fig. 3: %d trust bins, but a %s holds %d measured samples: each bin takes "
            "none of them and the last bin all (set n_bins at most the samples per condition)",
            deciles.n_bins,
            "condition" if within else "pool",
            smallest,
        )
    bins = decile_bins(strata, trust, deciles.n_bins)
    targets = (("cell type", *cell_types), ("condition", kept.gen_codes, kept.real_codes))
    return pl.concat(
        [
            decile_classifier(
                kept.x_gen, target_gen, bins, kept.x_real, target_real, seeds=deciles.classifier_seeds
            ).with_columns(target=pl.lit(target))
            for target, target_gen, target_real in targets
        ]
    )
