"""The CellProfiler-space analysis (Section 5.1.3): the Image.csv feature pipeline on a fixture in the
real column format, the centroid statistic, and the bootstrap CI's coverage in a simulation."""

import logging
import re
from dataclasses import replace

import numpy as np
import polars as pl
import pytest

from condeval.trust.morphology import (
    CentroidSettings,
    MorphologyDeciles,
    MorphologyFeatures,
    centroid_features,
    centroid_z,
    feature_correlations,
    real_spread,
    selection_contrast,
)


def _image_csv_rows(n: int, rng) -> pl.DataFrame:
    """Rows with the real Image.csv's kinds of column: metadata, file names, timings, counts, features."""
    return pl.DataFrame(
        {
            "ImageNumber": np.arange(1, n + 1),
            "FileName_w1": [f"s{i}_w1.png" for i in range(n)],
            "PathName_w1": ["/data"] * n,
            "MD5Digest_w1": ["0" * 32] * n,
            "ExecutionTime_07IdentifyPrimaryObjects": rng.random(n),
            "ModuleError_07IdentifyPrimaryObjects": np.zeros(n),
            "Metadata_Site": [f"s{i}" for i in range(n)],
            "Group_Index": np.arange(n),
            "Frame_w1": np.zeros(n),
            "Series_w1": np.zeros(n),
            "URL_w1": ["file:///x"] * n,
            "Height_w1": np.full(n, 128.0),
            "Count_Nuclei": rng.integers(3, 9, n).astype(float),
            "Mean_Cells_AreaShape_Area": rng.normal(300, 30, n),
            "Granularity_2_OrigGray": rng.normal(5, 1, n),
            "Mean_Nuclei_Texture_Correlation_OrigGray_3_00_256": rng.normal(0.5, 0.05, n),
            "Median_Cells_AreaShape_Zernike_9_7": np.r_[rng.normal(0, 0.01, n - 1), 1.0],  # one real outlier
            "StDev_Cells_Neighbors_NumberOfNeighbors_Adjacent": np.full(n, 2.0),  # constant
        }
    )


def test_the_feature_pipeline_keeps_the_papers_columns_and_counts_what_it_drops(caplog):
    rng = np.random.default_rng(0)
    real = _image_csv_rows(60, rng)
    features = MorphologyFeatures().fit(real)
    assert features.columns == [
        "Count_Nuclei",
        "Mean_Cells_AreaShape_Area",
        "Granularity_2_OrigGray",
        "Mean_Nuclei_Texture_Correlation_OrigGray_3_00_256",
    ]
    assert features.counts == {"numeric": 7, "variance": 5, "outlier": 4}
    unfiltered = MorphologyFeatures(unfiltered=True).fit(real)
    assert "Median_Cells_AreaShape_Zernike_9_7" in unfiltered.columns  # only zero variance goes
    generated = _image_csv_rows(10, rng).with_columns(
        pl.when(pl.col("ImageNumber") == 3)
        .then(None)
        .otherwise(pl.col("Granularity_2_OrigGray"))
        .alias("Granularity_2_OrigGray")
    )
    with caplog.at_level(logging.WARNING):
        x, kept = features.transform(generated, "generated")
    assert x.shape == (9, 4) and not kept[2]
    assert "generated: 1 of 10 rows dropped" in caplog.text
    scaled_real, _ = features.transform(real)
    np.testing.assert_allclose(scaled_real.mean(axis=0), 0, atol=1e-9)  # the scaler is fitted on real rows
    with pytest.raises(ValueError, match="missing"):
        features.transform(generated.drop("Count_Nuclei"))


def test_centroid_features_rank_by_anova_and_prune_correlated_columns():
    rng = np.random.default_rng(1)
    codes = np.repeat(np.arange(4), 50)
    signal = codes + rng.normal(0, 0.3, 200)
    x = np.column_stack(
        [signal, signal * 2 + rng.normal(0, 0.01, 200), rng.normal(size=200), codes * 0.5 + rng.normal(0, 1.0, 200)]
    )
    kept = centroid_features(x, codes, k=3)
    assert kept[0] in (0, 1) and not {0, 1} <= set(kept.tolist())  # the twin of the best column is pruned
    assert kept.tolist()[1] == 3


def test_samples_from_the_real_distribution_sit_at_z_zero_and_shifted_ones_above():
    rng = np.random.default_rng(2)
    codes = np.repeat(np.arange(5), 40)
    centres = rng.normal(0, 3, (5, 6))
    real = centres[codes] + rng.normal(size=(200, 6))
    spread = real_spread(real, codes, n_splits=20, seed=0)
    fresh = centres[codes] + rng.normal(size=(200, 6))
    assert abs(np.mean(centroid_z(real, codes, fresh, codes, spread))) < 0.25
    shifted = fresh + 1.5
    assert np.mean(centroid_z(real, codes, shifted, codes, spread)) > 2


