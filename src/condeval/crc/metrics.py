"""Evaluation metrics of the CLIPScore risk-control paper (Appendix D), one implementation each.

Word-level inputs are flat per-word arrays with ``groups`` naming each word's caption, as in
:class:`condeval.crc.WordRiskControl`. Where the official code's definition is more specific
than the paper's text, the code's is used and said so.
"""

from __future__ import annotations

import numpy as np

from condeval.core.conformal import unit_index
from condeval.core.io import check_finite

__all__ = [
    "binary_words",
    "caption_counts",
    "caption_index",
    "caption_losses",
    "caption_truth_and_score",
    "location_hits",
    "caption_precision_recall",
    "harmonic_f1",
    "caption_weights",
    "fdr",
    "fpr",
    "instance_ap",
    "instance_f1",
    "location_accuracy",
    "location_accuracy_set",
    "word_precision_recall_f1",
    "ups",
    "kendall_tau_c",
]


def caption_index(groups, name: str = "groups") -> np.ndarray:
    """Each word's caption as 0..n_captions−1, whatever ids ``groups`` holds; a missing id (None,
    NaN) or ids of types that do not sort together are refused, naming ``name``."""
    return unit_index(groups, name, row="word")


def caption_weights(caption: np.ndarray, images) -> tuple[np.ndarray, int]:
    """Per caption (``caption``: each word's, from :func:`caption_index`), its weight in the mean over
    units, and the number of units: images (each weighs its captions' mean) or, without ``images``, captions."""
    n_captions = int(caption.max()) + 1
    if images is None:
        return np.ones(n_captions), n_captions
    images = np.asarray(images)
    if images.shape != caption.shape:
        raise ValueError(f"images must give one image per word, shape ({len(caption)},); got shape {images.shape}")
    image_of_caption = np.empty(n_captions, dtype=np.int64)
    image = caption_index(images, "images")
    image_of_caption[caption] = image
    split = np.flatnonzero(image_of_caption[caption] != image)
    if len(split):
        raise ValueError(f"the caption of word {int(split[0])} has words on more than one image")
    captions_per_image = np.bincount(image_of_caption)
    return 1.0 / captions_per_image[image_of_caption], len(captions_per_image)


def binary_words(values, name: str) -> np.ndarray:
    """Per-word flags or error labels as bool: bools, or numbers that are all 0 or 1. Anything else
    (scores given as flags, labels of -1 or 0.5, strings) is refused, not coerced to True."""
    array = np.asarray(values)
    if array.dtype == bool:
        return array
    if array.dtype.kind in "iuf":
        bad = np.flatnonzero(~np.isin(array, (0, 1)))
        if not len(bad):
            return array.astype(bool)
        raise ValueError(f"{name} must be 0/1 or bool per word; word {int(bad[0])} is {array[bad[0]].item()!r}")
    raise ValueError(f"{name} must be 0/1 or bool per word; got dtype {array.dtype}")


def _word_inputs(groups, **arrays) -> np.ndarray:
    """Each word's caption (:func:`caption_index`), once the per-word ``arrays`` and ``groups`` are
    checked: one length, at least one word."""
    shapes = {name: np.shape(values) for name, values in arrays.items()} | {"groups": np.shape(groups)}
    not_1d = [name for name, shape in shapes.items() if len(shape) != 1]
    if not_1d:
        raise ValueError(
            f"{', '.join(not_1d)} must be 1-D, one entry per word; got shapes {[shapes[name] for name in not_1d]}"
        )
    lengths = {name: shape[0] for name, shape in shapes.items()}
    if len(set(lengths.values())) > 1:
        raise ValueError(f"{', '.join(lengths)} differ in length: {', '.join(map(str, lengths.values()))}")
    if not lengths["groups"]:
        raise ValueError("no words: the metrics need at least one caption")
    return caption_index(groups)


def caption_counts(flags, labels, groups):
    """Per caption: flagged errors, flagged correct words, errors, correct words."""
    flags, labels = binary_words(flags, "flags"), binary_words(labels, "labels")
    caption = _word_inputs(groups, flags=flags, labels=labels)
    count = lambda mask: np.bincount(caption, weights=mask, minlength=caption.max() + 1)  # noqa: E731
    return count(flags & labels), count(flags & ~labels), count(labels), count(~labels)


def caption_losses(
    flagged_errors: np.ndarray, flagged_correct: np.ndarray, correct: np.ndarray, risk: str
) -> np.ndarray:
    """Per-caption FDR of a flagged set (0 when nothing is flagged) or FPR (0 with no correct word)."""
    if risk == "fdr":
        flagged = flagged_errors + flagged_correct
        return np.divide(flagged_correct, flagged, out=np.zeros(len(flagged), dtype=float), where=flagged > 0)
    return np.divide(flagged_correct, correct, out=np.zeros(len(correct), dtype=float), where=correct > 0)


def fdr(flags, labels, groups, images=None) -> float:
    """Mean over captions of FP / (FP + TP) of the flagged words (0 for an empty set); with ``images``
    (per word), the mean over images of their captions' mean: the risk ``unit="image"`` controls."""
    return _mean_risk(flags, labels, groups, images, "fdr")


