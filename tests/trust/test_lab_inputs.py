"""A lab's own inputs to the trust track's functions beyond the scorer (the lab trial of 2026-11-29):
flags given as 0/1 or text, names in another order, rows that are not the fit's, floats where integers
belong, NaN scores and out-of-range steps are refused by name instead of changing a result silently."""

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from condeval.trust import TrustScorer, condition_thresholds, nearest_seen, selection_gain, support_distance
from condeval.trust.deciles import decile_bins, decile_classifier, decile_kid
from condeval.trust.evaluate import step_thresholds
from condeval.trust.morphology import CentroidSettings, MorphologyDeciles, morphology_readouts, selection_contrast
from condeval.trust.scorers import AlphaPrecisionDistance, KnnPerAttribute
from condeval.trust.translator import TrajectoryTap, Translator, TrustAbstention, compute_saved, translator_pairs

CONDITIONS = np.array([(c, s) for c in (0, 1) for s in (0, 1, 2)])  # (cell_type_id, sirna_id)
FEATURES = ["Count_Nuclei", "Count_Cells", "Mean_Nuclei_AreaShape_Area", "Granularity_2_OrigGray"]


def _scored(seed=0, n=120):
    rng = np.random.default_rng(seed)
    attributes = rng.integers(0, 2, (n, 2))
    features = rng.normal(size=(n, 6)) + attributes @ rng.normal(size=(2, 6))
    return features, attributes, TrustScorer(names=["a", "b"], seed=0).fit(features, attributes)


def test_step_thresholds_want_the_fit_rows_in_their_order():
    features, attributes, scorer = _scored()
    clean = step_thresholds(scorer, features, attributes)
    assert_frame_equal(clean, scorer.thresholds(0.95), check_dtypes=False)
    order = np.random.default_rng(1).permutation(len(features))
    for wrong_features, wrong_attributes, message in [
        (features[order], attributes[order], "not the scorer's fit rows in its order"),
        (features, attributes[::-1], "not the scorer's fit rows in its order"),
        (np.vstack([features, features[:7]]), np.vstack([attributes, attributes[:7]]), "need the 120 rows"),
    ]:
        with pytest.raises(ValueError, match=message):
            step_thresholds(scorer, wrong_features, wrong_attributes)


def test_thresholds_and_bins_refuse_nan_and_infinite_scores():
    attributes = np.repeat([[0, 0], [1, 1]], 20, axis=0)
    scores = np.random.default_rng(0).normal(size=40)
    for bad in (np.nan, np.inf):
        broken = scores.copy()
        broken[3] = bad
        with pytest.raises(ValueError, match=r"non-finite value in 'scores' at index \(3,\)"):
            condition_thresholds(broken, attributes, ["a", "b"])
        with pytest.raises(ValueError, match="non-finite value in 'scores'"):
            decile_bins(attributes[:, 0], broken, 4)


def test_the_appendix_j_scorers_check_rows_as_the_trust_scorer_does():
    features, attributes, _ = _scored()
    knn = KnnPerAttribute().fit(features, attributes)
    with pytest.raises(TypeError, match="refused rather than truncated"):
        knn.score(features, attributes + 0.6)
    distance = AlphaPrecisionDistance().fit(features)
    broken = features.copy()
    broken[5, 2] = np.nan
    with pytest.raises(ValueError, match="non-finite value in 'features'"):
        distance.score(broken)


def test_selection_contrast_reads_flags_not_indices():
    rng = np.random.default_rng(0)
    z, codes = rng.normal(size=60), np.repeat(np.arange(3), 20)
    accepted = rng.random(60) < 0.5
    as_bool = selection_contrast(z, codes, accepted, n_boot=50)
    assert as_bool["z_trust"] == pytest.approx(z[accepted].mean())
    assert selection_contrast(z, codes, accepted.astype(int), n_boot=50) == as_bool
    for wrong, error in ((np.where(accepted, 2, 0), TypeError), (accepted[:-1], ValueError)):
        with pytest.raises(error, match="accepted must be"):
            selection_contrast(z, codes, wrong, n_boot=50)
    with pytest.raises(ValueError, match="no accepted sample"):
        selection_contrast(z, codes, np.zeros(60, bool), n_boot=50)
    with pytest.raises(ValueError, match="codes has 59"):
        selection_contrast(z, codes[:-1], accepted, n_boot=50)


def _cp_table(rng, n_per, shift=0.0, generated=False, start=1):
    """Image.csv-like rows in CellProfiler's naming, the attribute columns joined."""
    attributes = np.repeat(CONDITIONS, n_per, axis=0)
    n = len(attributes)
    x = attributes @ rng.normal(size=(2, len(FEATURES))) + (1 + shift) * rng.normal(size=(n, len(FEATURES)))
    table = {"ImageNumber": np.arange(start, start + n), "cell_type_id": attributes[:, 0], "sirna_id": attributes[:, 1]}
    table |= {feature: x[:, j] for j, feature in enumerate(FEATURES)}
    if generated:
        table |= {"sample_id": np.arange(n), "trust": rng.normal(size=n)}
        table["accepted"] = table["trust"] < 0.8
    return pl.DataFrame(table)


