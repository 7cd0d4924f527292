"""Image-to-text CReL: folds, shards, Table 2 and the worst case below each covered item's own code."""
import numpy as np
import polars as pl
import pytest

from condeval.crel.image_to_text import FOLDS, assign_folds, evaluate_crel, metric_arrays, table2
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
    assert X.shape == (2, 6) and (Y == 3).all() and (GT == 1).all()
    X, Y, GT = metric_arrays("bert", image, ref, cap_clip, cap_bert)
    assert (Y == 4).all() and (GT == 2).all()
    with pytest.raises(ValueError, match="unknown metric"):
        metric_arrays("dino", image, ref, cap_clip, cap_bert)


def test_table2_ranks_within_each_metric():
    scores = pl.DataFrame({
        "model": ["a", "a", "b", "b", "a", "b"],
        "metric": ["clip", "clip", "clip", "clip", "bert", "bert"],
        "rho": [0.3, 0.5, 0.2, 0.2, 0.9, 0.8],
        "crel_rho": [-0.2, 0.0, 0.1, 0.1, 0.5, 0.6],
    })  # fmt: skip
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
    from condeval.crel import CReL

    rng = np.random.default_rng(0)
    n, p, d = 1200, 4, 6
    X = _unit(rng.normal(size=(n, p)))
    Y = _unit(np.hstack([X, X[:, :2] ** 2]) + 0.3 * rng.normal(size=(n, d)))
    folds = np.repeat(["vae", "dqr", "cal", "test"], [700, 300, 100, 100])
    crel = CReL.fit(
        X[folds == "vae"], Y[folds == "vae"], X[folds == "dqr"], Y[folds == "dqr"], tmp_path_factory.mktemp("crel"),
        latent_dim=3, metric="cosine", lgm_epochs=15, dqr_epochs=8, seed=0,
        lgm_kwargs={"hidden_dims": [32, 32, 32, 32], "dropout": 0.1, "batch_norm": True}, dqr_kwargs={"hidden_dims": [16]},
    )  # fmt: skip
    return crel, X, Y, folds


def test_the_worst_case_is_at_most_rho_at_a_covered_items_own_code(fitted):
    crel, X, Y, folds = fitted
    cal, test = folds == "cal", folds == "test"
    GT = _unit(X @ np.ones((4, 6)) + 0.1)  # any ground truth in Y's space
    out = evaluate_crel(crel, X[cal], Y[cal], X[test], Y[test], GT[test], alpha=0.1, num_z0=3, steps=5, lr=0.05, seed=0)
    covered = out["covered"]
    assert 0.7 <= covered.mean() <= 1.0
    assert np.all(out["crel_rho"][covered] <= out["rho_own_code"][covered] + 1e-9)
    assert np.all(out["crel_rho"] <= 1.0) and np.all(out["crel_rho"] >= -1.0)
