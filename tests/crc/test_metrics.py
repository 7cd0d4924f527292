"""Appendix D metrics against per-caption loops written from the official definitions."""

import numpy as np
import pytest
from scipy.stats import kendalltau

from condeval.crc.metrics import (
    fdr,
    fpr,
    instance_ap,
    instance_f1,
    kendall_tau_c,
    location_accuracy,
    location_accuracy_set,
    ups,
    word_precision_recall_f1,
)


@pytest.fixture()
def words():
    """60 captions of 3–8 words; a third have no error, some two; scores with ties."""
    rng = np.random.default_rng(7)
    lengths = rng.integers(3, 9, 60)
    groups = np.repeat(rng.permutation(60) * 3 + 1, lengths)  # arbitrary, non-contiguous ids
    labels = (rng.uniform(size=len(groups)) < 0.2).astype(int)
    labels[np.isin(groups, np.unique(groups)[:20])] = 0
    scores = np.round(np.clip(rng.normal(0.4 + 0.3 * labels, 0.2), 0, 1), 1)
    return scores, labels, groups


def _captions(*arrays, groups):
    return [[a[groups == g] for a in arrays] for g in np.unique(groups)]


def test_fdr_and_fpr(words):
    scores, labels, groups = words
    flags = scores > 0.5
    per = _captions(flags, labels.astype(bool), groups=groups)
    expected_fdr = np.mean([(t & ~y).sum() / t.sum() if t.sum() else 0.0 for t, y in per])
    expected_fpr = np.mean([(t & ~y).sum() / (~y).sum() if (~y).sum() else 0.0 for t, y in per])
    assert fdr(flags, labels, groups) == pytest.approx(expected_fdr)
    assert fpr(flags, labels, groups) == pytest.approx(expected_fpr)


def test_instance_metrics(words):
    from sklearn.metrics import average_precision_score, f1_score

    scores, labels, groups = words
    per = _captions(scores, labels, groups=groups)
    truth = [y.any() for _, y in per]
    assert instance_ap(scores, labels, groups) == pytest.approx(
        average_precision_score(truth, [s.max() for s, _ in per])
    )
    assert instance_f1(scores > 0.5, labels, groups) == pytest.approx(
        f1_score(truth, [(s > 0.5).any() for s, _ in per], average="macro")
    )


def test_location_accuracies(words):
    scores, labels, groups = words
    per = [(s, y) for s, y in _captions(scores, labels.astype(bool), groups=groups) if y.any()]
    top_hit = [y[np.argmax(s)] and s.max() > 0.5 for s, y in per]  # argmax: the first top word, as topk(k=1)
    set_hit = [(y & (s > 0.5)).any() for s, y in per]
    assert location_accuracy(scores, labels, groups, 0.5) == pytest.approx(np.mean(top_hit))
    assert location_accuracy_set(scores > 0.5, labels, groups) == pytest.approx(np.mean(set_hit))
    assert 0 < np.mean(top_hit) < np.mean(set_hit) < 1  # the fixture exercises both


def test_word_precision_recall_f1(words):
    scores, labels, groups = words
    per = _captions(scores > 0.5, labels.astype(bool), groups=groups)
    precision = np.mean([(t & y).sum() / t.sum() if t.sum() else 0.0 for t, y in per])
    recall = np.mean([(t & y).sum() / y.sum() if y.sum() else 1.0 for t, y in per])
    assert word_precision_recall_f1(scores > 0.5, labels, groups) == pytest.approx(
        (precision, recall, 2 * precision * recall / (precision + recall))
    )


def test_ups_and_kendall_tau_c():
    rng = np.random.default_rng(8)
    human = rng.integers(1, 5, 200).astype(float)
    std = rng.uniform(0.1, 1, 200)
    mean = human + rng.normal(0, std)  # errors grow with the std: UPS > 0
    assert ups(mean, std, human) == pytest.approx(np.corrcoef(np.abs(mean - human), std)[0, 1])
    assert ups(mean, std, human) > 0.3
    # τ_c = (n_c − n_d)/n0 · (n−1)/n · m/(m−1), m the distinct human ratings (Eq. 27), for this small case.
    system, ratings = np.array([0.1, 0.4, 0.35, 0.8, 0.7]), np.array([1, 2, 3, 4, 4])
    pairs = [(i, j) for i in range(5) for j in range(i + 1, 5)]
    sign = [np.sign(system[i] - system[j]) * np.sign(ratings[i] - ratings[j]) for i, j in pairs]
    n, m = 5, 4
    expected = (sign.count(1) - sign.count(-1)) / (n * (n - 1) / 2) * (n - 1) / n * m / (m - 1)
    assert kendall_tau_c(system, ratings) == pytest.approx(expected)
    assert kendall_tau_c(system, ratings) == pytest.approx(kendalltau(system, ratings, variant="c").statistic)


def test_mismatched_lengths_are_refused(words):
    scores, labels, groups = words
    with pytest.raises(ValueError, match="differ in length"):
        fdr(scores[:-1] > 0.5, labels, groups)
    # labels or flags that are not 0/1 were coerced to True (a "0" string, -1, 0.5, scores given as flags)
    for bad, message in [
        (np.full(len(labels), "0"), "labels must be 0/1 or bool per word; got dtype"),
        (np.where(np.arange(len(labels)) == 4, -1, labels), "labels must be 0/1 or bool per word; word 4 is"),
        (np.where(np.arange(len(labels)) == 2, 0.5, labels), "word 2 is"),
    ]:
        for metric in (lambda b: fdr(scores > 0.5, b, groups), lambda b: instance_ap(scores, b, groups)):
            with pytest.raises(ValueError, match=message):
                metric(bad)
    with pytest.raises(ValueError, match="flags must be 0/1 or bool per word"):
        fdr(scores, labels, groups)
    with pytest.raises(ValueError, match="scores, labels, groups differ in length"):
        instance_ap(scores[:-1], labels, groups)
    with pytest.raises(ValueError, match="no words"):
        fdr([], [], [])
    with pytest.raises(ValueError, match=r"non-finite value in 'scores' at index \(3,\)"):
        location_accuracy(np.where(np.arange(len(scores)) == 3, np.nan, scores), labels, groups, 0.5)
    with pytest.raises(ValueError, match="system and human must be 1-D of one length"):
        kendall_tau_c(scores[:5], scores[:4])
    with pytest.raises(ValueError, match="mean, std and human must be 1-D of one length"):
        ups(scores[:5], scores[:5], scores[:4])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"flags": np.zeros((10, 2), bool)}, r"flags must be 1-D, one entry per word; got shapes \[\(10, 2\)\]"),
        ({"groups": 3}, r"groups must be 1-D.*\[\(\)\]"),
        ({"images": np.zeros((10, 1))}, r"one image per word, shape \(10,\); got shape \(10, 1\)"),
    ],
)
def test_arrays_of_another_shape_are_named_with_their_shape(change, message):
    """2-D flags failed in numpy ("object too deep"), groups=3 as "int has no len()", and images of shape
    (10, 1) read "got 10 for 10 words"."""
    from condeval.crc.metrics import fdr

    arguments = {
        "flags": np.zeros(10, bool),
        "labels": np.zeros(10, bool),
        "groups": np.arange(10) // 2,
        "images": None,
    } | change
    with pytest.raises(ValueError, match=message):
        fdr(**arguments)
