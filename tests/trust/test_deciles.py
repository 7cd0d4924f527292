"""Deciles by trust: the official binning rule, a real-real null centred on zero, and worse KID and
classifier accuracy in the bins that hold the broken samples."""

import numpy as np
import pytest

from condeval.trust.deciles import DecileSettings, condition_codes, decile_bins, decile_classifier, decile_kid, kid_null
from condeval.trust.filtering import KidSettings


def test_bins_are_equal_within_each_condition_and_the_last_takes_the_remainder():
    codes = np.array([0] * 23 + [1] * 10)
    scores = np.concatenate([np.arange(23)[::-1], np.arange(10)]).astype(float)
    bins = decile_bins(codes, scores, n_bins=10)
    first = bins[:23]
    assert [int((first == b).sum()) for b in range(10)] == [2] * 9 + [5]
    assert first[22] == 0 and first[0] == 9  # the lowest score is in bin 0
    assert bins[23:].tolist() == list(range(10))
    # fewer samples than bins: all would land in the last bin, the most trusted labelled least trusted
    with pytest.raises(ValueError, match="condition 1 has 5 samples for 10 bins"):
        decile_bins(np.array([0] * 10 + [1] * 5), np.arange(15.0), n_bins=10)
    with pytest.raises(ValueError, match="n_bins must be an integer >= 1; got 0"):
        decile_bins(np.zeros(5), np.arange(5.0), n_bins=0)


def _world(seed: int, n_per: int = 300, dim: int = 8):
    """Two conditions, generated samples whose score says how broken they are."""
    rng = np.random.default_rng(seed)
    centres = np.stack([np.full(dim, 1.0), np.full(dim, -1.0)])
    real_codes = np.repeat([0, 1], n_per)
    real = centres[real_codes] + rng.standard_normal((2 * n_per, dim))
    codes = np.repeat([0, 1], n_per)
    damage = rng.random(2 * n_per)
    generated = (
        centres[codes]
        + rng.standard_normal((2 * n_per, dim))
        + 4.0 * damage[:, None] * rng.standard_normal((2 * n_per, dim))
    )
    return generated, codes, damage, real, real_codes


def test_the_null_is_centred_and_broken_deciles_score_worse():
    generated, codes, damage, real, real_codes = _world(0)
    null = kid_null(real, real_codes, n_resamples=30, seed=1)
    assert set(null) == {0, 1}
    for mu, sd in null.values():
        assert abs(mu) < 3 * sd
    bins = decile_bins(codes, damage, n_bins=5)
    table = decile_kid(
        generated, codes, bins, real, real_codes, null, kid_settings=KidSettings(subset_size=100, n_subsets=3)
    )
    assert table["conditions"].to_list() == [2] * 5
    assert table["z_kid"][0] < table["z_kid"][4] and table["kid"][0] < table["kid"][4]
    accuracy = decile_classifier(generated, codes, bins, real, real_codes, seeds=(0, 1))
    assert accuracy["accuracy"][0] > accuracy["accuracy"][4] and accuracy["accuracy"][0] > 0.9


def test_small_conditions_have_no_null_and_codes_are_stable():
    real = np.random.default_rng(0).standard_normal((15, 3))
    assert kid_null(real, np.array([0] * 9 + [1] * 6), n_resamples=5) == {}
    conditions, codes = condition_codes(np.array([[1, 0], [0, 1], [1, 0]]))
    assert conditions.tolist() == [[0, 1], [1, 0]] and codes.tolist() == [1, 0, 1]
    with pytest.raises(ValueError, match="one condition code per score"):
        decile_bins(np.array([0, 0]), np.array([1.0]))


def test_a_bin_of_one_class_scores_as_the_constant_classifier():
    rng = np.random.default_rng(0)
    generated, codes = rng.normal(size=(6, 3)), np.array([0, 0, 0, 1, 1, 1])
    real, real_codes = rng.normal(size=(8, 3)), np.array([0, 0, 1, 1, 1, 1, 1, 1])
    table = decile_classifier(generated, codes, np.array([0, 0, 0, 1, 1, 1]), real, real_codes, seeds=(0,))
    assert table["accuracy"].to_list() == [0.25, 0.75]


