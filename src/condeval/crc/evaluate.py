"""The paper's experiments on sampled benchmarks: the α sweeps (Tables 1 and 3), the calibrated
comparison by domain (Tables 2 and 4) and the interval calibration before and after (Table 5).

Inputs are a benchmark's caption table (:mod:`condeval.crc.benchmarks`) joined with its samples
(:func:`condeval.crc.sampling.sample_captions`) on ``key``.

The sets only ever flag valid words (NOUN, PROPN, NUM, VERB, ADJ, ADV: the words attention-mask
sampling masks); the others score f_v = 0 and could only count as true negatives. The risk, as
the paper's, is over valid words, and the share of words and of errors that are never scored is
reported apart (``unscored_words``, ``unscored_errors``).
"""

from __future__ import annotations

import logging

import numpy as np
import polars as pl

from condeval.core.conformal import resampled_rows, unit_bootstrap_interval, unit_mean_interval
from condeval.crc import word_risk
from condeval.crc.intervals import IntervalRiskControl, NoValidLambdaError, truncated_gaussian, truncation_bounds
from condeval.crc.metrics import (
    binary_words,
    caption_counts,
    caption_index,
    caption_losses,
    caption_precision_recall,
    caption_truth_and_score,
    fdr,
    fpr,
    harmonic_f1,
    instance_ap,
    instance_f1,
    kendall_tau_c,
    location_accuracy,
    location_accuracy_set,
    location_hits,
    ups,
    word_precision_recall_f1,
)
from condeval.crc.pos import MASKABLE_UPOS
from condeval.crc.word_risk import WordRiskControl

log = logging.getLogger(__name__)

__all__ = [
    "RISKS",
    "bootstrap_intervals",
    "ap_interval",
    "join_samples",
    "read_sampled",
    "read_sampled_sets",
    "word_arrays",
    "word_images",
    "valid_words",
    "refuse_truncated",
    "calibration_units",
    "set_metrics",
    "risk_sweep",
    "select_alpha",
    "domain_metrics",
    "detection_signal",
    "interval_metrics",
    "CLIPPED_COLUMNS",
    "read_clipped_samples",
    "clipped_table",
]

#: The controlled risk per benchmark: FDR on the multi-class FOIL sets, FPR on multi-label RichHF-18K.
RISKS = {"foil_it": "fdr", "foil_nocaps": "fdr", "rich_hf": "fpr"}


def join_samples(captions: pl.DataFrame, samples: pl.DataFrame, where: str = "samples") -> pl.DataFrame:
    """Captions with their samples (joined on ``key``); every caption must have exactly one sample row.

    Examples
    --------
    >>> import polars as pl
    >>> from condeval.crc.evaluate import join_samples
    >>> captions = pl.DataFrame({"key": [0, 1, 2], "words": [["a", "red", "star"], ["a", "ring"], ["two", "rings"]]})
    >>> samples = pl.DataFrame({"key": [2, 0, 1], "clipscore": [0.61, 0.74, 0.52], "mean": [0.6, 0.7, 0.5],
    ...                         "std": [0.05, 0.04, 0.08]})
    >>> join_samples(captions, samples).sort("key")["clipscore"].to_list()
    [0.74, 0.52, 0.61]
    >>> join_samples(captions, samples.head(2), where="shard-0.parquet")    # key 1 was never sampled
    Traceback (most recent call last):
    ...
    ValueError: shard-0.parquet: 1 captions have no samples (first key 1)
    """
    if captions["key"].is_duplicated().any():
        raise ValueError(
            f"the caption table holds key {captions.filter(pl.col('key').is_duplicated())['key'][0]} twice"
        )
    if samples["key"].is_duplicated().any():
        raise ValueError(
            f"{where}: caption key {samples.filter(pl.col('key').is_duplicated())['key'][0]} is sampled twice"
        )
    joined = captions.join(samples, on="key", how="left", maintain_order="left")  # the captions' order
    missing = joined.filter(pl.col("clipscore").is_null())
    if len(missing):
        raise ValueError(f"{where}: {len(missing)} captions have no samples (first key {missing['key'][0]})")
    for column in ("clipscore", "mean", "std"):
        bad = joined.filter(~pl.col(column).is_finite().fill_null(True))
        if len(bad):
            raise FloatingPointError(f"{where}: non-finite {column} at caption key {bad['key'][0]}")
    return joined


def read_sample_shard(shard) -> pl.DataFrame:
    """One sample shard (Parquet), refused naming the file and the caption key where a score, or a score in
    a list (the masked samples, the word scores), is NaN or infinite: joined with the captions, the error
    named the caption table, which was sound."""
    frame = pl.read_parquet(shard)
    for column, dtype in frame.schema.items():
        if dtype.is_float():
            finite = pl.col(column).is_finite()
        elif isinstance(dtype, pl.List) and dtype.inner.is_float():
            finite = pl.col(column).list.eval(pl.element().is_finite()).list.all()
        else:
            continue
        bad = frame.filter(~finite.fill_null(True))
        if bad.height:
            raise FloatingPointError(f"{shard}: non-finite {column} at caption key {bad['key'][0]}")
    return frame