def test_morphology_readouts_read_seen_and_accepted_as_flags():
    rng = np.random.default_rng(0)
    real, generated = _cp_table(rng, 12), _cp_table(rng, 12, shift=1.0, generated=True, start=1000)
    names, seen = ["cell_type_id", "sirna_id"], np.array([True, True, True, False, False, False])
    settings = dict(centroid=CentroidSettings(n_boot=100), deciles=MorphologyDeciles(n_bins=3, classifier_seeds=(0,)))
    contrast = morphology_readouts(real, generated, names, CONDITIONS, seen, **settings)["contrast"]
    assert contrast["n_generated"].to_list() == [36, 36]
    as_integers = morphology_readouts(real, generated, names, CONDITIONS, seen.astype(int), **settings)["contrast"]
    assert as_integers.equals(contrast)
    with pytest.raises(ValueError, match=r"seen must be one flag per row \(N,\) with N = 6"):
        morphology_readouts(real, generated, names, CONDITIONS, seen[:4], **settings)
    text = generated.with_columns(pl.col("accepted").cast(pl.String))
    with pytest.raises(TypeError, match=r"generated\['accepted'\] must be booleans"):
        morphology_readouts(real, text, names, CONDITIONS, seen, **settings)
    floats = real.with_columns(pl.col("sirna_id").cast(pl.Float64))  # as a CSV may read it
    assert morphology_readouts(floats, generated, names, CONDITIONS, seen, **settings)["contrast"].equals(contrast)
    for table, wrong_names, message in [
        (generated.drop("accepted"), names, r"generated table lacks column\(s\) \['accepted'\]"),
        (generated, ["sirna_id"], "lack 'cell_type_id'"),
        (
            generated.with_columns(pl.col("sirna_id") + 0.5),
            names,
            "the generated table's 'sirna_id' must hold integers",
        ),
    ]:
        with pytest.raises((ValueError, TypeError), match=message):
            morphology_readouts(real, table, wrong_names, CONDITIONS[:, : len(wrong_names)], seen, **settings)


def test_lengths_and_empty_supports_are_named():
    generated, codes = np.random.default_rng(0).normal(size=(30, 4)), np.repeat(np.arange(3), 10)
    bins = np.tile(np.arange(2), 15)
    with pytest.raises(ValueError, match="bins has 29"):
        decile_kid(generated, codes, bins[:-1], generated, codes, {})
    with pytest.raises(ValueError, match="generated_codes has 29"):
        decile_classifier(generated, codes[:-1], bins, generated, codes)
    with pytest.raises(ValueError, match="support must be"):
        support_distance(CONDITIONS, np.empty((0, 2)))
    with pytest.raises(ValueError, match="support must be"):
        support_distance(CONDITIONS, np.zeros((1, 3)))
    with pytest.raises(ValueError, match="seen must be"):
        nearest_seen([0, 1], np.empty((0, 2)))
    thresholds = pl.DataFrame({"a": [0], "b": [0], "threshold": [0.0]})
    with pytest.raises(ValueError, match="trust has 30 values for 40 rows"):
        selection_gain(np.zeros((40, 4)), np.zeros(30), np.zeros((40, 4)), (0, 0), thresholds, ["a", "b"])


def test_steps_and_decisions_are_checked():
    assert compute_saved(np.array([True, False]), 1, 3)["steps_saved_pct"] == pytest.approx(100 / 6)
    with pytest.raises(ValueError, match="step 5 is past the sampler's 3 steps"):
        compute_saved(np.array([True, False]), 5, 3)
    with pytest.raises(TypeError, match="abstained must be booleans"):
        compute_saved(np.array([0.3, 2.0]), 1, 3)
    for settings, message in [
        ({"epochs": 0}, "epochs must be an integer >= 1"),
        ({"hidden": 0}, "hidden must be"),
        ({"val_share": -1.0}, "val_share must be a fraction"),
    ]:
        with pytest.raises(ValueError, match=message):
            Translator(**settings)


def test_the_abstention_callback_reads_the_scorers_conditions(attribute_pipeline):
    pipe = attribute_pipeline(num_layers=1)
    features, attributes, scorer = _scored()
    callback = TrustAbstention(TrajectoryTap(pipe.transformer, 1, [1]), scorer, attributes)
    assert_frame_equal(callback.thresholds, scorer.thresholds(0.95))  # the P95-real rule by default
    callback.close()
    with pytest.raises(ValueError, match=r"attributes have 1 columns; the scorer was fitted on 2 \(\['a', 'b'\]\)"):
        TrustAbstention(TrajectoryTap(pipe.transformer, 1, [1]), scorer, attributes[:, :1])
    with pytest.raises(TypeError, match="refused rather than truncated"):
        TrustAbstention(TrajectoryTap(pipe.transformer, 1, [1]), scorer, attributes + 0.6)
    with pytest.raises(ValueError, match="steps must be an integer >= 0"):
        TrustAbstention(TrajectoryTap(pipe.transformer, 1, [-1]), scorer, attributes)
    with pytest.raises(ValueError, match=r"tap must be a TrajectoryTap of one step.* with steps \[0, 1\]"):
        TrustAbstention(TrajectoryTap(pipe.transformer, 1, [0, 1]), scorer, attributes)


def test_translator_pairs_refuse_float_images_attributes_and_levels(attribute_pipeline):
    pipe = attribute_pipeline(num_layers=1)
    images = np.random.default_rng(0).integers(0, 256, (4, 3, 16, 16), dtype=np.uint8)
    attributes = np.array([[0, 0], [1, 1], [0, 2], [1, 0]])
    assert translator_pairs(pipe, images, attributes, [0.5], 1).shape[0] == 4
    for call, error, message in [
        (lambda: translator_pairs(pipe, images / 255.0, attributes, [0.5], 1), TypeError, "images must be uint8"),
        (
            lambda: translator_pairs(pipe, images, attributes + 0.6, [0.5], 1),
            TypeError,
            "refused rather than truncated",
        ),
        (lambda: translator_pairs(pipe, images, attributes, [1.5], 1), ValueError, r"t must lie in \[0, 1\]"),
    ]:
        with pytest.raises(error, match=message):
            call()
