"""Image-to-text CReL: folds, shards, Table 2 and the worst case below each covered item's own code."""

import numpy as np
import polars as pl
import pytest

from condeval.core.settings import SearchSettings
from condeval.crel.image_to_text import (
    FOLDS,
    CalibrationFold,
    assign_folds,
    evaluate_crel,
    manifold_check,
    metric_arrays,
    nearest_distances,
    num_z0_curve,
    table2,
)
from condeval.datasets.coco import shard_image_ids


def test_folds_are_the_papers_fractions_and_depend_only_on_ids_and_seed():
    ids = np.arange(1000, 3025)
    folds = assign_folds(ids, seed=4)
    counts = {name: int(np.sum(folds == name)) for name in FOLDS}
    assert counts == {"vae": 2025 - 2 * 101 - 303, "dqr": 303, "cal": 101, "test": 101}
    shuffled = np.random.default_rng(0).permutation(len(ids))
    np.testing.assert_array_equal(assign_folds(ids[shuffled], seed=4), folds[shuffled])
    assert not np.array_equal(assign_folds(ids, seed=5), folds)


def test_shards_partition_the_ids_into_contiguous_ranges():
    ids = np.random.default_rng(1).permutation(np.arange(5, 105))
    shards = [shard_image_ids(ids, 3, k) for k in range(3)]
    np.testing.assert_array_equal(np.concatenate(shards), np.sort(ids))
    assert all(a.max() < b.min() for a, b in zip(shards, shards[1:]))
    with pytest.raises(ValueError):
        shard_image_ids(ids, 3, 3)


def test_metric_arrays_pair_each_metric_with_its_ground_truth():
    image, ref, cap_clip, cap_bert = (np.full((2, 3), v) for v in (1.0, 2.0, 3.0, 4.0))
    X, Y, GT = metric_arrays("clip", image, ref, cap_clip, cap_bert)
    assert (Y == 3).all() and (GT == 1).all()
    X, Y, GT = metric_arrays("bert", image, ref, cap_clip, cap_bert)
    assert (Y == 4).all() and (GT == 2).all()
    with pytest.raises(ValueError, match="unknown metric"):
        metric_arrays("dino", image, ref, cap_clip, cap_bert)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"caption_clip": np.ones((8, 3))}, r"the same n; got \{'image': 2, 'reference_bert': 2, 'caption_clip': 8"),
        (
            {"caption_clip": np.ones((2, 5)), "caption_bert": np.ones((2, 3))},
            "image and caption_clip must come from one",
        ),
        ({"image": [[1.0, np.nan, 0.0], [0.0, 1.0, 0.0]]}, "image"),
        ({"reference_bert": np.ones(2)}, r"reference_bert must be a numeric \(n, width\) array"),
    ],
)
def test_metric_arrays_refuse_sources_of_other_items_or_encoders(change, message):
    """Per-caption features beside per-image ones, and CLIP and BERT sources swapped, came back silently."""
    sources = {
        "image": np.ones((2, 3)),
        "reference_bert": np.ones((2, 5)),
        "caption_clip": np.ones((2, 3)),
        "caption_bert": np.ones((2, 5)),
    } | change
    with pytest.raises(ValueError, match=message):
        metric_arrays("clip", **sources)


def test_the_condition_is_the_image_alone_unless_the_reference_is_asked_for():
    rng = np.random.default_rng(3)
    image, ref, cap_clip, cap_bert = (
        rng.normal(size=(4, 3)),
        rng.normal(size=(4, 5)),
        rng.normal(size=(4, 3)),
        rng.normal(size=(4, 5)),
    )
    for metric in ("clip", "bert"):
        X, _, GT = metric_arrays(metric, image, ref, cap_clip, cap_bert)
        np.testing.assert_array_equal(X, image)  # BERT-SIM's ground truth is not in the condition
        X, _, _ = metric_arrays(metric, image, ref, cap_clip, cap_bert, condition="image+reference")
        np.testing.assert_array_equal(X, np.hstack([image, ref]))
    _, _, GT = metric_arrays("bert", image, ref, cap_clip, cap_bert)
    X, _, _ = metric_arrays("bert", image, ref, cap_clip, cap_bert)
    assert not any(np.allclose(X[:, k : k + GT.shape[1]], GT) for k in range(X.shape[1] - GT.shape[1] + 1))
    with pytest.raises(ValueError, match="crel.image_to_text.condition"):
        metric_arrays("clip", image, ref, cap_clip, cap_bert, condition="reference")


