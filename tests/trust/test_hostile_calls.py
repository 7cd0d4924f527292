"""Calls a lab could get wrong are refused naming the argument, never a raw numpy error or a quiet
conversion: strings as features or scores, a string setting, a non-finite trust, strings in KID, conditions
the baseline scorers cannot read."""

import numpy as np
import pytest

from condeval.crel import CReL
from condeval.metrics import kid
from condeval.trust import KnnPerAttribute, LinearProbeEnergy, TrustScorer, clip_alignment, clip_alignment_scores
from condeval.trust.filtering import accepted_mask

RNG = np.random.default_rng(0)
FEATURES, ATTRIBUTES = RNG.normal(size=(200, 4)), RNG.integers(0, 2, (200, 1))


def test_a_trust_scorer_refuses_string_features_and_a_string_calibration():
    with pytest.raises(TypeError, match="features must be real numbers; got dtype <U"):
        TrustScorer().fit(FEATURES.astype(str), ATTRIBUTES)
    with pytest.raises(TypeError, match="calibration must be a number; got str '0.2'"):
        TrustScorer(calibration="0.2")


@pytest.mark.parametrize("bad", [np.nan, -np.inf])
def test_a_non_finite_trust_is_refused_not_rejected_or_accepted(bad):
    scorer = TrustScorer(names=["a"]).fit(FEATURES, ATTRIBUTES)
    trust = scorer.score(FEATURES[:10], ATTRIBUTES[:10])["trust"].to_numpy().copy()
    trust[3] = bad
    with pytest.raises(ValueError, match=r"non-finite value in 'trust' at index \(3,\)"):
        accepted_mask(trust, ATTRIBUTES[:10], scorer.thresholds(0.95), ["a"])


def test_kid_refuses_numeric_strings():
    with pytest.raises(TypeError, match="kid needs real-valued features; got dtype <U"):
        kid(FEATURES[:50].astype(str), FEATURES[50:100])


@pytest.mark.parametrize("scores", [np.array(["0.5", "1.0"] * 10), np.array([True, False] * 10)])
def test_crel_calibration_refuses_scores_that_are_no_distances(scores):
    with pytest.raises(TypeError, match="scores_cal must be real numbers"):
        CReL.__new__(CReL).calibrate_from_scores(scores, 0.1)


def test_the_baseline_scorers_refuse_conditions_they_cannot_read():
    with pytest.raises(ValueError, match=r"attribute 0 takes one value \(1\) in every real row"):
        LinearProbeEnergy().fit(FEATURES, np.ones_like(ATTRIBUTES))
    knn = KnnPerAttribute().fit(FEATURES, ATTRIBUTES)
    for columns in (np.hstack([ATTRIBUTES, ATTRIBUTES])[:5], np.empty((5, 0), dtype=int)):
        with pytest.raises(ValueError, match=f"attributes have {columns.shape[1]} columns; the fit had 1"):
            knn.score(FEATURES[:5], columns)


@pytest.mark.parametrize(
    ("index", "message"),
    [([0, -1], r"must lie in 0\.\.1 .*got -1\.\.0"), ([0, 2], r"got 0\.\.2"), ([0.0, 1.0], "1-D array of ints")],
)
def test_clip_alignment_refuses_a_condition_index_outside_the_prompts(index, message):
    with pytest.raises(ValueError, match=message):
        clip_alignment(FEATURES[:2], FEATURES[:2], np.array(index))


def test_clip_alignment_scores_want_a_group():
    with pytest.raises(ValueError, match="no groups to score"):
        clip_alignment_scores(object())