def _simulated_contrast(seed: int, effect: float, n_boot: int, stratified: bool = True) -> tuple[dict, float]:
    """Conditions whose accepted samples sit ``effect`` closer than the rejected ones: the true
    difference of trust-selected and condition-matched random means is −effect × (share rejected)."""
    rng = np.random.default_rng(seed)
    codes = np.repeat(np.arange(12), 24)
    accepted = rng.random(len(codes)) < 0.5
    z = 3 + rng.normal(0, 2, 12)[codes] - effect * accepted + rng.normal(size=len(codes))
    truth = np.average(
        [-effect * (1 - accepted[codes == c].mean()) for c in range(12)],
        weights=[accepted[codes == c].sum() for c in range(12)],
    )
    result = selection_contrast(z, codes, accepted, n_random=5, n_boot=n_boot, stratified=stratified, seed=seed)
    return result, truth


def test_the_stratified_bootstrap_ci_covers_the_true_difference_at_its_nominal_rate():
    runs = [_simulated_contrast(seed, effect=0.6, n_boot=400) for seed in range(200)]
    coverage = np.mean([r["ci_low"] <= truth <= r["ci_high"] for r, truth in runs])
    assert 0.90 <= coverage <= 0.985, coverage  # 95% nominal: neither too narrow nor needlessly wide
    pooled = [_simulated_contrast(seed, effect=0.6, n_boot=400, stratified=False)[0] for seed in range(20)]
    width = np.mean([r["ci_high"] - r["ci_low"] for r, _ in runs[:20]])
    assert np.mean([r["ci_high"] - r["ci_low"] for r in pooled]) > 2 * width  # the official code's: unpaired


def test_each_arm_and_the_accepted_share_get_intervals_from_the_same_replicates():
    """z (trust), z (random) and Accept% each come with a 95% interval that holds them, drawn from the
    replicates behind Δz's (so Δz's interval is the one it was without them)."""
    result, _ = _simulated_contrast(2, effect=0.6, n_boot=400)
    for key in ("z_trust", "z_random", "accept_pct"):
        assert result[f"{key}_low"] < result[key] < result[f"{key}_high"], key
    assert result["z_trust_high"] - result["z_trust_low"] > result["ci_high"] - result["ci_low"]  # paired is tighter
    pooled, _ = _simulated_contrast(2, effect=0.6, n_boot=400, stratified=False)
    assert "accept_pct_low" not in pooled and pooled["z_random_low"] < pooled["z_random"] < pooled["z_random_high"]


def test_a_real_difference_gives_a_ci_below_zero_and_none_a_ci_around_it():
    result, _ = _simulated_contrast(0, effect=1.0, n_boot=400)
    assert result["ci_high"] < 0 < result["removed_pct"]
    result, _ = _simulated_contrast(1, effect=0.0, n_boot=400)
    assert result["ci_low"] < 0 < result["ci_high"]


def test_feature_correlations_are_high_where_generated_means_track_real_ones():
    rng = np.random.default_rng(3)
    codes = np.repeat(np.arange(8), 30)
    profile = rng.normal(size=(8, 2))
    real = profile[codes] + rng.normal(0, 0.1, (240, 2))
    generated = np.column_stack([profile[codes, 0], rng.normal(size=240)]) + rng.normal(0, 0.1, (240, 2))
    table = feature_correlations(real, codes, generated, codes, rng.random(240) < 0.5, ["tracks", "noise"])
    assert table["r_trust"][0] > 0.9 and abs(table["r_random"][1]) < 0.6
    # r's 95% interval across the 8 conditions, by Fisher's z: tanh(atanh(r) ± 1.96 / sqrt(n − 3))
    r, half = table["r_trust"].to_numpy(), 1.959964 / np.sqrt(8 - 3)
    assert table["conditions"].to_list() == [8, 8]
    np.testing.assert_allclose(table["r_trust_low"], np.tanh(np.arctanh(r) - half), rtol=1e-5)
    np.testing.assert_allclose(table["r_trust_high"], np.tanh(np.arctanh(r) + half), rtol=1e-5)


def test_feature_correlations_are_undefined_across_too_few_conditions_or_for_a_constant_feature():
    rng = np.random.default_rng(4)
    codes = np.repeat(np.arange(4), 20)
    real = np.column_stack([codes + rng.normal(0, 0.1, 80), np.ones(80)])
    generated = real + rng.normal(0, 0.1, (80, 2)) * [1, 0]
    table = feature_correlations(real, codes, generated, codes, np.ones(80, bool), ["varies", "constant"])
    assert table["feature"].to_list() == ["varies"] and table["r_trust"][0] > 0.9
    with pytest.raises(ValueError, match="2 condition"):
        feature_correlations(real, codes, generated, codes, codes < 2, ["varies", "constant"])