def read_sampled(captions, shards, keep_distribution: bool = True) -> pl.DataFrame:
    """One benchmark's caption table (Parquet) joined with its sample shards (Parquet files)."""
    samples = pl.concat([read_sample_shard(shard) for shard in shards])
    if not keep_distribution:
        samples = samples.drop("samples", strict=False)
    return join_samples(pl.read_parquet(captions), samples, where=str(captions))


def read_sampled_sets(captions, shards, keep_distribution: bool = True) -> list[pl.DataFrame]:
    """:func:`read_sampled` for several benchmarks; ``shards`` lists each one's shards in turn, equally many."""
    captions, shards = list(captions), list(shards)
    if not captions or len(shards) % len(captions):
        raise ValueError(f"{len(shards)} sample shards cannot be split evenly over {len(captions)} benchmarks")
    per_set = len(shards) // len(captions)
    return [
        read_sampled(path, shards[k * per_set : (k + 1) * per_set], keep_distribution)
        for k, path in enumerate(captions)
    ]


def valid_words(frame: pl.DataFrame) -> np.ndarray:
    """Flat per word: is it valid (its ``pos`` is maskable, so it can be scored and flagged)? All, without ``pos``."""
    if "pos" not in frame.columns:
        return np.ones(int(frame["labels"].list.len().sum()), dtype=bool)
    return frame["pos"].explode().is_in(list(MASKABLE_UPOS)).to_numpy().astype(bool)


def refuse_truncated(frame: pl.DataFrame) -> tuple[pl.DataFrame, int]:
    """The captions whose every valid word the tokenizer kept, and how many were refused.

    A valid word past the tokenizer's ``max_length`` is never masked (f_v = 0) and could never be
    flagged, so such a caption is left out of calibration and evaluation, and counted.

    Examples
    --------
    >>> import polars as pl
    >>> from condeval.crc.evaluate import refuse_truncated
    >>> frame = pl.DataFrame({"key": [0, 1, 2], "truncated_words": [0, 2, 0]})   # caption 1 lost two valid words
    >>> kept, refused = refuse_truncated(frame)
    >>> kept["key"].to_list(), refused
    ([0, 2], 1)
    """
    if "truncated_words" not in frame.columns:
        return frame, 0
    kept = frame.filter(pl.col("truncated_words") == 0)
    return kept, len(frame) - len(kept)


def calibration_units(table: pl.DataFrame, unit: str) -> int:
    """How many units (distinct images, or captions) a caption table's calibration subset has."""
    calibration = table.filter(pl.col("subset") == "calibration")
    return calibration["path"].n_unique() if unit == "image" else len(calibration)


def word_images(frame: pl.DataFrame, valid_only: bool = False) -> np.ndarray:
    """Flat per word: its caption's image file (``path``), the unit of exchangeability.

    Examples
    --------
    >>> import polars as pl
    >>> from condeval.crc.evaluate import word_images
    >>> frame = pl.DataFrame({"path": ["a.jpg", "b.jpg"], "labels": [[0, 0, 0], [0, 1]],
    ...                       "pos": [["DET", "ADJ", "NOUN"], ["ADJ", "NOUN"]]})
    >>> word_images(frame).tolist()
    ['a.jpg', 'a.jpg', 'a.jpg', 'b.jpg', 'b.jpg']
    >>> word_images(frame, valid_only=True).tolist()        # the determiner is never scored
    ['a.jpg', 'a.jpg', 'b.jpg', 'b.jpg']
    """
    if "path" not in frame.columns:
        raise ValueError(
            "the caption table has no 'path' column: the image of each caption is needed for calibration_unit 'image'"
        )
    images = np.repeat(frame["path"].to_numpy(), frame["labels"].list.len().to_numpy())
    return images[valid_words(frame)] if valid_only else images