def test_nearest_distances_leave_a_captions_own_row_out():
    gallery = np.array([[1.0, 0.0], [0.0, 1.0], [np.sqrt(0.5), np.sqrt(0.5)]])
    np.testing.assert_allclose(nearest_distances(gallery, gallery), 0.0, atol=1e-12)
    np.testing.assert_allclose(nearest_distances(gallery, gallery, exclude=np.arange(3)), [1 - np.sqrt(0.5)] * 3)
    np.testing.assert_allclose(nearest_distances(np.array([[-1.0, -1.0]]), gallery), [1 + np.sqrt(0.5)])


def test_manifold_check_tells_worst_cases_off_the_manifold_from_real_ones():
    rng = np.random.default_rng(0)
    gallery = _unit(np.abs(rng.normal(size=(500, 8))))  # real captions: one orthant
    own = np.arange(40)
    near = _unit(gallery[own] + 0.05 * rng.normal(size=(40, 8)))
    out = manifold_check(-near, near, gallery, own)  # worst cases in the opposite orthant
    assert np.median(out["caption_nn_distance"]) <= 2 * np.median(out["reference_nn_distance"])
    assert np.all(out["worst_nn_distance"] > out["reference_nn_distance"].max())
    on = manifold_check(near, near, gallery, own)
    np.testing.assert_allclose(on["worst_nn_distance"], on["caption_nn_distance"])


def _box_search(steps, **stopping):
    """Minimise z·gt over the box [-1, 1]^3 (exact minimum −||gt||_1): a linear decoder, convex problem."""
    import torch

    from condeval.crel.reliability import CalibratedRegions, reliability_score

    gt = np.random.default_rng(2).normal(size=(6, 3))
    U = np.vstack([np.eye(3), -np.eye(3)])
    b = np.full((6, 6), -1.0)
    out = reliability_score(
        lambda z, x: z,
        lambda y, g: (y * g).sum(dim=1),
        CalibratedRegions(U, b, 0.0),
        torch.as_tensor(gt),
        search=SearchSettings(num_z0=4, steps=steps, lr=0.2, **stopping),
        return_info=True,
    )
    return gt, out


def test_the_search_records_convergence_and_stops_when_the_objective_is_flat():
    gt, (scores, _, info) = _box_search(200, patience=5, min_improvement=1e-8, early_stop=True)
    np.testing.assert_allclose(scores, -np.abs(gt).sum(axis=1), atol=1e-9)
    assert info["converged"].all() and (info["steps_run"] < 200).all()
    assert (info["last_improvement"] <= 1e-8).all()
    _, (_, _, short) = _box_search(2, patience=5)
    assert not short["converged"].any() and (short["steps_run"] == 2).all()
    _, (full, _, record) = _box_search(200, patience=5, min_improvement=1e-8)
    assert (record["steps_run"] == 200).all() and record["converged"].all()
    np.testing.assert_allclose(full, scores, atol=1e-9)


def test_table2_splits_delta_at_the_own_code():
    scores = pl.DataFrame(
        {
            "model": ["a", "a", "b", "b"],
            "metric": ["clip"] * 4,
            "rho": [0.3, 0.5, 0.2, 0.2],
            "rho_own_code": [0.2, 0.2, 0.1, 0.3],
            "crel_rho": [-0.2, 0.0, 0.1, 0.1],
            "converged": [True, False, True, True],
        }
    )
    a = table2(scores).filter(pl.col("model") == "a").row(0, named=True)
    assert a["rho_own_code"] == pytest.approx(0.2) and a["converged"] == pytest.approx(0.5)
    assert a["reconstruction"] == pytest.approx(-0.2) and a["worst_case"] == pytest.approx(-0.3)
    assert a["reconstruction"] + a["worst_case"] == pytest.approx(a["delta"])


