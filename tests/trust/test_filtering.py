"""The P95 selection protocol on small tables: the Hamming fallback and its ties, and a KID gain when
the score ranks the broken samples last (none when it ranks at random)."""

import numpy as np
import polars as pl
import pytest

from condeval.trust.filtering import KidSettings, SelectionProtocol, acceptance, nearest_seen, selection_gain

NAMES = ["a", "b", "c"]
SUBSETS_OF_200 = SelectionProtocol(kid=KidSettings(subset_size=200))
THRESHOLDS = pl.DataFrame(
    {"a": [0, 1, 0, 0], "b": [0, 0, 1, 0], "c": [0, 0, 0, 1], "threshold": [1.0, 2.0, 3.0, 4.0], "n_real": [50] * 4}
)


def test_nearest_seen_returns_every_tie():
    seen = THRESHOLDS.select(NAMES).to_numpy()
    np.testing.assert_array_equal(nearest_seen((0, 0, 1), seen), [[0, 0, 1]])
    np.testing.assert_array_equal(nearest_seen((1, 1, 0), seen), [[1, 0, 0], [0, 1, 0]])
    assert len(nearest_seen((1, 1, 1), seen)) == 3  # three single-attribute conditions at distance 2


def test_a_calibrated_condition_uses_its_own_threshold_an_unseen_one_its_nearest():
    trust = np.array([0.5, 1.5, 2.5, 3.5])
    ((ref, accepted),) = acceptance(trust, (1, 0, 0), THRESHOLDS, NAMES)
    assert ref == (1, 0, 0) and accepted.tolist() == [True, True, False, False]
    entries = acceptance(trust, (1, 1, 0), THRESHOLDS, NAMES)
    assert [ref for ref, _ in entries] == [(1, 0, 0), (0, 1, 0)]
    assert [mask.sum() for _, mask in entries] == [2, 3]


def _samples(seed: int, n: int = 400, dim: int = 6, broken: float = 0.4):
    rng = np.random.default_rng(seed)
    real = rng.standard_normal((300, dim)) + 2.0
    generated = rng.standard_normal((n, dim)) + 2.0
    bad = rng.random(n) < broken
    generated[bad] += rng.normal(0, 2.5, (bad.sum(), dim))
    return generated, bad, real


def test_a_score_that_ranks_broken_samples_last_gains_kid():
    generated, bad, real = _samples(0)
    trust = bad.astype(float) + 0.1 * np.random.default_rng(1).standard_normal(len(bad))
    thresholds = THRESHOLDS.with_columns(pl.lit(0.5).alias("threshold"))
    gain = selection_gain(generated, trust, real, (1, 0, 0), thresholds, NAMES, SUBSETS_OF_200)
    assert gain["skipped"] is None and gain["fallback"] == 0
    assert abs(gain["accept"] - (~bad).mean()) < 0.02
    assert gain["kid_accepted"] < gain["kid_random"] < gain["kid_all"] * 1.5
    assert gain["improvement"] > 0.5 and gain["improvement"] > gain["band"]
    blind = selection_gain(
        generated, np.random.default_rng(2).random(len(bad)), real, (1, 0, 0), thresholds, NAMES, SUBSETS_OF_200
    )
    assert abs(blind["improvement"]) < max(0.2, blind["band"])
    tied = selection_gain(generated, trust, real, (1, 1, 0), thresholds, NAMES, SUBSETS_OF_200)
    assert tied["fallback"] == 2 and tied["improvement"] == pytest.approx(gain["improvement"])


def test_too_few_samples_are_skipped_with_the_reason():
    generated, bad, real = _samples(0, n=15)
    out = selection_gain(generated, np.zeros(15), real, (1, 0, 0), THRESHOLDS, NAMES)
    assert out["skipped"].startswith("fewer than 20 generated")
    generated, bad, real = _samples(0)
    out = selection_gain(generated, np.full(len(generated), 9.0), real, (1, 0, 0), THRESHOLDS, NAMES)
    assert out["skipped"] == "fewer than 10 accepted samples"