def word_arrays(frame: pl.DataFrame, valid_only: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Flat per-word ``(scores, labels, groups)`` of a caption table with ``word_scores`` and ``labels``.

    With ``valid_only``, only the valid words (:func:`valid_words`); a caption without one drops out.

    Examples
    --------
    >>> import polars as pl
    >>> from condeval.crc.evaluate import word_arrays
    >>> frame = pl.DataFrame({"key": [0, 1], "labels": [[0, 0, 0], [0, 0, 1]],
    ...                       "word_scores": [[0.0, 0.2, 0.3], [0.0, 0.4, 0.9]],
    ...                       "pos": [["DET", "ADJ", "NOUN"], ["DET", "ADJ", "NOUN"]]})
    >>> scores, labels, groups = word_arrays(frame, valid_only=True)     # the determiners drop out
    >>> scores.tolist(), labels.tolist(), groups.tolist()
    ([0.2, 0.3, 0.4, 0.9], [0, 0, 0, 1], [0, 0, 1, 1])
    >>> word_arrays(frame.with_columns(pl.col("word_scores").list.head(2)))
    Traceback (most recent call last):
    ...
    ValueError: caption key 0: 3 labels but 2 word scores
    """
    lengths = frame["labels"].list.len().to_numpy()
    if not np.array_equal(lengths, frame["word_scores"].list.len().to_numpy()):
        bad = int(np.flatnonzero(lengths != frame["word_scores"].list.len().to_numpy())[0])
        raise ValueError(
            f"caption key {frame['key'][bad]}: {lengths[bad]} labels but {frame['word_scores'].list.len()[bad]} word scores"
        )
    scores = frame["word_scores"].explode().to_numpy().astype(float)
    labels = binary_words(frame["labels"].explode().to_numpy(), "labels").astype(int)
    groups = np.repeat(frame["key"].to_numpy(), lengths)
    if valid_only:
        keep = valid_words(frame)
        return scores[keep], labels[keep], groups[keep]
    return scores, labels, groups


def set_metrics(frame: pl.DataFrame, threshold: float, risk: str) -> dict[str, float]:
    """Every metric of the flagged sets {f_v > threshold} on one caption table.

    FDR benchmarks report FDR, AP, instance F1, LA and LA_set (LA on the captions with an error);
    FPR benchmarks report FPR, AP, instance F1 and word precision, recall and F1. ``set_size`` is
    the mean number of flagged words per caption. The risk is over the valid words, as calibrated;
    ``unscored_words`` and ``unscored_errors`` are the shares of all words and of all errors that
    are not valid (never flagged).
    """
    if risk not in word_risk.RISKS:
        raise ValueError(f"risk must be one of {word_risk.RISKS}; got {risk!r}")
    scores, labels, groups = word_arrays(frame)
    valid = valid_words(frame)
    flags = (scores > threshold) & valid
    on_valid = flags[valid], labels[valid], groups[valid]
    metrics = {
        "risk": fdr(*on_valid) if risk == "fdr" else fpr(*on_valid),
        "ap": instance_ap(scores, labels, groups),
        "f1": instance_f1(flags, labels, groups),
        "set_size": float(flags.sum() / len(frame)),
        "unscored_words": float(np.mean(~valid)),
        "unscored_errors": float(np.sum(~valid & (labels == 1)) / max(labels.sum(), 1)),
    }
    if risk == "fdr":
        metrics |= {
            "la": location_accuracy(scores, labels, groups, threshold),
            "la_set": location_accuracy_set(flags, labels, groups),
        }
    else:
        metrics |= dict(zip(("precision", "recall", "word_f1"), word_precision_recall_f1(flags, labels, groups)))
    return metrics


def bootstrap_intervals(frame: pl.DataFrame, threshold: float, risk: str, seed: int = 0) -> dict[str, float]:
    """95% bootstrap intervals over the images of ``frame`` of the metrics :func:`set_metrics` reports for
    the flagged sets {f_v > threshold}: the risk, instance F1, and LA and LA_set (FDR) or word
    precision, recall and F1 (FPR). AP has no threshold: :func:`ap_interval`.

    An image is drawn with all its captions (the unit of exchangeability;
    :func:`condeval.core.conformal.unit_bootstrap_interval`, the same draws for every metric), so
    captions of one image are not counted as independent evidence. Returns ``<metric>_low`` and
    ``<metric>_high`` per metric, with :func:`set_metrics`' names (NaN below two images).

    Examples
    --------
    >>> import polars as pl
    >>> from condeval.crc.evaluate import bootstrap_intervals
    >>> frame = pl.DataFrame({
    ...     "key": range(40), "path": [f"{i // 2}.jpg" for i in range(40)],   # 20 images, 2 captions each
    ...     "labels": [[0, 1], [0, 0]] * 20, "pos": [["ADJ", "NOUN"]] * 40,
    ...     "word_scores": [[0.2, 0.9], [0.3, 0.1]] * 19 + [[0.9, 0.2], [0.8, 0.1]]})  # the last image's flags wrong
    >>> bounds = bootstrap_intervals(frame, 0.5, "fdr")
    >>> round(bounds["risk_low"], 3), round(bounds["risk_high"], 3)                         # the FDR is 0.05
    (0.0, 0.15)
    >>> round(bounds["la_low"], 2), round(bounds["la_high"], 2)                             # LA is 0.95
    (0.85, 1.0)
    """
    scores, labels, groups = word_arrays(frame)
    valid = valid_words(frame)
    flags = (scores > threshold) & valid
    image = caption_index(word_images(frame), "images")
    n_images = int(image.max()) + 1 if len(image) else 0
    image_of_caption = _image_of_caption(caption_index(groups), image)
    # the risk as set_metrics reads it: over the valid words, per caption that has one
    flagged_errors, flagged_correct, _, correct = caption_counts(flags[valid], labels[valid], groups[valid])
    losses = caption_losses(flagged_errors, flagged_correct, correct, risk)
    scored_image = _image_of_caption(caption_index(groups[valid]), image[valid])
    statistics = {
        "risk": _mean_over_images(losses, scored_image, n_images),
        "f1": _instance_f1_over_images(flags, labels, groups, image_of_caption, n_images),
    }
    if risk == "fdr":
        has_error, hit = location_hits(scores, labels, groups, threshold)
        flagged_errors, _, _, _ = caption_counts(flags, labels, groups)
        statistics["la"] = _mean_over_images(hit[has_error], image_of_caption[has_error], n_images)
        statistics["la_set"] = _mean_over_images(flagged_errors[has_error] > 0, image_of_caption[has_error], n_images)
    else:
        precision, recall = caption_precision_recall(flags, labels, groups)
        statistics["precision"] = _mean_over_images(precision, image_of_caption, n_images)
        statistics["recall"] = _mean_over_images(recall, image_of_caption, n_images)
        statistics["word_f1"] = _harmonic_over_images(statistics["precision"], statistics["recall"])
    return _intervals(statistics, n_images, seed)


def ap_interval(frame: pl.DataFrame, seed: int = 0) -> dict[str, float]:
    """The 95% bootstrap interval over the images of ``frame`` of its instance AP (``ap_low``, ``ap_high``):
    the draws of :func:`bootstrap_intervals`, each drawn image's captions ranked again.

    Examples
    --------
    >>> import polars as pl
    >>> from condeval.crc.evaluate import ap_interval
    >>> frame = pl.DataFrame({
    ...     "key": range(40), "path": [f"{i // 2}.jpg" for i in range(40)],
    ...     "labels": [[0, 1], [0, 0]] * 20, "pos": [["ADJ", "NOUN"]] * 40,
    ...     "word_scores": [[0.2, 0.9], [0.3, 0.1]] * 20})       # every wrong caption ranked first: AP = 1
    >>> ap_interval(frame)
    {'ap_low': 1.0, 'ap_high': 1.0}
    """
    scores, labels, groups = word_arrays(frame)
    has_error, top, caption = caption_truth_and_score(scores, labels, groups)
    image = caption_index(word_images(frame), "images")
    statistic = _instance_ap_over_images(has_error, top, _image_of_caption(caption, image))
    return _intervals({"ap": statistic}, int(image.max()) + 1, seed)


def _intervals(statistics: dict, n_units: int, seed: int) -> dict[str, float]:
    """``<name>_low`` and ``<name>_high`` of each statistic's interval, all from the same draws."""
    bounds = {}
    for name, statistic in statistics.items():
        bounds[f"{name}_low"], bounds[f"{name}_high"] = unit_bootstrap_interval(statistic, n_units, seed)
    return bounds


def _mean_over_images(values: np.ndarray, image_of_row: np.ndarray, n_images: int):
    """statistic(counts): the mean of the per-row ``values`` over the rows of the drawn images."""
    totals = np.bincount(image_of_row, weights=np.asarray(values, dtype=float), minlength=n_images)
    rows = np.bincount(image_of_row, minlength=n_images).astype(float)

    def mean(counts: np.ndarray) -> float:
        with np.errstate(invalid="ignore"):  # no row drawn (a resample without a wrong caption): NaN
            return float(counts @ totals / (counts @ rows))

    return mean


def _harmonic_over_images(precision, recall):
    """statistic(counts): the F1 of the drawn images' precision and recall statistics."""

    def f1(counts: np.ndarray) -> float:
        return float(harmonic_f1(precision(counts), recall(counts)))

    return f1


def _instance_f1_over_images(flags, labels, groups, image_of_caption: np.ndarray, n_images: int):
    """statistic(counts): instance F1 of the drawn images' captions, from each image's confusion counts
    ("has an error" x "flagged"), so a resample costs the images, not the captions: scikit-learn's macro
    F1 over both classes, written on the counts because its input checks cost milliseconds a call and an
    interval makes :data:`~condeval.core.conformal.BOOTSTRAP`'s 2,000 (tests/crc hold it to scikit-learn's)."""
    flagged_errors, flagged_correct, errors, _ = caption_counts(flags, labels, groups)
    cell = 2 * (errors > 0) + (flagged_errors + flagged_correct > 0)
    cells_by_image = np.zeros((n_images, 4))
    np.add.at(cells_by_image, (image_of_caption, cell), 1)

    def f1(counts: np.ndarray) -> float:
        true_negatives, false_positives, false_negatives, true_positives = counts @ cells_by_image
        positive = _f1_of_counts(true_positives, false_positives, false_negatives)
        negative = _f1_of_counts(true_negatives, false_negatives, false_positives)
        return float(positive + negative) / 2

    return f1


def _f1_of_counts(true_positives: float, false_positives: float, false_negatives: float) -> float:
    """One class's F1, 2TP / (2TP + FP + FN); 0 with neither a true nor a predicted member (scikit-learn's
    ``zero_division`` default)."""
    denominator = 2 * true_positives + false_positives + false_negatives
    return 2 * true_positives / denominator if denominator > 0 else 0.0


def _instance_ap_over_images(has_error: np.ndarray, top: np.ndarray, image_of_caption: np.ndarray):
    """statistic(counts): instance AP of the drawn images' captions, each weighted by its image's draws:
    scikit-learn's ``average_precision_score``, Σ (R_k − R_{k−1}) P_k over the distinct scores from the
    highest, written on cumulative sums because its input checks cost milliseconds a call and an interval
    makes 2,000 (tests/crc hold it to scikit-learn's). 0 when no drawn caption has an error, as scikit-learn's."""
    order = np.argsort(-top, kind="stable")
    truth, image = has_error[order].astype(float), image_of_caption[order]
    last_of_each_score = np.r_[np.flatnonzero(np.diff(top[order])), len(order) - 1]

    def ap(counts: np.ndarray) -> float:
        weights = counts[image].astype(float)
        true_positives = np.cumsum(weights * truth)[last_of_each_score]
        if true_positives[-1] == 0:
            return 0.0
        drawn = np.cumsum(weights)[last_of_each_score]
        precision = np.divide(true_positives, drawn, out=np.zeros_like(drawn), where=drawn > 0)
        return float(np.diff(true_positives, prepend=0.0) @ precision / true_positives[-1])

    return ap


def _image_of_caption(caption: np.ndarray, image: np.ndarray) -> np.ndarray:
    """Per caption (``caption``: each word's), the image of its words (``image``: each word's)."""
    image_of_caption = np.empty(int(caption.max()) + 1, dtype=np.int64)
    image_of_caption[caption] = image
    return image_of_caption


def risk_sweep(
    calibration: pl.DataFrame, test: pl.DataFrame, alphas, delta: float, risk: str, unit: str = "image"
) -> pl.DataFrame:
    """λ̂ per α on the calibration captions' valid words and the metrics of its sets on both subsets (Tables 1, 3).

    ``unit`` is the unit of exchangeability (:class:`condeval.crc.WordRiskControl`): "image"
    (the ``path`` column) or "caption" (the paper's reading). An image with captions on both sides
    is refused, and so are captions with a valid word past the tokenizer's ``max_length``
    (:func:`refuse_truncated`, counted in the log). The reported risks are the paper's mean over captions; the one ``unit="image"``
    controls is :func:`condeval.crc.metrics.fdr` (or ``fpr``) with ``images=``.

    Returns one row per α: ``alpha``, ``delta``, ``lambda_hat``, ``unit``, ``n_calibration``
    (captions), ``n_units`` (images or captions), then ``calibration_<metric>`` and
    ``test_<metric>`` for every metric of :func:`set_metrics`, and the test metrics' 95% intervals
    over images (``test_<metric>_low``, ``test_<metric>_high``: :func:`bootstrap_intervals`, :func:`ap_interval`).
    """
    (calibration, truncated_calibration), (test, truncated_test) = refuse_truncated(calibration), refuse_truncated(test)
    if truncated_calibration or truncated_test:
        log.info(
            "risk_sweep: %d calibration and %d test captions refused (valid words past the tokenizer's "
            "max_length: never masked, never flagged)",
            truncated_calibration,
            truncated_test,
        )
    shared = set(calibration["path"].to_list()) & set(test["path"].to_list())
    if shared:
        raise ValueError(
            f"{len(shared)} images have captions in both calibration and test (e.g. {min(shared)}): "
            "split by image (condeval.crc.benchmarks.image_subsets), or the test set is not new data"
        )
    words = word_arrays(calibration, valid_only=True)
    images = word_images(calibration, valid_only=True) if unit == "image" else None
    n_units = len(np.unique(images if images is not None else words[2]))
    test_ap = {f"test_{key}": value for key, value in ap_interval(test).items()}  # one per test set: no threshold
    rows = []
    for alpha in alphas:
        threshold = WordRiskControl(risk, float(alpha), delta, unit).calibrate(*words, images=images).threshold_
        row = {
            "alpha": float(alpha),
            "delta": float(delta),
            "lambda_hat": threshold,
            "unit": unit,
            "n_calibration": len(calibration),
            "n_units": n_units,
        }
        for name, frame in (("calibration", calibration), ("test", test)):
            row |= {f"{name}_{key}": value for key, value in set_metrics(frame, threshold, risk).items()}
        row |= {f"test_{key}": value for key, value in bootstrap_intervals(test, threshold, risk).items()} | test_ap
        rows.append(row)
    return pl.DataFrame(rows)


def select_alpha(sweep: pl.DataFrame) -> float:
    """The α with the best calibration-set instance F1 (the paper's choice of α for Tables 2 and 4)."""
    return float(sweep.sort("calibration_f1", "alpha", descending=[True, False])["alpha"][0])


def domain_metrics(frame: pl.DataFrame, threshold: float, risk: str = "fdr") -> pl.DataFrame:
    """The metrics at one λ̂ overall and per ``domain`` (Table 2's FOIL-nocaps columns), with their 95%
    intervals over images (:func:`bootstrap_intervals`, :func:`ap_interval`)."""
    parts = [("overall", frame)]
    if frame["domain"].null_count() < len(frame):
        parts += [
            (domain, frame.filter(pl.col("domain") == domain))
            for domain in sorted(frame["domain"].drop_nulls().unique())
        ]
    return pl.DataFrame(
        [
            {
                "domain": domain,
                **set_metrics(part, threshold, risk),
                **bootstrap_intervals(part, threshold, risk),
                **ap_interval(part),
            }
            for domain, part in parts
        ]
    )


def detection_signal(frame: pl.DataFrame) -> dict[str, float]:
    """Does the CLIP find the wrong words at all? AP and LA (top word, no threshold) beside chance, each
    with its 95% interval over images (``ap_low`` / ``_high``, ``la_low`` / ``_high``:
    :func:`ap_interval`, :func:`bootstrap_intervals`).

    Chance: a caption's "top word" drawn uniformly from its valid (maskable) words gives LA = the
    mean of 1/#valid words over the captions with an error; drawn from its nouns (FOIL's errors are
    nouns, so this is the stronger baseline there), the mean over those captions of the share of
    nouns that are errors; random caption scores give AP equal to the share of captions with an error.
    """
    scores, labels, groups = word_arrays(frame)
    with_error = frame.filter(pl.col("labels").list.sum() > 0)
    valid = with_error["pos"].list.eval(pl.element().is_in(list(MASKABLE_UPOS))).list.sum().to_numpy()
    nouns = with_error["pos"].list.eval(pl.element().is_in(["NOUN", "PROPN"]))
    noun_errors = [
        sum(label for label, noun in zip(labels_, is_noun) if noun)
        for labels_, is_noun in zip(with_error["labels"], nouns)
    ]
    n_nouns = nouns.list.sum().to_numpy()
    located = bootstrap_intervals(frame, -np.inf, "fdr")
    return {
        "ap": instance_ap(scores, labels, groups),
        **ap_interval(frame),
        "la": location_accuracy(scores, labels, groups, -np.inf),
        "la_low": located["la_low"],
        "la_high": located["la_high"],
        "ap_chance": len(with_error) / len(frame),
        "la_chance": float(np.mean(1.0 / np.maximum(valid, 1))),
        "la_noun_chance": float(np.mean(np.divide(noun_errors, np.maximum(n_nouns, 1)))),
        "n_captions": len(frame),
        "n_with_error": len(with_error),
    }


#: The sample columns :func:`clipped_table` reads.
CLIPPED_COLUMNS = ("key", "clipscore", "clipped_share")


def read_clipped_samples(
    shards: dict[str, dict[str, list]], captions: dict[str, str] | None = None
) -> dict[str, pl.DataFrame]:
    """Each benchmark's samples for :func:`clipped_table`, every model's shards with a ``model`` column.

    Parameters
    ----------
    shards : dict of str to dict of str to list of path
        Per model, each benchmark's sample shards (Parquet). Only :data:`CLIPPED_COLUMNS` are read,
        never the I×T ``samples``.
    captions : dict of str to path, optional
        Each benchmark's captions table (``key`` and ``path``, what the samples were drawn from): each
        pair's image joins it as an ``image`` column, the unit of :func:`clipped_table`'s intervals.

    Raises
    ------
    ValueError
        When a shard lacks one of those columns, naming the file, or holds a pair key its benchmark's
        captions table does not, naming both files and the key.
    """
    benchmarks = dict.fromkeys(benchmark for per_model in shards.values() for benchmark in per_model)
    frames = {}
    for benchmark in benchmarks:
        images = None if captions is None else pl.read_parquet(captions[benchmark], columns=["key", "path"])
        frames[benchmark] = pl.concat(
            [
                _clipped_columns(path, images, captions and captions[benchmark]).with_columns(model=pl.lit(model))
                for model, per_model in shards.items()
                for path in per_model.get(benchmark, [])
            ]
        )
    return frames


def _clipped_columns(path, images: pl.DataFrame | None = None, captions_path=None) -> pl.DataFrame:
    missing = [column for column in CLIPPED_COLUMNS if column not in pl.read_parquet_schema(path)]
    if missing:
        raise ValueError(f"{path}: the samples have no column {missing} (written before it existed: resample them)")
    frame = pl.read_parquet(path, columns=list(CLIPPED_COLUMNS))
    if images is None:
        return frame
    joined = frame.join(images.rename({"path": "image"}), on="key", how="left", maintain_order="left")
    unknown = joined.filter(pl.col("image").is_null())
    if len(unknown):
        raise ValueError(f"{path}: pair key {unknown['key'][0]} is not in the captions table {captions_path}")
    return joined


def clipped_table(frames: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """How often CLIPScore's clip at 0 (w·max(cos, 0)) binds, per benchmark and model.

    Parameters
    ----------
    frames : dict of str to polars.DataFrame
        Each benchmark's samples (:func:`condeval.crc.sampling.sample_captions` rows, one per pair)
        with ``key``, ``clipscore`` and ``clipped_share``; a ``model`` column, where present, splits
        them by model, and an ``image`` column, where present, is each pair's image: the unit the
        intervals draw whole (without it every pair is its own).

    Returns
    -------
    polars.DataFrame
        One row per benchmark (and model), in the order given: ``benchmark``, ``model`` (null
        without a ``model`` column), ``pairs``, ``masked_clipped`` (the mean over pairs of
        ``clipped_share``: every pair has I×T masked samples, so it is the share of all masked
        samples at 0) and ``unmasked_clipped`` (the share of pairs whose unmasked CLIPScore is 0),
        each with its 95% bootstrap interval over the images (``_low``, ``_high``).

    Raises
    ------
    ValueError
        When there is no benchmark, a benchmark has no pairs or lacks a column (samples written
        before ``clipped_share`` existed must be resampled), or a share is null or outside [0, 1]
        (naming the benchmark and the pair's key).
    """
    if not frames:
        raise ValueError("clipped_table needs at least one benchmark's samples")
    return pl.concat([_clipped_rows(benchmark, frame) for benchmark, frame in frames.items()])


def _clipped_rows(benchmark: str, frame: pl.DataFrame) -> pl.DataFrame:
    """:func:`clipped_table`'s rows of one benchmark, its samples checked first."""
    missing = [column for column in CLIPPED_COLUMNS if column not in frame.columns]
    if missing:
        raise ValueError(f"benchmark {benchmark!r}: the samples have no column {missing} (resample them)")
    if frame.is_empty():
        raise ValueError(f"benchmark {benchmark!r}: no sampled pairs")
    bad = frame.filter(~pl.col("clipped_share").is_between(0.0, 1.0).fill_null(False))
    if len(bad):
        raise ValueError(
            f"benchmark {benchmark!r}, pair key {bad['key'][0]}: clipped_share {bad['clipped_share'][0]} is not in [0, 1]"
        )
    model = frame["model"] if "model" in frame.columns else pl.Series("model", [None] * len(frame), pl.String)
    frame = frame.with_columns(model=model, unmasked=(pl.col("clipscore") == 0.0).cast(pl.Float64))
    rows = []
    for (name,), pairs in frame.group_by("model", maintain_order=True):
        units = pairs["image"].to_numpy() if "image" in pairs.columns else None
        row = {"benchmark": benchmark, "model": name, "pairs": len(pairs)}
        for key, column in (("masked_clipped", "clipped_share"), ("unmasked_clipped", "unmasked")):
            values = pairs[column].to_numpy()
            low, high = unit_mean_interval(values, units)
            row |= {key: float(values.mean()), f"{key}_low": low, f"{key}_high": high}
        rows.append(row)
    return pl.DataFrame(rows, schema=CLIPPED_SCHEMA)


#: :func:`clipped_table`'s columns.
CLIPPED_SCHEMA = {"benchmark": pl.String, "model": pl.String, "pairs": pl.Int64} | {
    f"{key}{end}": pl.Float64 for key in ("masked_clipped", "unmasked_clipped") for end in ("", "_low", "_high")
}


def interval_metrics(
    calibration: pl.DataFrame,
    evaluations: dict[str, pl.DataFrame],
    *,
    delta: float,
    lambdas,
    method: str,
    truncation_factor: float,
    unit: str = "image",
) -> tuple[pl.DataFrame, object]:
    """Table 5: UPS and Kendall τ_c of the intervals before (λ = 1) and after (λ̂) calibration.

    Parameters
    ----------
    calibration : polars.DataFrame
        Calibration pairs with ``mean``, ``std`` and ``human_score``.
    evaluations : dict of str to polars.DataFrame
        The evaluation pairs of each dataset.
    delta, lambdas, method
        Learn-then-Test's FWER, the grid of σ scales and the FWER procedure
        (:class:`~condeval.crc.IntervalRiskControl`).
    truncation_factor : float
        The truncation interval's factor (its ``bounds_factor``).
    unit : {"image", "caption"}
        What n counts in the Learn-then-Test p-values: the calibration pairs' images (``path``) or the pairs.

    Returns
    -------
    (polars.DataFrame, IntervalCalibration or None)
        One row per dataset and stage (``pre``, ``pos``) with ``lambda``, ``ups``, ``tau_c``, ``n``
        (pairs), ``n_images`` and their 95% intervals over the dataset's images (``ups_low`` …
        ``tau_c_high``); the ``pos`` rows add the change from ``pre`` on the same draws
        (``ups_change``, ``tau_c_change``, each with ``_low`` and ``_high``). And the calibration
        itself. When Learn-then-Test rejects no λ the calibration is None and the ``pos`` rows are NaN.
    """
    mean, std, human = (calibration[c].to_numpy() for c in ("mean", "std", "human_score"))
    try:
        images = calibration["path"].to_numpy() if unit == "image" else None
        control = IntervalRiskControl(delta, lambdas, method, truncation_factor, unit)
        result = control.calibrate(mean, std, human, images).calibration_
        stages, bounds = (("pre", 1.0), ("pos", result.lambda_hat)), result.bounds
    except NoValidLambdaError:
        # Learn-then-Test's answer is "no λ": the table says so (POS = NaN) rather than inventing one.
        result, stages, bounds = None, (("pre", 1.0), ("pos", float("nan"))), truncation_bounds(mean, truncation_factor)
    rows = []
    for name, frame in evaluations.items():
        rows += _judgment_rows(name, frame, stages, bounds)
    return pl.DataFrame(rows), result


def _judgment_rows(name: str, frame: pl.DataFrame, stages, bounds) -> list[dict]:
    """Table 5's rows of one evaluation set: UPS and τ_c per stage with their intervals over images, and
    the POS − PRE change (a change is one when its interval excludes 0)."""
    human = frame["human_score"].to_numpy()
    image_of_pair = caption_index(frame["path"].to_numpy(), "path")
    n_images = int(image_of_pair.max()) + 1
    measures = {"ups": ups, "tau_c": _tau_c}
    columns = [f"{key}{change}{end}" for change in ("", "_change") for key in measures for end in ("", "_low", "_high")]
    statistics, rows = {}, []
    for stage, scale in stages:
        row = {"dataset": name, "stage": stage, "lambda": scale, "n": len(frame), "n_images": n_images}
        row |= dict.fromkeys(columns, float("nan"))
        if not np.isnan(scale):
            mean, std, _, _ = truncated_gaussian(frame["mean"].to_numpy(), frame["std"].to_numpy(), scale, *bounds)
            statistics[stage] = {
                key: _on_drawn_pairs(measure, mean, std, human, image_of_pair) for key, measure in measures.items()
            }
            row |= {key: measure(mean, std, human) for key, measure in measures.items()}
            row |= _intervals(statistics[stage], n_images, seed=0)
        rows.append(row)
    if len(statistics) == 2:
        rows[1] |= {f"{key}_change": rows[1][key] - rows[0][key] for key in measures}
        rows[1] |= _intervals(
            {f"{key}_change": _difference(statistics["pos"][key], statistics["pre"][key]) for key in measures},
            n_images,
            seed=0,
        )
    return rows


def _on_drawn_pairs(measure, mean: np.ndarray, std: np.ndarray, human: np.ndarray, image_of_pair: np.ndarray):
    """statistic(counts): ``measure(mean, std, human)`` on the pairs of the drawn images, each draw measured
    once (the POS − PRE interval draws the stages' resamples again)."""
    measured = {}

    def resampled(counts: np.ndarray) -> float:
        draw = counts.tobytes()
        if draw not in measured:
            rows = resampled_rows(counts, image_of_pair)
            measured[draw] = measure(mean[rows], std[rows], human[rows])
        return measured[draw]

    return resampled


def _tau_c(mean: np.ndarray, std: np.ndarray, human: np.ndarray) -> float:
    """τ_c of the interval's centre (its width plays no part)."""
    return kendall_tau_c(mean, human)


def _difference(first, second):
    """statistic(counts): ``first(counts) − second(counts)``, both on the same draws."""

    def difference(counts: np.ndarray) -> float:
        return first(counts) - second(counts)

    return difference
