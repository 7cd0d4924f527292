"""Fast checks of the CReL estimator's contract on small untrained models: the threshold is the
conformal order statistic, calibration is all or nothing, and bad input names the argument."""

from dataclasses import replace

import numpy as np
import polars as pl
import pytest
import torch

from condeval.core.conformal import conformal_quantile
from condeval.core.settings import SearchSettings
from condeval.crel import CReL, CReLSettings
from condeval.crel.models.dqr import DirectionalQuantileRegressor
from condeval.crel.models.vae import LatentVAE


@pytest.fixture()
def crel():
    torch.manual_seed(0)
    lgm = LatentVAE(output_dim=2, latent_dim=2, hidden_dims=[8, 8])
    dqr = DirectionalQuantileRegressor(
        cond_dim=3,
        latent_dim=2,
        quantile_level=0.1,
        direction_seed=0,
        n_directions=32,
        directions_per_step=16,
        hidden_dims=[8],
    )
    return CReL.from_models(lgm, dqr)


@pytest.fixture()
def data():
    rng = np.random.default_rng(0)
    return rng.normal(size=(60, 3)), rng.normal(size=(60, 2))


def test_gamma_cal_is_the_conformal_quantile_of_the_scores(crel, data):
    X, Y = data
    for alpha in (0.05, 0.1, 0.3):
        crel.calibrate(X, Y, alpha)
        assert crel.gamma_cal_ == conformal_quantile(crel.latent_scores(X, Y), alpha)
        assert crel.gamma_cal_ == conformal_quantile(crel.scores_cal_, alpha)


def test_a_failed_calibration_leaves_the_estimator_as_it_was(crel, data):
    X, Y = data
    crel.calibrate(X, Y, 0.1)
    before = (crel.gamma_cal_, crel.scores_cal_.copy(), crel.alpha_, crel.contains(X, Y).copy())
    with pytest.raises(ValueError, match="too few calibration points"):
        crel.calibrate(X[:5], Y[:5], 0.1)
    Y_nan = Y.copy()
    Y_nan[3, 1] = np.nan
    with pytest.raises(ValueError, match="'Y'"):
        crel.calibrate(X, Y_nan, 0.1)
    with pytest.raises(ValueError, match="too few"):
        crel.set_alpha(0.001)
    assert crel.gamma_cal_ == before[0] and crel.alpha_ == before[2]
    np.testing.assert_array_equal(crel.scores_cal_, before[1])
    np.testing.assert_array_equal(crel.contains(X, Y), before[3])


def test_wrong_widths_name_the_argument_and_the_expected_shape(crel, data):
    X, Y = data
    with pytest.raises(ValueError, match=r"X must have shape \(n, 3\).*\(60, 5\)"):
        crel.calibrate(np.ones((60, 5)), Y, 0.1)
    with pytest.raises(ValueError, match=r"Y must have shape \(n, 2\).*\(60, 4\)"):
        crel.calibrate(X, np.ones((60, 4)), 0.1)
    with pytest.raises(ValueError, match="same number of rows"):
        crel.calibrate(X, Y[:50], 0.1)


def test_complex_and_string_features_are_refused_by_name(crel, data):
    """Complex X lost its imaginary part with a torch warning; str X failed inside torch unnamed."""
    X, Y = data
    with pytest.raises(TypeError, match="X must be real numbers; got dtype complex128"):
        crel.calibrate(X + 1j, Y, 0.1)
    with pytest.raises(TypeError, match="Y must be real numbers; got dtype <U"):
        crel.calibrate(X, Y.astype(str), 0.1)
    crel.calibrate(X, Y, 0.1)
    with pytest.raises(TypeError, match="X must be real numbers"):
        crel.contains(X.astype(str), Y)


def test_a_zero_ground_truth_is_refused_under_the_cosine_metric(data):
    """Its cosine is 0 to every point: CReL-rho scored 0, silently."""
    torch.manual_seed(0)
    lgm = LatentVAE(output_dim=2, latent_dim=2, hidden_dims=[8, 8])
    dqr = DirectionalQuantileRegressor(
        cond_dim=3,
        latent_dim=2,
        quantile_level=0.1,
        direction_seed=0,
        n_directions=32,
        directions_per_step=16,
        hidden_dims=[8],
    )
    crel, (X, Y) = CReL.from_models(lgm, dqr, metric="cosine"), data
    crel.calibrate(X, Y, 0.1)
    gt = Y.copy()
    gt[4] = 0.0
    with pytest.raises(ValueError, match="gt row 4 is all zeros"):
        crel.reliability(X, gt, search=SearchSettings(steps=2, num_z0=2))