def test_table2_warns_when_the_models_were_scored_on_other_items(caplog):
    """Models scored on disjoint test images were ranked without a word (only n_test hinted at it)."""
    import logging

    scores = pl.DataFrame(
        {
            "model": ["a", "a", "b", "b"],
            "metric": ["clip"] * 4,
            "image_id": [0, 1, 100, 101],
            "rho": [0.3, 0.5, 0.2, 0.2],
            "crel_rho": [-0.2, 0.0, 0.1, 0.1],
        }
    )
    with caplog.at_level(logging.WARNING, logger="condeval.crel.image_to_text"):
        table2(scores)
        assert "clip models were scored on different items (a 2, b 2; 0 shared)" in caplog.text
        caplog.clear()
        table2(scores.with_columns(image_id=pl.Series([0, 1, 0, 1])))
    assert not caplog.text


def test_table2_ranks_within_each_metric():
    scores = pl.DataFrame(
        {
            "model": ["a", "a", "b", "b", "a", "b"],
            "metric": ["clip", "clip", "clip", "clip", "bert", "bert"],
            "rho": [0.3, 0.5, 0.2, 0.2, 0.9, 0.8],
            "crel_rho": [-0.2, 0.0, 0.1, 0.1, 0.5, 0.6],
        }
    )
    table = table2(scores)
    clip_a = table.filter((pl.col("metric") == "clip") & (pl.col("model") == "a")).row(0, named=True)
    assert clip_a["mean_rho"] == pytest.approx(0.4) and clip_a["crel_rho"] == pytest.approx(-0.1)
    assert (clip_a["rank_mean"], clip_a["rank_crel"]) == (1, 2) and clip_a["delta"] == pytest.approx(-0.5)
    bert_b = table.filter((pl.col("metric") == "bert") & (pl.col("model") == "b")).row(0, named=True)
    assert (bert_b["rank_mean"], bert_b["rank_crel"]) == (2, 1)


def _unit(a):
    return a / np.linalg.norm(a, axis=1, keepdims=True)


@pytest.fixture(scope="module")
def fitted(tmp_path_factory):
    """A CReL fitted on caption-like features: unit vectors that depend on the condition, plus noise."""
    from dataclasses import replace

    from condeval.crel import CReL, CReLSettings

    rng = np.random.default_rng(0)
    n, p, d = 1200, 4, 6
    X = _unit(rng.normal(size=(n, p)))
    Y = _unit(np.hstack([X, X[:, :2] ** 2]) + 0.3 * rng.normal(size=(n, d)))
    folds = np.repeat(["vae", "dqr", "cal", "test"], [700, 300, 100, 100])
    settings = CReLSettings(
        latent_dim=3,
        metric="cosine",
        seed=0,
        work_dir=tmp_path_factory.mktemp("crel"),
        lgm=replace(CReLSettings().lgm, epochs=15),
        dqr=replace(CReLSettings().dqr, epochs=8),
        lgm_kwargs={"hidden_dims": [32, 32, 32, 32], "dropout": 0.1, "batch_norm": True},
        dqr_kwargs={"hidden_dims": [16]},
    )
    crel = CReL(settings).fit(X[folds == "vae"], Y[folds == "vae"], X[folds == "dqr"], Y[folds == "dqr"])
    return crel, X, Y, folds