def test_the_decile_classifier_is_tested_on_the_queried_conditions_real_rows_alone():
    """Real rows of a condition no sample was generated for cannot be named by the classifier: with as
    many of them as of the queried conditions, counting them would halve every bin's accuracy."""
    import polars as pl

    from condeval.trust.evaluate import rankings

    generated, codes, damage, real, real_codes = _world(1)
    attributes = np.stack([codes, np.zeros_like(codes)], axis=1)
    scores = pl.DataFrame(
        {"a": attributes[:, 0], "b": attributes[:, 1], "trust": damage, "realism": damage, "faithfulness": damage}
    )
    others = np.random.default_rng(2).standard_normal(real.shape) + 6.0
    reference = np.concatenate([real, others])
    reference_attributes = np.concatenate(
        [
            np.stack([real_codes, np.zeros_like(real_codes)], axis=1),
            np.stack([real_codes, np.ones_like(real_codes)], axis=1),
        ]
    )
    table = rankings(
        scores,
        generated,
        reference,
        reference_attributes,
        ["a", "b"],
        kid_settings=KidSettings(subset_size=100, n_subsets=2),
        deciles=DecileSettings(n_bins=5, null_resamples=5, classifier_seeds=(0,)),
    )
    trust = table.filter(pl.col("score") == "trust")
    assert trust["accuracy"][0] > 0.9, trust


def _conditions_world(seed: int, n_conditions: int = 8, n_per: int = 60, dim: int = 6):
    """``n_conditions`` conditions on a circle of centres; a sample's score says how broken it is."""
    rng = np.random.default_rng(seed)
    centres = 1.5 * rng.standard_normal((n_conditions, dim))
    real_codes = codes = np.repeat(np.arange(n_conditions), n_per)
    real = centres[real_codes] + rng.standard_normal((len(real_codes), dim))
    damage = rng.random(len(codes))
    generated = centres[codes] + (1 + 4.0 * damage[:, None]) * rng.standard_normal((len(codes), dim))
    return generated, codes, damage, real, real_codes


def test_decile_intervals_hold_the_estimates_and_the_change_from_the_first_bin_is_clear_of_zero():
    generated, codes, damage, real, real_codes = _conditions_world(0)
    null = kid_null(real, real_codes, n_resamples=10, seed=1)
    bins = decile_bins(codes, damage, n_bins=3)
    kids = decile_kid(generated, codes, bins, real, real_codes, null, kid_settings=KidSettings(subset_size=20))
    accuracy = decile_classifier(generated, codes, bins, real, real_codes, seeds=(0,))
    for table, metrics in ((kids, ("kid", "z_kid")), (accuracy, ("accuracy",))):
        for metric in metrics:
            assert (table[f"{metric}_low"] < table[metric]).all() and (table[metric] < table[f"{metric}_high"]).all()
            assert table[f"{metric}_change"][0] == 0.0
    # the most broken bin against the least: worse by KID and by the classifier, each beyond its interval
    assert kids["kid_change_low"][-1] > 0 and kids["z_kid_change_low"][-1] > 0
    assert accuracy["accuracy_change_high"][-1] < 0


def test_the_accuracy_interval_draws_conditions_not_real_rows():
    # every real row four times over: no new condition, so the interval is as wide (the same draws of
    # conditions); a bootstrap over rows would narrow it by about half
    generated, codes, damage, real, real_codes = _conditions_world(1)
    bins = decile_bins(codes, damage, n_bins=2)
    once = decile_classifier(generated, codes, bins, real, real_codes, seeds=(0,))
    repeated = decile_classifier(generated, codes, bins, np.tile(real, (4, 1)), np.tile(real_codes, 4), seeds=(0,))
    for column in ("accuracy", "accuracy_low", "accuracy_high", "accuracy_change_low", "accuracy_change_high"):
        assert repeated[column].to_list() == pytest.approx(once[column].to_list()), column