def test_the_per_feature_tables_read_generators_without_any_correlation():
    from condeval.trust.morphology import CORRELATION_SCHEMA
    from condeval.trust.report import feature_tables_markdown

    none = pl.DataFrame(schema=CORRELATION_SCHEMA).with_columns(variant=pl.lit("vanilla"))
    assert "No per-feature correlations" in feature_tables_markdown(none, "vanilla")
    rows = pl.DataFrame(
        {
            "feature": ["a", "b"],
            "conditions": [5, 5],
            "r_trust": [0.9, 0.1],
            "r_trust_low": [0.52, -0.8],
            "r_trust_high": [0.98, 0.87],
            "r_random": [0.8, 0.2],
            "gain": [0.1, -0.1],
            "arm": ["seen"] * 2,
            "set": ["kept", "unfiltered"],
        }
    ).with_columns(variant=pl.lit("repa"))
    # the first generator (the sanity check's) has no row; another has both sets
    text = feature_tables_markdown(pl.concat([none, rows], how="diagonal_relaxed"), "vanilla")
    assert "Top-correlated features under trust, repa, seen (kept set, across 5 conditions)" in text
    assert "| `a` | 0.900 (0.520, 0.980) | 0.800 |" in text
    assert "No uninformative-feature check: vanilla" in text
    text = feature_tables_markdown(rows, "repa")
    assert "Uninformative features (unfiltered set, lowest |r| under random), repa, seen" in text and "| `b` |" in text


def test_the_section_table_names_the_arms_without_a_row_and_prints_no_negative_zero():
    from condeval.trust.report import morphology_markdown

    row = {
        "variant": "repa",
        "arm": "seen",
        "n_accepted": 6,
        "accept_pct": 50.0,
        "z_trust": 15.7,
        "z_random": 14.2,
        "delta": 1.5,
        "ci_low": 0.0,
        "ci_high": 2.2,
        "removed_pct": -0.3,
    }
    counts = {
        "numeric": 9,
        "variance": 8,
        "outlier": 7,
        "unfiltered": 8,
        "real_rows": 4,
        "centroid_top_k": None,
        "centroid_features": ["a", "b"],
    }
    text = morphology_markdown(pl.DataFrame([row]), counts, None, ["vanilla", "repa"])
    assert "| +0% |" in text and "-0%" not in text
    assert "| 6 | 50.0 | 15.700 | 14.200 | +1.500 (+0.000, +2.200) |" in text
    with_intervals = row | {"z_trust_low": 12.0, "z_trust_high": 19.0, "accept_pct_low": 40.0, "accept_pct_high": 60.0}
    assert "| 6 | 50.0 (40.0, 60.0) | 15.700 (12.000, 19.000) | 14.200 |" in morphology_markdown(
        pl.DataFrame([with_intervals]), counts, None, []
    )
    assert "No row (no accepted sample among the measured ones): vanilla seen, vanilla unseen, repa unseen." in text
    assert "No row" not in morphology_markdown(pl.DataFrame([row]), counts, None, [])


def test_the_uninformative_features_are_those_nearest_no_correlation():
    """The sanity check lists r near 0 under random selection (the paper's 0.000-0.005), never a feature
    that tracks the real means in reverse (r near -1)."""
    from condeval.trust.report import feature_tables_markdown

    r_random = [-0.99, -0.5, 0.002, 0.3, -0.01] + [0.6 + 0.03 * k for k in range(8)]
    rows = pl.DataFrame(
        {
            "feature": [f"f{k}" for k in range(len(r_random))],
            "r_trust": 0.5,
            "r_random": r_random,
            "gain": 0.0,
            "arm": "unseen",
            "set": "unfiltered",
            "variant": "vanilla",
        }
    )
    listed = re.findall(r"\| `(f\d+)` \|", feature_tables_markdown(rows, "vanilla"))
    assert listed[:3] == ["f2", "f4", "f3"] and "f0" not in listed, listed


def _readout_world(seed: int, trust_offset: float = 0.0):
    """Four (cell type, siRNA) conditions with their own feature means; generated samples whose trust is
    their damage (plus ``trust_offset`` per condition code), accepted below their condition's median."""
    rng = np.random.default_rng(seed)
    conditions = np.array([[0, 1], [1, 1], [2, 2], [3, 2]])
    centres = 3 * rng.normal(size=(4, 12))

    def table(codes, damage):
        x = centres[codes] + rng.normal(size=(len(codes), 12)) + 3 * damage[:, None] * rng.normal(size=(len(codes), 12))
        return pl.DataFrame(
            {f"Mean_Cells_Feature_{k}": x[:, k] for k in range(12)}
            | {"cell_type_id": conditions[codes, 0], "sirna_id": conditions[codes, 1]}
        )

    real_codes, gen_codes = np.repeat(np.arange(4), 30), np.repeat(np.arange(4), 60)
    damage = rng.random(len(gen_codes))
    trust = damage + trust_offset * gen_codes
    accepted = damage < np.median(damage)
    generated = table(gen_codes, damage).with_columns(
        sample_id=np.arange(len(gen_codes)), trust=trust, accepted=accepted
    )
    return table(real_codes, np.zeros(len(real_codes))), generated, conditions