def test_the_worst_case_is_at_most_rho_at_a_covered_items_own_code(fitted):
    crel, X, Y, folds = fitted
    cal, test = folds == "cal", folds == "test"
    GT = _unit(X @ np.ones((4, 6)) + 0.1)  # any ground truth in Y's space
    out = evaluate_crel(
        crel,
        CalibrationFold(X[cal], Y[cal]),
        X[test],
        Y[test],
        GT[test],
        alpha=0.1,
        search=SearchSettings(num_z0=3, steps=5),
    )
    covered = out["covered"]
    assert 0.7 <= covered.mean() <= 1.0
    assert np.all(out["crel_rho"][covered] <= out["rho_own_code"][covered] + 1e-9)
    assert np.all(out["crel_rho"] <= 1.0) and np.all(out["crel_rho"] >= -1.0)


def test_evaluate_crel_refuses_a_search_in_another_metric_than_its_cosines(fitted):
    """rho is a cosine: a CReL searching in -MSE gave Table 2 a delta of -12 against 0.97, silently."""
    from condeval.crel import CReL

    crel, X, Y, folds = fitted
    mse = CReL.from_models(crel.lgm, crel.dqr, metric="mse")
    cal, test = folds == "cal", folds == "test"
    with pytest.raises(ValueError, match="evaluate_crel compares cosines: .* searched in 'mse'"):
        evaluate_crel(
            mse,
            CalibrationFold(X[cal], Y[cal]),
            X[test],
            Y[test],
            Y[test],
            alpha=0.1,
            search=SearchSettings(num_z0=1, steps=1),
        )


def test_fig6_at_table2s_num_z0_is_table2s_crel_rho(fitted):
    crel, X, Y, folds = fitted
    cal, test = folds == "cal", folds == "test"
    GT = _unit(X @ np.ones((4, 6)) + 0.1)
    search = SearchSettings(num_z0=3, steps=5, lr=0.05, seed=3, patience=2, min_improvement=1e-4)
    out = evaluate_crel(crel, CalibrationFold(X[cal], Y[cal]), X[test], Y[test], GT[test], alpha=0.1, search=search)
    curve = num_z0_curve(crel, X[test], Y[test], GT[test], [1, 3], search=search)
    assert [point["num_z0"] for point in curve] == [1, 3]
    assert curve[1]["crel_rho"] == np.mean(out["crel_rho"])  # exactly: the same search
    assert curve[1]["converged"] == np.mean(out["converged"])
    assert curve[1]["se"] == pytest.approx(np.std(out["crel_rho"], ddof=1) / np.sqrt(test.sum()))
    reused = num_z0_curve(crel, X[test], Y[test], GT[test], [1, 3], search=search, searched={3: out})
    assert reused == curve  # Table 2's search stands in for the point it would rerun
    other = folds == "cal"  # a search of other items was taken for these items' point
    with pytest.raises(ValueError, match="num_z0 = 3 scored other items"):
        num_z0_curve(
            crel,
            X[other],
            Y[other],
            GT[other],
            [3],
            search=search,
            searched={3: out | {"crel_rho": np.zeros(other.sum()), "converged": np.ones(other.sum(), bool)}},
        )
    with pytest.raises(TypeError, match=r"num_z0s\[0\] must be an integer"):
        num_z0_curve(crel, X[test], Y[test], GT[test], [2.7], search=search)


def test_a_search_given_to_the_num_z0_curve_is_not_run_again(fitted, monkeypatch):
    import condeval.crel.image_to_text as i2t

    crel, X, Y, folds = fitted
    test = folds == "test"
    GT = _unit(X @ np.ones((4, 6)) + 0.1)
    known = {"crel_rho": np.full(test.sum(), -0.5), "converged": np.ones(test.sum(), dtype=bool)}
    searches = []
    monkeypatch.setattr(i2t, "_worst_case", lambda *args: searches.append(args[4].num_z0) or known)
    search = SearchSettings(steps=5)
    curve = num_z0_curve(crel, X[test], Y[test], GT[test], [1, 3], search=search, searched={3: known})
    assert searches == [1] and curve[1]["crel_rho"] == -0.5
    with pytest.raises(ValueError, match="num_z0 = 3 scored 2 items"):
        num_z0_curve(crel, X[test], Y[test], GT[test], [3], search=search, searched={3: {"crel_rho": [0, 0]}})