def test_support_distance_grades_the_shift():
    from condeval.datasets.celeba import all_conditions, support
    from condeval.trust.filtering import support_distance

    conditions = all_conditions()
    distance = support_distance(conditions, conditions[support(conditions, "held_out")])
    # held out: the reference and single-attribute conditions are seen; k attributes on is k - 1 away
    np.testing.assert_array_equal(distance, np.maximum(conditions.astype(int).sum(axis=1) - 1, 0))


def test_a_thresholds_expected_coverage_matches_simulation_and_few_rows_are_named(caplog):
    """The P95 of n real rows accepts about (1 + 0.95(n − 1)) / (n + 1) of the next real samples on
    average (within the interpolation's 0.02): 0.65 at n = 2, so a threshold on two calibration rows is far from a P95 and the log says so."""
    import logging

    from condeval.trust.filtering import condition_thresholds

    rng = np.random.default_rng(0)
    for n in (2, 4, 40):
        covered = []
        for _ in range(1500):
            calibration, fresh = rng.normal(size=n), rng.normal(size=50)
            threshold = condition_thresholds(calibration, np.zeros((n, 1), int), ["a"])
            covered.append(np.mean(fresh <= threshold["threshold"][0]))
        assert np.mean(covered) == pytest.approx(threshold["coverage"][0], abs=0.025), n
    with caplog.at_level(logging.WARNING):
        condition_thresholds(rng.normal(size=5), np.array([[0]] * 2 + [[1]] * 3), ["a"])
    assert "2 of 2 conditions' P95 thresholds rest on fewer than 20 calibration rows (2 to 3)" in caplog.text


def test_no_improvement_is_reported_where_random_subsets_kid_is_not_positive():
    """A generator that matches the real distribution: the unbiased KID of random subsets falls at or below
    zero about half the time, where (KID_random − KID_trust) / KID_random flips its sign (a +2,790% gain
    was reported for a selection that made KID worse). The improvement is then undefined, everywhere."""
    from condeval.trust.evaluate import selection_markdown, selection_summary

    rng = np.random.default_rng(0)
    thresholds = THRESHOLDS.with_columns(pl.lit(0.5).alias("threshold"))
    undefined = []
    for seed in range(6):
        real, generated = rng.standard_normal((300, 6)), rng.standard_normal((200, 6))
        protocol = SelectionProtocol(kid=KidSettings(subset_size=60, seed=seed))
        gain = selection_gain(generated, rng.random(200), real, (1, 0, 0), thresholds, NAMES, protocol)
        assert (gain["improvement"] is None) == (gain["kid_random"] <= 0)
        undefined += [gain] if gain["improvement"] is None else []
    assert undefined, "no seed gave random subsets a KID <= 0"
    row = {"skipped": None, "kid_all": 0.1, "mean_trust": 0.0, "accept": 0.5, "n_generated": 200}
    worse = pl.DataFrame(
        [
            row
            | {
                "kid_accepted": 0.468,
                "kid_accepted_std": 0.1,
                "kid_random": -0.017,
                "kid_random_std": 0.1,
                "improvement": None,
            }
        ]
    )
    summary = selection_summary(worse)
    assert summary["improvement"] is None and summary["band"] is None and summary["improvement_official"] is None
    assert "undefined (KID random ≤ 0)" in selection_markdown(
        [{"dataset": "d", "regime": "r", "variant": "v"} | summary]
    )


def test_a_row_without_an_evaluated_condition_shows_no_value_in_every_measured_cell():
    """A generator none of whose conditions could be evaluated (too few samples or real rows) keeps its row,
    with the table's column count and a dash, not a blank, in each cell nothing was measured for."""
    from condeval.trust.evaluate import NO_VALUE, selection_markdown

    markdown = selection_markdown(
        [{"dataset": "d", "regime": "r", "variant": "v", "conditions": 0, "accept": None, "spearman": None}]
    )
    header, _, row = markdown.strip().splitlines()
    cells = [cell.strip() for cell in row.strip("|").split("|")]
    assert len(cells) == header.count("|") - 1
    assert cells[3:] == ["0", NO_VALUE, NO_VALUE, NO_VALUE, NO_VALUE, NO_VALUE, NO_VALUE]
