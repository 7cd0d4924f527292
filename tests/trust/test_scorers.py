"""The ablation scorers against their definitions written out by hand, and the shared P95 thresholds."""

import numpy as np
import pytest

from condeval.metrics import unit_rows
from condeval.trust import (
    AlphaPrecisionDistance,
    KnnPerAttribute,
    LinearProbeEnergy,
    alpha_precision,
    condition_thresholds,
)
from condeval.trust.scorers import clip_alignment


def _world(n: int, seed: int, dim: int = 6):
    rng = np.random.default_rng(seed)
    attributes = np.stack([rng.integers(0, 2, n), rng.integers(0, 3, n)], axis=1)
    effects = [np.random.default_rng(7).normal(0, 2, (2, dim)), np.random.default_rng(8).normal(0, 2, (3, dim))]
    features = 1.0 + effects[0][attributes[:, 0]] + effects[1][attributes[:, 1]] + rng.standard_normal((n, dim))
    return features, attributes


def test_the_probe_energy_is_the_summed_negative_logsumexp_of_the_logits():
    from scipy.special import logsumexp

    x, a = _world(600, 0)
    scorer = LinearProbeEnergy().fit(x, a)
    queries, _ = _world(50, 1)
    z = unit_rows(queries)
    binary = -np.logaddexp(0.0, scorer.probes_[0].decision_function(z))
    three = -logsumexp(scorer.probes_[1].decision_function(z), axis=1)
    np.testing.assert_allclose(scorer.score(queries), binary + three, rtol=1e-12)


def test_knn_is_the_kth_cosine_distance_among_the_requested_values_rows():
    x, a = _world(300, 0)
    scorer = KnnPerAttribute(k=5).fit(x, a)
    queries, asked = _world(20, 2)
    zx, zq = unit_rows(x), unit_rows(queries)
    expected = np.zeros(20)
    for i in range(20):
        for k in range(2):
            pool = zx[a[:, k] == asked[i, k]]
            expected[i] += np.sort(1.0 - pool @ zq[i])[4]
    np.testing.assert_allclose(scorer.score(queries, asked), expected, atol=1e-10)
    with pytest.raises(ValueError, match="never seen"):
        scorer.score(queries[:1], np.array([[0, 7]]))


def test_alpha_precision_reads_the_real_quantiles():
    x, a = _world(2000, 0)
    scorer = AlphaPrecisionDistance().fit(x)
    fresh, _ = _world(4000, 3)
    curve = alpha_precision(scorer, fresh, alphas=[0.25, 0.5, 0.9])
    np.testing.assert_allclose(curve, [0.25, 0.5, 0.9], atol=0.03)
    assert (alpha_precision(scorer, -fresh, alphas=[0.5, 0.9]) < [0.3, 0.6]).all()  # pointing away from the real centre


def test_condition_thresholds_are_each_conditions_quantile():
    rng = np.random.default_rng(0)
    attributes = rng.integers(0, 2, (500, 2))
    scores = rng.standard_normal(500) + attributes[:, 0]
    table = condition_thresholds(scores, attributes, ["m", "s"], 0.95)
    for m, s, threshold, n, _ in table.iter_rows():
        rows = (attributes[:, 0] == m) & (attributes[:, 1] == s)
        assert n == rows.sum() and threshold == pytest.approx(np.quantile(scores[rows], 0.95))


def test_clip_alignment_is_the_negative_cosine_with_the_conditions_prompt():
    images = np.array([[1.0, 0.0], [0.0, 2.0], [1.0, 1.0]])
    prompts = np.array([[1.0, 0.0], [0.0, 1.0]])
    np.testing.assert_allclose(clip_alignment(images, prompts, np.array([0, 0, 1])), [-1.0, 0.0, -np.sqrt(0.5)])