def test_feature_sources_made_by_another_encoder_than_the_rules_are_refused_naming_the_shard(tmp_path):
    from condeval.crel.image_to_text import FEATURE_SOURCES, SOURCE_ENCODERS, aligned_features
    from condeval.encoders.features import FeatureShardError, write_feature_shard

    made_by = {"clip": {"weights_sha256": "c" * 64}, "bert": {"weights_sha256": "b" * 64}}
    shards = {}
    for name in FEATURE_SOURCES:
        shards[name] = [tmp_path / f"{name}.safetensors"]
        meta = {"encoder": made_by[SOURCE_ENCODERS[name]]}
        write_feature_shard(shards[name][0], np.arange(4), np.eye(4), meta)
    aligned_features(shards, encoders=made_by)  # every source from the encoder the rule uses
    stale = {**made_by, "bert": {"weights_sha256": "d" * 64}}
    with pytest.raises(FeatureShardError, match="reference_bert.safetensors.*made by encoder weights bbbb"):
        aligned_features(shards, encoders=stale)


def test_rows_of_one_unit_share_a_fold_and_repeated_ids_point_to_it():
    from condeval.crel.image_to_text import assign_unit_folds

    units = np.repeat(np.arange(200), 5)  # five outputs of each of 200 conditions
    folds = assign_unit_folds(units, seed=3)
    per_unit = {unit: set(folds[units == unit]) for unit in range(200)}
    assert all(len(seen) == 1 for seen in per_unit.values())
    np.testing.assert_array_equal(folds[::5], assign_folds(np.arange(200), seed=3))
    with pytest.raises(ValueError, match="assign_unit_folds"):
        assign_folds(units, seed=3)


def test_a_table_refuses_scores_it_would_misrank():
    scores = pl.DataFrame(
        {
            "model": ["a", "a", "b", "b"],
            "metric": ["clip"] * 4,
            "rho": [0.5, 0.6, 0.4, 0.5],
            "crel_rho": [0.1, 0.2, float("nan"), 0.3],
        }
    )
    with pytest.raises(ValueError, match="crel_rho of model 'b', metric 'clip' is nan in 1 rows"):
        table2(scores)
    with pytest.raises(ValueError, match="rho of model 'a'"):
        table2(scores.with_columns(rho=pl.when(pl.col("model") == "a").then(None).otherwise(pl.col("rho"))))
    with pytest.raises(ValueError, match="no column 'metric'"):
        table2(scores.drop("metric"))
    with pytest.raises(TypeError, match="must be a polars DataFrame"):
        table2(scores.to_dict(as_series=False))
    # each accepted before and ranked, or failing inside polars (a lab's trial)
    fine = scores.with_columns(crel_rho=pl.lit(0.1), image_id=pl.Series([1, 2, 1, 2]))
    for frame, error, message in [
        (fine.clear(), ValueError, "no rows"),
        (fine.with_columns(model=pl.lit(None, pl.String)), ValueError, "4 score rows have no model"),
        (fine.with_columns(metric=pl.lit("dino")), ValueError, r"metric\(s\) \['dino'\]; this table's are"),
        (fine.with_columns(rho=pl.col("rho").cast(pl.String)), TypeError, "rho must be numeric; got String"),
        (
            fine.with_columns(image_id=pl.Series([1, 1, 1, 2])),
            ValueError,
            "image 1 appears more than once for model 'a'",
        ),
    ]:
        with pytest.raises(error, match=message):
            table2(frame)
    assert table2(fine).height == 2