def test_use_before_calibration_says_to_calibrate(crel, data):
    X, Y = data
    for call in (
        lambda: crel.contains(X, Y),
        lambda: next(iter(crel.region_clouds(X))),
        lambda: crel.reliability(X, Y),
        lambda: crel.set_alpha(0.1),
    ):
        with pytest.raises(RuntimeError, match=r"calibrate\(X_cal, Y_cal, alpha\)"):
            call()


@pytest.mark.parametrize("alpha", [None, "0.1", [0.1]])
def test_conformal_quantile_names_a_non_numeric_alpha(alpha):
    with pytest.raises(TypeError, match="alpha must be a number"):
        conformal_quantile(np.arange(50.0), alpha)


def _fit_arrays(n: int = 40):
    rng = np.random.default_rng(1)
    return {
        "X_lgm": rng.normal(size=(n, 3)),
        "Y_lgm": rng.normal(size=(n, 2)),
        "X_dqr": rng.normal(size=(n, 3)),
        "Y_dqr": rng.normal(size=(n, 2)),
    }


def _changed(arrays: dict, name: str, value) -> dict:
    return arrays | {name: value}


_ARRAYS = _fit_arrays()
_NAN = _ARRAYS["X_lgm"].copy()
_NAN[2, 1] = np.nan


@pytest.mark.parametrize(
    ("arrays", "settings", "error", "message"),
    [
        (_changed(_ARRAYS, "X_dqr", _ARRAYS["X_dqr"][:20]), {}, ValueError, "X_dqr and Y_dqr .* 20 and 40"),
        (_changed(_ARRAYS, "X_lgm", _ARRAYS["X_lgm"][:10]), {}, ValueError, "X_lgm and Y_lgm .* 10 and 40"),
        (_changed(_ARRAYS, "Y_dqr", np.ones((40, 4))), {}, ValueError, "Y_lgm and Y_dqr must have the same width"),
        (_changed(_ARRAYS, "Y_lgm", np.ones(40)), {}, ValueError, r"Y_lgm must be 2-D .*\(40,\)"),
        (_changed(_ARRAYS, "X_dqr", [["a"] * 3] * 40), {}, TypeError, "X_dqr must be real numbers; got dtype <U1"),
        (_changed(_ARRAYS, "X_lgm", _NAN), {}, ValueError, "X_lgm"),
        (_fit_arrays(3), {}, ValueError, "Y_lgm has 3 rows: too few"),
        (_ARRAYS, {"val_fraction": 1.2}, ValueError, "val_fraction must be in"),
        (_ARRAYS, {"quantile_level": 1.5}, ValueError, "quantile_level must be in"),
        # a cond_dim other than X's width failed inside the first training step (mat1 and mat2 shapes)
        (_ARRAYS, {"lgm_kwargs": {"cond_dim": 5}}, ValueError, "cond_dim=5: a conditional VAE reads X_lgm, 3 wide"),
        (_ARRAYS, {"dqr_kwargs": {"latent_dim": 4}}, TypeError, r"dqr_kwargs may not set \['latent_dim'\]"),
        # the learning rate moved to the training's settings: a model keyword would be a raw TypeError in fit
        (_ARRAYS, {"lgm_kwargs": {"lr": 0.1}}, TypeError, r"lgm_kwargs may not set lr: .*TrainSettings\(\.\.\., lr="),
        (_ARRAYS, {"dqr": {"lr": -1.0}}, ValueError, "lr must be a finite number >= 0; got -1.0"),
        # no epoch: a missing checkpoint after a run that trained nothing
        (_ARRAYS, {"lgm": {"epochs": 0}}, ValueError, "epochs must be an integer >= 1; got 0"),
        (_ARRAYS, {"dqr": {"batch_size": 2.5}}, TypeError, "batch_size must be an integer >= 1; got float"),
        (_ARRAYS, {"metric": "l1"}, ValueError, "l1"),
    ],
)
def test_a_bad_fit_input_is_refused_by_name_before_any_training(tmp_path, arrays, settings, error, message):
    with pytest.raises(error, match=message):
        CReL(_settings(tmp_path, **settings)).fit(**arrays)
    assert not (tmp_path / "run").exists()