def fpr(flags, labels, groups, images=None) -> float:
    """Mean over captions of FP / (FP + TN): the share of correct words that are flagged; with
    ``images``, over images, as :func:`fdr`."""
    return _mean_risk(flags, labels, groups, images, "fpr")


def _mean_risk(flags, labels, groups, images, risk: str) -> float:
    flagged_errors, flagged_correct, _, correct = caption_counts(flags, labels, groups)
    losses = caption_losses(flagged_errors, flagged_correct, correct, risk)
    if images is None:
        return float(losses.mean())
    weight, n_units = caption_weights(caption_index(groups), images)
    return float((losses * weight).sum() / n_units)


def caption_truth_and_score(scores, labels, groups) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per caption: whether it has an error and its highest word score; and each word's caption."""
    scores, labels = np.asarray(scores, dtype=float), binary_words(labels, "labels")
    caption = _word_inputs(groups, scores=scores, labels=labels)
    check_finite(scores, "scores")
    n = caption.max() + 1
    has_error = np.bincount(caption, weights=labels, minlength=n) > 0
    top = np.full(n, -np.inf)
    np.maximum.at(top, caption, scores)
    return has_error, top, caption


def instance_ap(scores, labels, groups) -> float:
    """Average precision of "the caption has an error", ranked by its highest word score.

    The official code ranks by the binary "some word is flagged", which makes AP a single
    precision-recall point; the paper's AP summarizes the whole curve, which this does.
    """
    from sklearn.metrics import average_precision_score

    has_error, top, _ = caption_truth_and_score(scores, labels, groups)
    return float(average_precision_score(has_error, top))


def instance_f1(flags, labels, groups) -> float:
    """Macro F1 of "some word is flagged" against "the caption has an error" (the official code's)."""
    from sklearn.metrics import f1_score

    flagged_errors, flagged_correct, errors, _ = caption_counts(flags, labels, groups)
    return float(f1_score(errors > 0, flagged_errors + flagged_correct > 0, average="macro"))


def location_hits(scores, labels, groups, threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Per caption: whether it has an error, and whether its top-scoring word (the first, on ties) is
    flagged (above ``threshold``) and is an error."""
    has_error, top, caption = caption_truth_and_score(scores, labels, groups)
    scores, labels = np.asarray(scores, dtype=float), binary_words(labels, "labels")
    # First top-scoring word of each caption (np.unique on caption order keeps the first index).
    order = np.flatnonzero(scores == top[caption])
    _, first = np.unique(caption[order], return_index=True)
    top_word = order[first]
    return has_error, labels[top_word] & (scores[top_word] > threshold)


def location_accuracy(scores, labels, groups, threshold: float) -> float:
    """LA: among captions with an error, the share whose top-scoring word is flagged and is an error."""
    has_error, hit = location_hits(scores, labels, groups, threshold)
    return float(hit[has_error].mean())


def location_accuracy_set(flags, labels, groups) -> float:
    """LA_set: among captions with an error, the share where some flagged word is an error."""
    flagged_errors, _, errors, _ = caption_counts(flags, labels, groups)
    return float((flagged_errors[errors > 0] > 0).mean())


def caption_precision_recall(flags, labels, groups) -> tuple[np.ndarray, np.ndarray]:
    """Per caption, the word precision and recall of its flagged set: precision 0 when nothing is
    flagged, recall 1 when it has no error (the official code's)."""
    flagged_errors, flagged_correct, errors, _ = caption_counts(flags, labels, groups)
    flagged = flagged_errors + flagged_correct
    precision = np.divide(flagged_errors, flagged, out=np.zeros(len(flagged)), where=flagged > 0)
    recall = np.divide(flagged_errors, errors, out=np.ones(len(errors)), where=errors > 0)
    return precision, recall


def harmonic_f1(precision: float, recall: float) -> float:
    """2PR / (P + R), 0 when both are 0."""
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def word_precision_recall_f1(flags, labels, groups) -> tuple[float, float, float]:
    """Word precision and recall averaged over captions (:func:`caption_precision_recall`), and the F1 of
    the two (the official code's)."""
    precision, recall = (values.mean() for values in caption_precision_recall(flags, labels, groups))
    return float(precision), float(recall), float(harmonic_f1(precision, recall))


def ups(mean, std, human) -> float:
    """Uncertainty Pearson Score (Eq. 12): Pearson r between |μ − y| and σ."""
    from scipy.stats import pearsonr

    mean, std, human = (np.asarray(a, dtype=float) for a in (mean, std, human))
    if not mean.shape == std.shape == human.shape or mean.ndim != 1:
        raise ValueError(f"mean, std and human must be 1-D of one length; got {mean.shape}, {std.shape}, {human.shape}")
    return float(pearsonr(np.abs(mean - human), std).statistic)


def kendall_tau_c(system, human) -> float:
    """Kendall τ_c (Eq. 27) between system scores and human ratings."""
    from scipy.stats import kendalltau

    system, human = np.asarray(system, dtype=float), np.asarray(human, dtype=float)
    if not system.shape == human.shape or system.ndim != 1:
        raise ValueError(f"system and human must be 1-D of one length; got {system.shape} and {human.shape}")
    return float(kendalltau(system, human, variant="c").statistic)