def test_text_to_image_arrays_and_table3_refuse_what_they_would_misread(tmp_path):
    from condeval.crel.image_to_text import assign_unit_folds
    from condeval.crel.text_to_image import item_arrays, table3
    from condeval.crel.text_to_image import metric_arrays as t2i_arrays

    rng = np.random.default_rng(0)
    clip, dino = rng.normal(size=(240, 8)), rng.normal(size=(240, 16))
    X, Y, GT = t2i_arrays("dino", clip, clip, dino, dino)
    assert Y.shape == GT.shape == (240, 16) and X.shape == (240, 8)
    with pytest.raises(ValueError, match=r"one row per item, the same n; got .*'real_dino': 100"):
        t2i_arrays("dino", clip, clip, dino[:100], dino)
    with pytest.raises(ValueError, match="caption_clip and generated_clip must come from one encoder"):
        t2i_arrays("clip", clip, dino, dino, dino)
    with pytest.raises(ValueError, match=r"non-finite value in 'real_dino' at index \(3, 0\)"):
        t2i_arrays("dino", clip, clip, np.where(np.arange(240)[:, None] == 3, np.nan, dino), dino)
    with pytest.raises(ValueError, match=r"generated_dino must be a numeric \(n, width\) array"):
        t2i_arrays("dino", clip, clip, dino, list(dino[:, 0]))
    # too few items left calibration and test empty, which failed only in calibrate
    with pytest.raises(ValueError, match=r"19 units leave the fold\(s\) \['cal', 'test'\] empty"):
        assign_folds(np.arange(19), seed=0)
    scores = pl.DataFrame({"model": ["m"] * 2, "metric": ["bert"] * 2, "rho": [0.5, 0.6], "crel_rho": [0.1, 0.2]})
    with pytest.raises(ValueError, match=r"metric\(s\) \['bert'\]; this table's are \['clip', 'dino'\]"):
        table3(scores)

    # three images drawn per caption (ids 3c, 3c + 1, 3c + 2): folds by caption through item_arrays' units
    from condeval.crel.text_to_image import FEATURE_SOURCES, SOURCE_ENCODERS
    from condeval.encoders.features import write_feature_shard

    shards = {}
    for name in FEATURE_SOURCES:
        shards[name] = [tmp_path / f"{name}.safetensors"]
        width = 8 if SOURCE_ENCODERS[name] == "clip" else 16
        meta = {"encoder": {"weights_sha256": SOURCE_ENCODERS[name] * 16}}
        write_feature_shard(shards[name][0], np.arange(240), rng.normal(size=(240, width)), meta)
    caption_of = {image_id: image_id // 3 for image_id in range(240)}
    ids, *_, folds = item_arrays(shards, "dino", seed=0, units=caption_of)
    np.testing.assert_array_equal(folds, assign_unit_folds(ids // 3, seed=0))
    assert all(len(set(folds[ids // 3 == c])) == 1 for c in range(80))
    assert len({frozenset(folds[ids // 3 == c]) for c in range(80)}) == 4
    with pytest.raises(ValueError, match="units names no unit for 1 item"):
        item_arrays(shards, "dino", seed=0, units={i: c for i, c in caption_of.items() if i != 7})
    with pytest.raises(ValueError, match="units names no unit for 1 item"):
        item_arrays(shards, "dino", seed=0, units=caption_of | {7: None})
    with pytest.raises(TypeError, match=r"units must map each image id to its unit .*got ndarray"):
        item_arrays(shards, "dino", seed=0, units=np.arange(240) // 3)
    with pytest.raises(ValueError, match=r"shards lack the source\(s\) \['real_dino'\]"):
        item_arrays({k: v for k, v in shards.items() if k != "real_dino"}, "dino", seed=0)
    # one image twice in a source, with two different rows: the first was used
    write_feature_shard(
        shards["caption_clip"][0],
        np.r_[0, np.arange(239)],
        rng.normal(size=(240, 8)),
        {"encoder": {"weights_sha256": "clip" * 16}},
    )
    with pytest.raises(ValueError, match=r"id 0 appears 2 times, in .*caption_clip\.safetensors"):
        item_arrays(shards, "dino", seed=0)


@pytest.mark.parametrize(
    ("unit_ids", "seed", "error", "message"),
    [
        ([0.0, 1.0, np.nan, np.nan] * 10, 0, ValueError, "unit_ids has a missing id at row 2"),
        ([0, 1, None, 3] * 10, 0, ValueError, "unit_ids has a missing id at row 2"),
        ([1, "1", 2, "2"] * 10, 0, TypeError, "one sortable type"),
        (np.arange(40).reshape(20, 2), 0, ValueError, r"1-D\); got shape \(20, 2\)"),
        (np.arange(40), None, TypeError, "seed must be an integer"),
    ],
)
def test_unit_folds_refuse_missing_and_mixed_ids_and_a_missing_seed(unit_ids, seed, error, message):
    """NaN ids of different images were merged into one unit; seed None drew another split each call."""
    from condeval.crel.image_to_text import assign_unit_folds

    with pytest.raises(error, match=message):
        assign_unit_folds(unit_ids, seed)


def test_evaluate_crel_calibrates_on_units_when_given_groups(fitted):
    """evaluate_crel had no groups: captions of one image were calibrated as exchangeable."""
    crel, X, Y, folds = fitted
    cal, test = folds == "cal", folds == "test"
    images = np.repeat(np.arange(25), 4)
    by_unit = evaluate_crel(
        crel,
        CalibrationFold(X[cal], Y[cal], groups=images),
        X[test][:3],
        Y[test][:3],
        Y[test][:3],
        alpha=0.1,
        search=SearchSettings(num_z0=2, steps=2),
    )
    crel.calibrate(X[cal], Y[cal], 0.1, groups=images)
    assert by_unit["gamma_cal"][0] == crel.gamma_cal_
    crel.calibrate(X[cal], Y[cal], 0.1)
    assert crel.gamma_cal_ != by_unit["gamma_cal"][0]


def _two_captioners(n_items: int, rho_gap: float, crel_gap: float, seed: int = 0) -> pl.DataFrame:
    """Per-item scores of models a and b on the same images: a leads ρ by ``rho_gap`` and trails CReL-ρ
    by ``crel_gap`` on average, with unit-scale noise per item."""
    rng = np.random.default_rng(seed)
    base = rng.normal(0.5, 0.1, n_items)
    rows = []
    for model, rho_shift, crel_shift in (("a", rho_gap, -crel_gap), ("b", 0.0, 0.0)):
        rho = base + rho_shift + 0.05 * rng.normal(size=n_items)
        crel = base - 0.2 + crel_shift + 0.05 * rng.normal(size=n_items)
        rows.append(
            pl.DataFrame(
                {"model": model, "metric": "clip", "image_id": np.arange(n_items), "rho": rho, "crel_rho": crel}
            )
        )
    return pl.concat(rows)


def test_table2_gives_each_mean_its_interval_and_names_a_rank_change_within_noise():
    """A swap of order between ρ and CReL-ρ counts only when paired intervals resolve both differences."""
    from condeval.crel.reports.image_to_text import table2_markdown

    clear = table2(_two_captioners(400, rho_gap=0.03, crel_gap=0.03))
    a = clear.filter(pl.col("model") == "a").row(0, named=True)
    assert (a["rank_mean"], a["rank_crel"]) == (1, 2) and a["rank_change_resolved"]
    assert (
        a["mean_rho_low"] < a["mean_rho"] < a["mean_rho_high"]
        and a["crel_rho_low"] < a["crel_rho"] < a["crel_rho_high"]
    )
    noisy = table2(_two_captioners(20, rho_gap=0.003, crel_gap=0.003, seed=1))
    assert noisy["rank_mean"].to_list() == [1, 2] and noisy["rank_crel"].to_list() == [2, 1]  # a swap...
    assert not noisy["rank_change_resolved"].any()  # ...that 20 items cannot tell from noise
    assert "(within noise)" in table2_markdown(noisy, published={})
    wide = noisy.filter(pl.col("model") == "a").row(0, named=True)
    assert wide["mean_rho_high"] - wide["mean_rho_low"] > a["mean_rho_high"] - a["mean_rho_low"]  # fewer items
    assert "[" in table2_markdown(clear, published={}) and "(up)" in table2_markdown(clear, published={})
