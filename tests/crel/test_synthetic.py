"""Synthetic design of CReL Appendix B.1, folds and preprocessing."""

import numpy as np
import pytest

from condeval.crel.synthetic import FOLDS, Preprocessor, assign_folds, generate, sample_conditional


def test_generate_follows_the_design():
    X, Y, params = generate("nonlinear", 5000, 38, 2, 0.3, seed=0)
    assert X.shape == (5000, 38) and Y.shape == (5000, 2)
    assert X.min() > 0.8 and X.max() < 3.2
    residual = Y - (X @ params.A + X**2 @ params.B)
    assert residual.std() == pytest.approx(0.3, rel=0.05)
    _, Y_lin, lin = generate("linear", 100, 5, 2, 0.0, seed=1)
    assert np.allclose(lin.B, 0)


def test_generate_is_deterministic_per_seed():
    a = generate("nonlinear", 100, 4, 2, 0.3, seed=3)
    b = generate("nonlinear", 100, 4, 2, 0.3, seed=3)
    c = generate("nonlinear", 100, 4, 2, 0.3, seed=4)
    np.testing.assert_array_equal(a[1], b[1])
    assert not np.allclose(a[1], c[1])


def test_folds_have_the_requested_sizes_and_are_deterministic():
    fractions = {"lgm": 0.6, "dqr": 0.24, "cal": 0.08, "test": 0.08}
    labels = assign_folds(50_000, fractions, seed=0)
    assert {f: int((labels == f).sum()) for f in FOLDS} == {"lgm": 30_000, "dqr": 12_000, "cal": 4_000, "test": 4_000}
    np.testing.assert_array_equal(labels, assign_folds(50_000, fractions, seed=0))
    assert not np.array_equal(labels, assign_folds(50_000, fractions, seed=1))
    with pytest.raises(ValueError, match="sum to 1"):
        assign_folds(10, {"lgm": 0.5, "dqr": 0.5, "cal": 0.5, "test": 0.5}, seed=0)


def test_preprocessor_normalizes_rows_and_standardizes_outputs():
    X, Y, _ = generate("nonlinear", 2000, 10, 2, 0.3, seed=0)
    pre = Preprocessor().fit(X, Y)
    Xs = pre.transform_x(X)
    np.testing.assert_allclose(Xs.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(pre.model_to_unit_x(Xs), axis=1), 1.0)
    Ys = pre.transform_y(Y)
    np.testing.assert_allclose(Ys.mean(0), 0, atol=1e-12)
    np.testing.assert_allclose(pre.inverse_y(Ys), Y)
    # the pipeline is scikit-learn's normalize(norm="l2") followed by standardization
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    np.testing.assert_allclose(Xs, (unit - unit.mean(0)) / unit.std(0), atol=1e-10)
    # a consumer refits on the same rows instead of restoring: identical to the bit
    again = Preprocessor().fit(X, Y)
    np.testing.assert_array_equal(again.transform_x(X), Xs)
    assert again.to_dict() == pre.to_dict()


def test_conditional_sampler_matches_the_joint_law():
    """Y | x̃ from the oracle must match the data near that direction (a two-sample check)."""
    X, Y, params = generate("nonlinear", 200_000, 3, 2, 0.3, seed=5)
    unit = X / np.linalg.norm(X, axis=1, keepdims=True)
    target = unit[0]
    near = np.linalg.norm(unit - target, axis=1) < 0.01
    assert near.sum() > 100
    draws = sample_conditional(target[None], 20_000, params, np.random.default_rng(0))[0]
    for q in (0.1, 0.5, 0.9):
        np.testing.assert_allclose(np.quantile(draws, q, axis=0), np.quantile(Y[near], q, axis=0), atol=0.35)