def _settings(tmp_path, lgm=None, dqr=None, **changes) -> CReLSettings:
    """One-epoch settings training in ``tmp_path / "run"``; ``lgm`` / ``dqr`` change their TrainSettings."""
    return CReLSettings(
        lgm=replace(CReLSettings().lgm, **({"epochs": 1} | (lgm or {}))),
        dqr=replace(CReLSettings().dqr, **({"epochs": 1} | (dqr or {}))),
        work_dir=tmp_path / "run",
        **changes,
    )


def test_a_conditional_vae_fits_on_its_conditions_with_the_batch_sizes_given(tmp_path):
    arrays = _fit_arrays(40)
    settings = _settings(
        tmp_path,
        lgm={"batch_size": 8},
        dqr={"batch_size": 8},
        lgm_kwargs={"cond_dim": 3, "hidden_dims": [8, 8]},
        dqr_kwargs={"n_directions": 16, "directions_per_step": 8, "hidden_dims": [8]},
    )
    crel = CReL(settings).fit(**arrays)
    assert crel.conditional_lgm and set(crel.checkpoints_) == {"lgm", "dqr"}
    assert crel.encode(arrays["X_dqr"], arrays["Y_dqr"]).shape == (40, 2)


def test_save_and_load_give_back_the_same_calibrated_estimator(crel, data, tmp_path):
    """save/load: the same codes, the same γ and the same coverage decisions, read with torch alone."""
    X, Y = data
    crel.calibrate(X, Y, 0.2, groups=np.arange(len(X)) // 2)
    loaded = CReL.load(crel.save(tmp_path / "saved"))
    np.testing.assert_array_equal(loaded.encode(X, Y), crel.encode(X, Y))
    assert (loaded.gamma_cal_, loaded.alpha_, loaded.metric) == (crel.gamma_cal_, crel.alpha_, crel.metric)
    np.testing.assert_array_equal(loaded.contains(X, Y), crel.contains(X, Y))
    uncalibrated = CReL.load(CReL.from_models(crel.lgm, crel.dqr).save(tmp_path / "models"))
    with pytest.raises(RuntimeError, match="not calibrated"):
        uncalibrated.contains(X, Y)
    with pytest.raises(RuntimeError, match="no models"):
        CReL().encode(X, Y)


def test_negative_calibration_scores_are_refused(crel):
    with pytest.raises(ValueError, match="scores_cal must be non-negative .* row 3"):
        crel.calibrate_from_scores(np.r_[np.ones(3), -1.0, np.ones(30)], 0.1)


def test_the_worst_case_search_refuses_bad_settings_and_a_ground_truth_of_another_shape(crel, data):
    X, Y = data
    crel.calibrate(X, Y, 0.1)
    for arguments, message in [
        ({"gt": Y[:, :1]}, r"gt must have shape \(60, 2\) .* got \(60, 1\)"),
        ({"gt": Y[0]}, r"gt must be 2-D"),
        ({"extra_starts": np.zeros((3, 5))}, r"extra_starts must have shape \(60, r\).* got \(3, 5\)"),
        (
            {"extra_starts": np.where(np.arange(60)[:, None] == 7, np.nan, np.zeros((60, 2)))},
            r"extra_starts hold NaN or infinite values \(row 7\)",
        ),
    ]:
        with pytest.raises((ValueError, TypeError), match=message):
            crel.reliability(X, **({"gt": Y, "search": SearchSettings(steps=2, num_z0=4)} | arguments))
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no CUDA device"):
            crel.reliability(X, Y, device="cuda")


def test_a_missing_checkpoint_is_named_as_missing(tmp_path):
    with pytest.raises(FileNotFoundError, match="no LGM checkpoint at .*vae.ckpt"):
        CReL.from_checkpoints(tmp_path / "vae.ckpt", tmp_path / "dqr.ckpt")


def test_calibrating_on_units_covers_every_output_of_a_new_unit(crel):
    """Several outputs per condition: γ from each unit's largest E⁺ covers all outputs of a new unit with
    probability ≥ 1 − α over random splits; γ from the rows, as if they were exchangeable, does not."""
    rng = np.random.default_rng(5)
    units, per_unit, alpha, n_cal = 1000, 5, 0.1, 40
    unit_of_row = np.repeat(np.arange(units), per_unit)
    X = np.repeat(rng.normal(size=(units, 3)), per_unit, axis=0)
    Y = np.repeat(rng.normal(size=(units, 2)), per_unit, axis=0) + rng.normal(size=(len(X), 2))
    scores = crel.latent_scores(X, Y)
    largest = pl.DataFrame({"unit": unit_of_row, "e": scores}).group_by("unit").agg(pl.col("e").max()).sort("unit")
    by_units, by_rows = [], []
    for split in range(300):
        cal_units = np.random.default_rng(split).permutation(units)[:n_cal]
        cal, test = np.isin(unit_of_row, cal_units), ~np.isin(np.arange(units), cal_units)
        crel.calibrate_from_scores(scores[cal], alpha, groups=unit_of_row[cal])
        by_units.append(np.mean(largest["e"].to_numpy()[test] <= crel.gamma_cal_))
        crel.calibrate_from_scores(scores[cal], alpha)
        by_rows.append(np.mean(largest["e"].to_numpy()[test] <= crel.gamma_cal_))
    assert 1 - alpha - 0.01 <= np.mean(by_units) <= 1 - alpha + 1 / (n_cal + 1) + 0.01
    assert np.mean(by_rows) < 1 - alpha - 0.1
    crel.calibrate(X[:200], Y[:200], alpha, groups=unit_of_row[:200])
    np.testing.assert_array_equal(crel.scores_cal_, largest["e"].to_numpy()[:40])
    with pytest.raises(ValueError, match="groups must hold one unit per calibration row"):
        crel.calibrate(X[:200], Y[:200], alpha, groups=unit_of_row[:100])
    # a missing unit is refused by name, not merged into one unit (NaN) or left to a sort error (None)
    with pytest.raises(ValueError, match="groups has a missing id at row 3"):
        crel.calibrate(X[:200], Y[:200], alpha, groups=np.where(np.arange(200) == 3, np.nan, unit_of_row[:200]))
    with pytest.raises(ValueError, match="groups has a missing id at row 0"):
        crel.calibrate(X[:200], Y[:200], alpha, groups=[None, *unit_of_row[1:200]])


def test_the_early_stopping_hold_out_is_never_empty():
    """With 10 rows at seed 6 the row-wise draw held out none: the LGM trained without validation and its
    last epoch was returned as the best. A draw with both sides filled is kept as it was."""
    from condeval.crel.estimator import _holdout

    rows = np.arange(10)
    for seed in range(200):
        (train,), (val,) = _holdout(np.random.default_rng(seed), 0.1, rows)
        assert len(val) >= 1 and len(train) >= 1 and sorted([*train, *val]) == list(rows)
    many = np.arange(1000)
    (train,), (val,) = _holdout(np.random.default_rng(0), 0.1, many)
    np.testing.assert_array_equal(val, many[np.random.default_rng(0).random(1000) < 0.1])


@pytest.mark.parametrize(
    "settings, message",
    [
        ({"lr": -0.5}, "lr must be positive"),
        ({"num_z0": "50"}, "num_z0 must be an integer"),
        ({"steps": 2.5}, "steps must be an integer"),
        ({"batch_size": 0}, "batch_size must be an integer >= 1"),
        ({"min_improvement": -1.0}, "min_improvement must be >= 0"),
    ],
)
def test_search_settings_refuse_bad_values_by_name(settings, message):
    with pytest.raises((ValueError, TypeError), match=message):
        SearchSettings(**settings)


def test_the_search_takes_settings_not_loose_keywords(crel, data):
    X, Y = data
    crel.calibrate(X, Y, 0.1)
    with pytest.raises(TypeError, match="search must be a SearchSettings"):
        crel.reliability(X, Y, search={"steps": 2})
