"""Tests of the latent generative model, the directional quantile regressor and training."""

from __future__ import annotations

import json
import logging
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from condeval.core.settings import TrainSettings
from condeval.core.training import (
    SUMMARY_NAME,
    UnsafeCheckpointError,
    as_lightning,
    export_best,
    fit,
    select_accelerator,
    training_summary,
)
from condeval.crel.models.dqr import DirectionalQuantileRegressor, make_directions, pinball_loss
from condeval.crel.models.metrics import METRICS, reconstruction_loss, similarity
from condeval.crel.models.vae import LatentVAE

torch.set_num_threads(1)
logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


# ------------------------------------------------------------------ helpers
def _gaussian_linear(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``z | x ~ N(A x, I)`` in r = 2 with x uniform on [-1, 1]^2; returns (x, z, A)."""
    rng = np.random.default_rng(seed)
    a = np.array([[2.0, 0.5], [-1.0, 1.5]], dtype=np.float32)
    x = rng.uniform(-1.0, 1.0, size=(n, 2)).astype(np.float32)
    z = (x @ a.T + rng.normal(size=(n, 2))).astype(np.float32)
    return x, z, a


def _banana(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = rng.normal(size=n)
    return np.stack([t, 0.5 * t**2 - 0.5 + 0.1 * rng.normal(size=n)], axis=1).astype(np.float32)


def _fast_trainer(**kwargs) -> pl.Trainer:
    options = dict(
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
    )
    options.update(kwargs)
    return pl.Trainer(**options)


def _loader(*arrays: np.ndarray, batch_size: int = 32) -> DataLoader:
    return DataLoader(TensorDataset(*map(torch.from_numpy, arrays)), batch_size=batch_size)


def _small_dqr(**kwargs) -> DirectionalQuantileRegressor:
    options = dict(cond_dim=2, latent_dim=2, n_directions=64, directions_per_step=16, direction_seed=0)
    options.update(kwargs)
    return DirectionalQuantileRegressor(**options)


def _fit_small_dqr(
    out_dir: Path, max_epochs: int, seed: int = 0, **kwargs
) -> tuple[DirectionalQuantileRegressor, Path]:
    """A tiny DQR fit whose initial weights are seeded too."""
    x, z, _ = _gaussian_linear(600)
    pl.seed_everything(seed, verbose=False)
    model = _small_dqr()
    options = dict(settings=TrainSettings(epochs=max_epochs, batch_size=128, patience=100, progress=False), seed=seed)
    options.update(kwargs)
    best = fit(model, (x[:400], z[:400]), (x[400:], z[400:]), out_dir, **options)
    return model, best


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))


def _csv_epochs(out_dir: Path, version: int) -> list[int]:
    text = (out_dir / "csv" / f"version_{version}" / "metrics.csv").read_text().splitlines()
    header = text[0].split(",")
    column = header.index("epoch")
    return sorted({int(line.split(",")[column]) for line in text[1:]})


# ------------------------------------------------------------------ metrics
def test_reconstruction_losses_have_known_values():
    y = torch.tensor([[1.0, 0.0], [0.0, 2.0]])
    y_hat = torch.tensor([[3.0, 0.0], [0.0, -2.0]])
    assert torch.allclose(reconstruction_loss("mse")(y_hat, y), torch.tensor([2.0, 8.0]))
    assert torch.allclose(reconstruction_loss("mae")(y_hat, y), torch.tensor([1.0, 2.0]))
    assert torch.allclose(reconstruction_loss("cosine")(y_hat, y), torch.tensor([-1.0, 1.0]))


@pytest.mark.parametrize("name", METRICS)
def test_similarity_is_negative_loss_and_maximal_at_identity(name):
    gen = torch.Generator().manual_seed(0)
    y, y_hat = torch.randn(5, 3, generator=gen), torch.randn(5, 3, generator=gen)
    assert torch.allclose(similarity(name)(y_hat, y), -reconstruction_loss(name)(y_hat, y))
    assert (similarity(name)(y, y) >= similarity(name)(y_hat, y)).all()
    assert reconstruction_loss(name)(y_hat, y).shape == (5,)


def test_unknown_metric_is_named():
    with pytest.raises(ValueError, match="'hamming'"):
        reconstruction_loss("hamming")
    with pytest.raises(ValueError, match="'hamming'"):
        similarity("hamming")


# ------------------------------------------------------------------ smoke
@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("cond_dim", [0, 3])
def test_vae_fast_dev_run(metric, cond_dim):
    rng = np.random.default_rng(0)
    y = rng.normal(size=(64, 4)).astype(np.float32)
    x = rng.normal(size=(64, cond_dim)).astype(np.float32)
    arrays = (y, x) if cond_dim else (y,)
    model = LatentVAE(output_dim=4, latent_dim=2, cond_dim=cond_dim, metric=metric)
    _fast_trainer(fast_dev_run=True).fit(as_lightning(model), _loader(*arrays), _loader(*arrays))
    condition = x if cond_dim else None
    z = model.encode(y, condition)
    assert z.shape == (64, 2)
    assert model.decode(z, condition).shape == (64, 4)
    assert torch.equal(model.encode(y, condition), z), "encode must be deterministic"


def test_cvae_requires_condition_and_vae_rejects_one():
    y = np.zeros((3, 4), dtype=np.float32)
    with pytest.raises(ValueError, match="condition"):
        LatentVAE(4, cond_dim=2).encode(y)
    with pytest.raises(ValueError, match="unconditional"):
        LatentVAE(4).encode(y, np.zeros((3, 2), dtype=np.float32))


def test_vae_default_architecture_halves():
    model = LatentVAE(output_dim=5, latent_dim=3)
    encoder = [m.out_features for m in model.encoder if isinstance(m, torch.nn.Linear)]
    decoder = [m.out_features for m in model.decoder if isinstance(m, torch.nn.Linear)]
    assert encoder == [64, 128, 256, 6]
    assert decoder == [256, 128, 64, 5]
    assert model.decoder[0].in_features == 3
    assert any(isinstance(m, torch.nn.LeakyReLU) and m.negative_slope == 0.2 for m in model.encoder)


@pytest.mark.parametrize("tau", [0.1, 0.5])
def test_dqr_fast_dev_run(tau):
    x, z, _ = _gaussian_linear(64)
    model = _small_dqr(quantile_level=tau)
    _fast_trainer(fast_dev_run=True).fit(as_lightning(model), _loader(x, z), _loader(x, z))
    assert model.offsets(x).shape == (64, 64)


# --------------------------------------------------------------- checkpoints
def test_vae_and_dqr_reload_from_checkpoint(tmp_path):
    y = _banana(200)
    x = np.random.default_rng(1).normal(size=(200, 3)).astype(np.float32)
    vae = LatentVAE(2, cond_dim=3, metric="mae", hidden_dims=[8, 8])
    best = fit(
        vae,
        (y[:150], x[:150]),
        (y[150:], x[150:]),
        tmp_path / "vae",
        settings=TrainSettings(epochs=1, batch_size=50, patience=1, progress=False),
        seed=0,
    )
    exported = export_best(best, tmp_path / "export" / "vae.ckpt")
    saved, written = (torch.load(path, weights_only=True) for path in (best, exported))
    assert saved["state_dict"].keys() == written["state_dict"].keys()
    assert all(torch.equal(saved["state_dict"][k], v) for k, v in written["state_dict"].items())
    loaded = LatentVAE.load_from_checkpoint(exported, weights_only=True)
    assert loaded.hparams.metric == "mae" and loaded.hparams.cond_dim == 3
    assert torch.allclose(loaded.encode(y, x), vae.encode(y, x))

    dqr, best = _fit_small_dqr(tmp_path / "dqr", max_epochs=1)
    loaded = DirectionalQuantileRegressor.load_from_checkpoint(best, weights_only=True)
    xs = _gaussian_linear(10)[0]
    assert torch.equal(loaded.directions, dqr.directions)
    assert torch.allclose(loaded.offsets(xs), dqr.offsets(xs))


def test_a_checkpoint_loads_without_lightning(tmp_path):
    """Inference jobs load the LGM and the DQR with torch alone: Lightning's import costs ~7 s a job."""
    dqr, dqr_best = _fit_small_dqr(tmp_path / "dqr", max_epochs=1)
    vae = LatentVAE(2, hidden_dims=[8, 8])
    vae_best = fit(
        vae,
        (_banana(100),),
        (_banana(50, 1),),
        tmp_path / "vae",
        settings=TrainSettings(epochs=1, batch_size=50, patience=1, progress=False),
        seed=0,
    )
    code = (
        "import sys\n"
        "from condeval.crel import CReL\n"
        f"crel = CReL.from_checkpoints({str(vae_best)!r}, {str(dqr_best)!r})\n"
        "print(crel.dqr.offsets([[0.0, 0.0]]).shape)\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pytorch_lightning', 'lightning', 'torchmetrics')))\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.splitlines() == [f"torch.Size([1, {dqr.directions.shape[0]}])", "[]"]


def test_a_run_folder_of_lightning_module_checkpoints_resumes(tmp_path):
    """A run folder left when the models were LightningModules (keys without ``model.``) resumes exactly."""
    _fit_small_dqr(tmp_path, max_epochs=2)
    last = tmp_path / "checkpoints" / "last.ckpt"
    checkpoint = torch.load(last, weights_only=True)
    checkpoint["state_dict"] = {k.removeprefix("model."): v for k, v in checkpoint["state_dict"].items()}
    torch.save(checkpoint, last)
    resumed, _ = _fit_small_dqr(tmp_path, max_epochs=4)
    assert _csv_epochs(tmp_path, 1) == [2, 3], "the second call must continue, not restart"
    uninterrupted, _ = _fit_small_dqr(tmp_path / "straight", max_epochs=4)
    assert _same_weights(resumed, uninterrupted)


def test_a_bad_checkpoint_is_refused_naming_the_file(tmp_path):
    junk = tmp_path / "junk.ckpt"
    junk.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="junk.ckpt"):
        LatentVAE.load_from_checkpoint(junk, weights_only=True)
    _, best = _fit_small_dqr(tmp_path / "dqr", max_epochs=1)
    with pytest.raises(ValueError, match=r"best.*does not hold a LatentVAE"):
        LatentVAE.load_from_checkpoint(best, weights_only=True)
    with pytest.raises(ValueError, match="weights_only=True; nothing in it is unpickled"):
        DirectionalQuantileRegressor.load_from_checkpoint(best, weights_only=False)


# ---------------------------------------------------------------- directions
def test_directions_unit_norm_axes_first_and_seeded():
    model = DirectionalQuantileRegressor(cond_dim=3, latent_dim=3, n_directions=500, direction_seed=7)
    u = model.directions
    assert u.shape == (500, 3)
    assert torch.allclose(u.norm(dim=1), torch.ones(500), atol=1e-6)
    eye = torch.eye(3)
    assert torch.equal(u[:6], torch.stack([eye[0], -eye[0], eye[1], -eye[1], eye[2], -eye[2]]))
    same = DirectionalQuantileRegressor(cond_dim=3, latent_dim=3, n_directions=500, direction_seed=7)
    other = DirectionalQuantileRegressor(cond_dim=3, latent_dim=3, n_directions=500, direction_seed=8)
    assert torch.equal(same.directions, u)
    assert not torch.allclose(other.directions[6:], u[6:])
    assert "_directions" in model.state_dict()


def test_directions_are_spread_over_the_sphere():
    u = make_directions(latent_dim=2, n_directions=4000, seed=0)[4:]
    angles = torch.atan2(u[:, 1], u[:, 0])
    counts = torch.histc(angles, bins=8, min=-math.pi, max=math.pi)
    assert counts.min() > 0.8 * len(u) / 8
    assert u.mean(dim=0).abs().max() < 0.05


def test_too_few_directions_rejected():
    with pytest.raises(ValueError, match="n_directions"):
        make_directions(latent_dim=3, n_directions=5, seed=0)


def test_direction_subsets_are_fresh_and_cover_all_directions():
    model = DirectionalQuantileRegressor(cond_dim=2, latent_dim=2)  # K = 2048, 1024 per step
    torch.manual_seed(0)
    draws = [model.sample_direction_indices() for _ in range(10)]
    assert all(len(d) == 1024 and len(set(d.tolist())) == 1024 for d in draws)
    assert not torch.equal(torch.sort(draws[0]).values, torch.sort(draws[1]).values)
    seen = torch.unique(torch.cat(draws))
    assert seen.max() >= 2040 and len(seen) > 2000, "subsets must be drawn from all K directions"


def test_training_steps_use_fresh_subsets(monkeypatch):
    model = DirectionalQuantileRegressor(cond_dim=2, latent_dim=2)
    used = []
    original = model.sample_direction_indices

    def recording():
        used.append(original())
        return used[-1]

    monkeypatch.setattr(model, "sample_direction_indices", recording)
    x, z, _ = _gaussian_linear(256)
    _fast_trainer(max_epochs=1, limit_val_batches=0).fit(as_lightning(model), _loader(x, z, batch_size=64))
    assert len(used) == 4
    assert len({tuple(sorted(d.tolist())) for d in used}) == 4
    assert int(torch.cat(used).max()) >= 1024


# -------------------------------------------------------------------- DQR
def test_pinball_loss_sign():
    tau = 0.1
    assert math.isclose(pinball_loss(torch.tensor([2.0]), tau).item(), 0.2, rel_tol=1e-6)
    assert math.isclose(pinball_loss(torch.tensor([-2.0]), tau).item(), 1.8, rel_tol=1e-6)


def test_offsets_chunking_matches_forward():
    model = _small_dqr()
    x, _, _ = _gaussian_linear(37)
    with torch.no_grad():
        full = model(torch.from_numpy(x), model.directions)
    chunked = model.offsets(x, batch_size=5, direction_batch_size=7)
    assert chunked.shape == (37, 64) and not chunked.requires_grad
    assert torch.allclose(chunked, full, atol=1e-6)
    # the paper's plain structure equals an MLP on the concatenation (x, u)
    plain = _small_dqr(structure="plain")
    pair = torch.cat([torch.from_numpy(x[:1]), plain.directions[:1]], dim=1)
    with torch.no_grad():
        assert torch.allclose(
            plain.net(pair).squeeze(), plain(torch.from_numpy(x[:1]), plain.directions[:1])[0, 0], atol=1e-6
        )


@pytest.mark.slow
def test_dqr_learns_conditional_quantiles(tmp_path):
    tau = 0.1
    x, z, a = _gaussian_linear(6000)
    pl.seed_everything(0, verbose=False)
    model = DirectionalQuantileRegressor(
        cond_dim=2, latent_dim=2, quantile_level=tau, n_directions=256, directions_per_step=64
    )
    fit(
        model,
        (x[:3000], z[:3000]),
        (x[3000:4000], z[3000:4000]),
        tmp_path,
        settings=TrainSettings(epochs=20, batch_size=128, patience=100, progress=False, lr=1e-2),
        seed=0,
    )
    x_test, z_test = x[4000:], z[4000:]
    offsets = model.offsets(x_test).numpy()
    u = model.directions.numpy()
    below = (z_test @ u.T) < offsets
    assert abs(below.mean() - tau) < 0.03, f"marginal coverage {below.mean():.3f}"
    half = x_test[:, 0] > 0
    assert abs(below[half].mean() - tau) < 0.04 and abs(below[~half].mean() - tau) < 0.04
    assert np.abs(below.mean(axis=0) - tau).max() < 0.08, "every direction should be calibrated"
    true_quantile = (x_test @ a.T) @ u.T + float(torch.distributions.Normal(0, 1).icdf(torch.tensor(tau)))
    assert np.abs(offsets - true_quantile).mean() < 0.3


# -------------------------------------------------------------------- VAE
@pytest.mark.slow
def test_vae_reconstructs_banana(tmp_path):
    y = _banana(4000)
    pl.seed_everything(0, verbose=False)
    model = LatentVAE(output_dim=2, latent_dim=2)
    fit(
        model,
        (y[:3000],),
        (y[3000:],),
        tmp_path,
        settings=TrainSettings(epochs=5, batch_size=64, patience=10, progress=False),
        seed=0,
    )
    with torch.no_grad():
        recon = model.decode(model.encode(y[3000:])).numpy()
    mse = float(((recon - y[3000:]) ** 2).mean())
    assert mse < 0.05 * float(y.var(axis=0).mean()), f"reconstruction MSE {mse:.4f}"
    summary = training_summary(tmp_path)
    assert summary["epochs_run"] == 5 and summary["best_val_loss"] < 0.05


# --------------------------------------------------------------- training
def test_resume_continues_from_last_epoch(tmp_path):
    model, _ = _fit_small_dqr(tmp_path, max_epochs=2)
    assert _csv_epochs(tmp_path, 0) == [0, 1]
    resumed, best = _fit_small_dqr(tmp_path, max_epochs=4)
    assert _csv_epochs(tmp_path, 1) == [2, 3], "the second call must continue, not restart"
    summary = training_summary(tmp_path)
    assert summary["epochs_run"] == 4 and summary["n_calls"] == 2
    assert Path(best).exists() and summary["best_checkpoint"] == str(best)
    uninterrupted, _ = _fit_small_dqr(tmp_path / "straight", max_epochs=4)
    assert _same_weights(resumed, uninterrupted), "resumed run should match an uninterrupted one"


def test_truncated_last_checkpoint_starts_fresh(tmp_path, caplog):
    _fit_small_dqr(tmp_path, max_epochs=2)
    last = tmp_path / "checkpoints" / "last.ckpt"
    data = last.read_bytes()
    last.write_bytes(data[: len(data) // 3])
    with caplog.at_level(logging.WARNING, logger="condeval.core.training"):
        _, best = _fit_small_dqr(tmp_path, max_epochs=3)
    assert any("corrupt" in r.getMessage() for r in caplog.records)
    assert _csv_epochs(tmp_path, 0) == [0, 1, 2], "a fresh run restarts at epoch 0"
    assert Path(best).exists() and last.exists()
    assert training_summary(tmp_path)["n_calls"] == 1


class _Payload:
    """Unpickling this runs a command: what a crafted checkpoint from a shared remote could do."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def test_crafted_last_checkpoint_is_refused_not_executed_nor_deleted(tmp_path):
    _fit_small_dqr(tmp_path, max_epochs=1)
    last = tmp_path / "checkpoints" / "last.ckpt"
    marker = tmp_path / "pwned"
    checkpoint = torch.load(last, weights_only=True)
    checkpoint["payload"] = _Payload(marker)
    torch.save(checkpoint, last)
    with pytest.raises(UnsafeCheckpointError, match=r"last\.ckpt: refusing to resume.*weights_only=True"):
        _fit_small_dqr(tmp_path, max_epochs=2)
    assert not marker.exists(), "the checkpoint's code ran"
    assert last.exists(), "the suspicious file must be left for inspection"


def test_same_seed_same_weights(tmp_path):
    first, _ = _fit_small_dqr(tmp_path / "a", max_epochs=2, seed=5)
    second, _ = _fit_small_dqr(tmp_path / "b", max_epochs=2, seed=5)
    third, _ = _fit_small_dqr(tmp_path / "c", max_epochs=2, seed=6)
    assert _same_weights(first, second)
    assert not _same_weights(first, third)


def test_save_epochs_and_summary(tmp_path):
    _, best = _fit_small_dqr(tmp_path, max_epochs=3, save_epochs=(1, 3, 10))
    names = {p.name for p in (tmp_path / "checkpoints").iterdir()}
    assert {"epoch=001.ckpt", "epoch=003.ckpt", "last.ckpt"} <= names
    assert "epoch=010.ckpt" not in names and "epoch=002.ckpt" not in names
    snapshot = torch.load(tmp_path / "checkpoints" / "epoch=003.ckpt", weights_only=False)
    assert snapshot["epoch"] == 2  # Lightning's 0-based index of the third epoch
    summary = training_summary(tmp_path)
    assert summary["epochs_run"] == 3 and 1 <= summary["best_epoch"] <= 3
    assert summary["wall_time_s"] > 0 and summary["peak_rss_mib"] > 0 and summary["mean_epoch_time_s"] > 0
    assert Path(best).name == f"best-ep{summary['best_epoch']:03d}.ckpt"
    assert (tmp_path / SUMMARY_NAME).exists()


def test_early_stopped_run_is_not_extended(tmp_path):
    y = _banana(300)
    pl.seed_everything(0, verbose=False)
    # with lr = 0 val_loss never improves, so patience 1 stops after the second epoch
    options = dict(settings=TrainSettings(epochs=50, batch_size=300, patience=1, progress=False, lr=0.0), seed=0)
    best = fit(LatentVAE(2), (y,), (y,), tmp_path, **options)
    summary = training_summary(tmp_path)
    assert summary["stopped_early"] and summary["epochs_run"] == 2
    again = fit(LatentVAE(2), (y,), (y,), tmp_path, **options)
    assert again == best and training_summary(tmp_path)["epochs_run"] == summary["epochs_run"]


def test_select_accelerator():
    expected = "gpu" if torch.cuda.is_available() else "cpu"
    assert select_accelerator() == expected
    assert select_accelerator("cpu") == "cpu"
    with pytest.raises(ValueError):
        select_accelerator("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(RuntimeError):
            select_accelerator("gpu")


def test_changed_fingerprint_trains_afresh_instead_of_resuming(tmp_path):
    """A run folder left by a job with other inputs is discarded, never resumed."""
    from condeval.core.training import fit, training_summary

    torch.manual_seed(0)
    y = np.random.default_rng(0).normal(size=(64, 2)).astype(np.float32)
    kwargs = dict(settings=TrainSettings(epochs=2, batch_size=32, patience=5, progress=False), seed=0)
    fit(LatentVAE(output_dim=2, hidden_dims=[8, 8]), (y,), (y,), tmp_path, fingerprint="a", **kwargs)
    fit(LatentVAE(output_dim=2, hidden_dims=[8, 8]), (y,), (y,), tmp_path, fingerprint="b", **kwargs)
    summary = training_summary(tmp_path)
    assert summary["n_calls"] == 1 and summary["epochs_run"] == 2


def test_a_run_folder_left_by_other_rows_is_not_resumed(tmp_path):
    """Without a fingerprint the rows, the module's hyperparameters and the fit's settings still name the
    run: a folder left by a fit on other rows trains afresh and never hands back that fit's model."""
    x, z, _ = _gaussian_linear(600)
    pl.seed_everything(0, verbose=False)
    options = dict(settings=TrainSettings(epochs=2, batch_size=128, patience=100, progress=False), seed=0)
    fit(_small_dqr(), (x[:400] + 1.0, z[:400]), (x[400:], z[400:]), tmp_path, **options)
    again, _ = _fit_small_dqr(tmp_path, max_epochs=2)
    fresh, _ = _fit_small_dqr(tmp_path / "fresh", max_epochs=2)
    assert training_summary(tmp_path)["n_calls"] == 1
    assert _same_weights(again, fresh), "the other rows' model came back"


def test_a_lower_epoch_cap_trains_afresh_instead_of_failing(tmp_path):
    """A run that went past a lowered ``max_epochs`` cannot be resumed; it is retrained to the new cap."""
    _fit_small_dqr(tmp_path, max_epochs=3)
    shorter, _ = _fit_small_dqr(tmp_path, max_epochs=2)
    fresh, _ = _fit_small_dqr(tmp_path / "fresh", max_epochs=2)
    assert _csv_epochs(tmp_path, 0) == [0, 1] and training_summary(tmp_path)["n_calls"] == 1
    assert _same_weights(shorter, fresh)


def test_center_offset_dqr_regions_are_never_empty():
    """f(x, u) = uᵀc(x) − softplus(g): c(x) satisfies every half-space for any weights."""
    from condeval.crel.polytope import polytope_distance

    torch.manual_seed(3)
    model = DirectionalQuantileRegressor(cond_dim=5, latent_dim=3, n_directions=128, directions_per_step=64)
    for parameter in model.parameters():
        parameter.data.normal_(0, 3.0)  # wild weights: a plain MLP would cross its quantiles
    x = torch.randn(200, 5)
    b = model.offsets(x).double().numpy()
    centres = model.center(x).detach().double().numpy()
    U = model.directions.double().numpy()
    # float32 model, float64 check: the rounding of uᵀc(x) scales with |u|ᵀ|c(x)|, not with |b| (b can be
    # near 0 while the products are in the thousands: on some CPUs the old slack 1e-5 (1 + |b|) was too tight)
    slack = 1e-5 * (1.0 + np.abs(b) + np.abs(centres) @ np.abs(U).T)
    assert np.all(centres @ U.T >= b - slack)
    assert np.all(polytope_distance(U, b - slack, centres) == 0.0)


def test_fit_to_files_exports_best_snapshots_and_summary(tmp_path):
    from condeval.core.training import fit_to_files

    x, z, _ = _gaussian_linear(600)
    pl.seed_everything(0, verbose=False)
    model_path, summary_path = tmp_path / "m.ckpt", tmp_path / "m_summary.json"
    snapshots = [tmp_path / "m-epoch1.ckpt", tmp_path / "m-epoch3.ckpt"]
    best = fit_to_files(
        _small_dqr(),
        (x[:400], z[:400]),
        (x[400:], z[400:]),
        model_path,
        summary_path,
        settings=TrainSettings(epochs=3, batch_size=128, patience=10, progress=False),
        snapshot_paths=snapshots,
        save_epochs=[1, 3],
        seed=0,
    )
    assert Path(best).parent.parent == tmp_path / "m_run"
    best_state, exported_state = (torch.load(path, weights_only=True)["state_dict"] for path in (best, model_path))
    assert (
        all(torch.equal(best_state[k], v) for k, v in exported_state.items())
        and best_state.keys() == exported_state.keys()
    )
    assert [torch.load(s, weights_only=False)["epoch"] for s in snapshots] == [0, 2]
    summary = json.loads(summary_path.read_text())
    assert summary["epochs_run"] == 3 and set(summary["val_loss_by_epoch"]) == {"1", "2", "3"}
    with pytest.raises(ValueError):
        fit_to_files(
            _small_dqr(),
            (x[:400], z[:400]),
            (x[400:], z[400:]),
            tmp_path / "n.ckpt",
            tmp_path / "n.json",
            settings=TrainSettings(epochs=3, batch_size=128, patience=10, progress=False),
            snapshot_paths=snapshots[:1],
            save_epochs=[1, 3],
            seed=0,
        )


def test_training_logs_one_progress_line_per_epoch(tmp_path, caplog):
    with caplog.at_level(logging.INFO, logger="condeval.core.training"):
        _fit_small_dqr(tmp_path / "dqr", max_epochs=3)
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("epoch ")]
    assert [line.split(":")[0] for line in lines] == ["epoch 1/3", "epoch 2/3", "epoch 3/3"]
    assert all("train_loss" in line and "val_loss" in line for line in lines)