def test_the_readouts_use_every_kept_feature_and_the_same_real_rows_throughout(caplog):
    """The paper's centroid analysis runs on the whole kept set; a real row with a NaN in a column the
    filters drop is still dropped once, before anything is fitted (the paper's step (ii))."""
    from condeval.trust.morphology import morphology_readouts

    real, generated, conditions = _readout_world(0)
    real = real.with_columns(Mean_Cells_Broken=pl.Series([np.nan] + [1.0] * 119))  # constant: the filter drops it
    names = ["cell_type_id", "sirna_id"]
    seen = np.array([True, True, False, False])
    with caplog.at_level(logging.WARNING):
        out = morphology_readouts(
            real,
            generated,
            names,
            conditions,
            seen,
            centroid=CentroidSettings(n_boot=200),
            deciles=MorphologyDeciles(classifier_seeds=(0,)),
        )
    assert out["counts"]["real_rows"] == 119 and "real: 1 of 120 rows dropped" in caplog.text
    assert out["counts"]["centroid_features"] == [f"Mean_Cells_Feature_{k}" for k in range(12)]
    assert (out["contrast"]["delta"] < 0).all() and (out["contrast"]["ci_high"] < 0).all()
    narrow = morphology_readouts(
        real,
        generated,
        names,
        conditions,
        seen,
        centroid=CentroidSettings(top_k=3, n_boot=50),
        deciles=MorphologyDeciles(classifier_seeds=(0,)),
    )
    assert len(narrow["counts"]["centroid_features"]) == 3


def test_cp_deciles_are_class_balanced_within_condition_by_default():
    """With trust offset by condition, global bins each hold one condition (a constant classifier, 25%
    on real sites); the paper's within-condition bins hold all four, and the most trusted trains a classifier that names them."""
    from condeval.trust.morphology import morphology_readouts

    real, generated, conditions = _readout_world(1, trust_offset=10.0)
    args = (real, generated, ["cell_type_id", "sirna_id"], conditions, np.array([True, True, False, False]))
    centroid, deciles = CentroidSettings(n_boot=20), MorphologyDeciles(n_bins=4, classifier_seeds=(0,))
    balanced = morphology_readouts(*args, centroid=centroid, deciles=deciles)["deciles"]
    balanced = balanced.filter(pl.col("target") == "condition").sort("bin")
    pooled = morphology_readouts(*args, centroid=centroid, deciles=replace(deciles, binning="global"))["deciles"]
    pooled = pooled.filter(pl.col("target") == "condition")
    assert pooled["accuracy"].to_list() == pytest.approx([0.25] * 4)
    assert balanced["accuracy"][0] > 0.9 and balanced["accuracy"][0] >= balanced["accuracy"][-1]
    with pytest.raises(ValueError, match="deciles="):
        morphology_readouts(*args, centroid=centroid, deciles=replace(deciles, binning="per_bin"))


def test_a_generator_whose_sites_cellprofiler_cannot_measure_is_reported_not_a_crash(caplog, tmp_path):
    """An untrained generator draws no cells: every CellProfiler feature of its samples is NaN (seen in the
    paper config's rehearsal). The readouts say so: no generated rows, no contrast row, no correlations."""
    from condeval.trust.morphology import morphology_readouts

    real, generated, conditions = _readout_world(1)
    features = [c for c in generated.columns if c.startswith("Mean_")]
    generated = generated.with_columns([pl.lit(np.nan).alias(c) for c in features])
    with caplog.at_level(logging.WARNING):
        out = morphology_readouts(
            real,
            generated,
            ["cell_type_id", "sirna_id"],
            conditions,
            np.array([True, True, False, False]),
            centroid=CentroidSettings(n_boot=20),
            deciles=MorphologyDeciles(classifier_seeds=(0,)),
        )
    assert out["counts"]["generated_rows"] == 0 and out["contrast"].is_empty() and out["correlations"].is_empty()
    assert "did CellProfiler find no cells" in caplog.text
    from condeval.trust.report import plot_morphology_deciles

    plot_morphology_deciles(out["deciles"].with_columns(variant=pl.lit("vanilla")), tmp_path / "fig3.png", "Fig. 3")
    assert (tmp_path / "fig3.png").stat().st_size > 0  # Fig. 3 says nothing was measured
