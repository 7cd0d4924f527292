"""Tests of the latent diffusion LGM (Appendix A.2), its checkpoints and its use by CReL."""

from __future__ import annotations

import copy
import logging
from pathlib import Path

import numpy as np
import pytest
import pytorch_lightning as pl
import torch
from torch.utils.data import DataLoader, TensorDataset

from condeval.core.conformal import coverage_bounds
from condeval.core.settings import SearchSettings, TrainSettings
from condeval.core.training import as_lightning, fit, training_summary
from condeval.crel import CReL
from condeval.crel.models import load_lgm
from condeval.crel.models.diffusion import LatentDDPM
from condeval.crel.models.dqr import DirectionalQuantileRegressor
from condeval.crel.models.vae import LatentVAE

torch.set_num_threads(1)
logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


# ------------------------------------------------------------------ helpers
def _mixture(n: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``y | x``: a 3-component 2-D Gaussian mixture shifted by ``x / 2``; x uniform on [-1, 1]^2."""
    rng = np.random.default_rng(seed)
    x = rng.uniform(-1.0, 1.0, size=(n, 2)).astype(np.float32)
    centres = np.array([[-2.0, 0.0], [2.0, 0.0], [0.0, 2.5]], dtype=np.float32)
    y = centres[rng.integers(0, 3, n)] + 0.5 * x + 0.3 * rng.normal(size=(n, 2))
    return x, y.astype(np.float32)


def _arrays(x: np.ndarray, y: np.ndarray, conditional: bool) -> tuple[np.ndarray, ...]:
    return (y, x) if conditional else (y,)


def _val_loss(model: LatentDDPM, arrays: tuple[np.ndarray, ...]) -> float:
    loader = DataLoader(TensorDataset(*map(torch.from_numpy, arrays)), batch_size=250)
    trainer = pl.Trainer(accelerator="cpu", logger=False, enable_progress_bar=False, enable_model_summary=False)
    return trainer.validate(as_lightning(model), loader, verbose=False)[0]["val_loss"]


def _same_weights(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(p, q) for p, q in zip(a.state_dict().values(), b.state_dict().values()))


def _csv_epochs(out_dir: Path, version: int) -> list[int]:
    text = (out_dir / "csv" / f"version_{version}" / "metrics.csv").read_text().splitlines()
    column = text[0].split(",").index("epoch")
    return sorted({int(line.split(",")[column]) for line in text[1:]})


# ----------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def data():
    x, y = _mixture(4500)
    folds = {
        "train": slice(0, 1500),
        "val": slice(1500, 2000),
        "dqr": slice(2000, 2800),
        "dqr_val": slice(2800, 3000),
        "pool": slice(3000, 4500),
    }
    return {name: (x[rows], y[rows]) for name, rows in folds.items()}


@pytest.fixture(scope="module")
def vae(data, tmp_path_factory):
    """A small VAE trained on the LGM fold (the DDPMs' frozen autoencoder)."""
    (_, y), (_, y_val) = data["train"], data["val"]
    pl.seed_everything(0, verbose=False)
    model = LatentVAE(output_dim=2, latent_dim=2, hidden_dims=[32, 32, 32, 32])
    fit(
        model,
        (y,),
        (y_val,),
        tmp_path_factory.mktemp("vae"),
        settings=TrainSettings(epochs=10, batch_size=64, patience=100, progress=False),
        seed=0,
    )
    return model.eval()


@pytest.fixture(scope="module")
def ddpms(data, vae, tmp_path_factory):
    """Unconditional (0) and conditional (2) DDPMs with the paper's denoiser, trained briefly.

    lr is 1e-3 instead of the paper's 1e-4 so that 25 short epochs suffice.
    """
    runs = {}
    for cond_dim in (0, 2):
        train, val = (_arrays(*data[f], cond_dim > 0) for f in ("train", "val"))
        pl.seed_everything(0, verbose=False)
        model = LatentDDPM.from_vae(vae, cond_dim=cond_dim)
        initial = _val_loss(model, val)
        run_dir = tmp_path_factory.mktemp(f"ddpm{cond_dim}")
        fit(
            model,
            train,
            val,
            run_dir,
            settings=TrainSettings(epochs=25, batch_size=128, patience=100, progress=False, lr=1e-3),
            seed=0,
            save_epochs=(25,),
        )
        runs[cond_dim] = {"model": model.eval(), "run_dir": run_dir, "initial_val_loss": initial}
    return runs


@pytest.fixture(scope="module")
def dqr(data, ddpms, tmp_path_factory):
    """A DQR briefly trained on the conditional DDPM's noise codes of a separate fold."""
    lgm = ddpms[2]["model"]
    with torch.no_grad():
        codes = {f: lgm.encode(data[f][1], data[f][0]).numpy() for f in ("dqr", "dqr_val")}
    pl.seed_everything(0, verbose=False)
    model = DirectionalQuantileRegressor(cond_dim=2, latent_dim=2, n_directions=64, directions_per_step=32)
    run_dir = tmp_path_factory.mktemp("dqr")
    best = fit(
        model,
        (data["dqr"][0], codes["dqr"]),
        (data["dqr_val"][0], codes["dqr_val"]),
        run_dir,
        settings=TrainSettings(epochs=6, batch_size=100, patience=100, progress=False, lr=3e-3),
        seed=0,
    )
    return DirectionalQuantileRegressor.load_from_checkpoint(best, map_location="cpu", weights_only=True).eval(), Path(
        best
    )


# -------------------------------------------------------------- architecture
def test_paper_architecture_and_hparams(vae):
    model = LatentDDPM.from_vae(vae, cond_dim=3)
    widths = [m.out_features for m in model.denoiser.net if isinstance(m, torch.nn.Linear)]
    assert widths == [128, 256, 128, 2]
    assert model.denoiser.net[0].in_features == 2 + 128 + 3  # z_t, time embedding, x
    assert model.denoiser.time_embedding.linear_2.out_features == 128
    assert model.noise_scheduler.config.num_train_timesteps == 1000 and model.default_lr == 1e-4
    assert model.hparams.metric == vae.hparams.metric and model.hparams.latent_dim == 2
    assert model.hparams.cond_dim == 3 and model.is_conditional
    assert model.hparams.vae_hparams == dict(vae.hparams)
    assert model.inference_steps == 10 and list(model.sampler.timesteps) == list(range(900, -1, -100))
    assert model.with_inference_steps(30) is model and model.sampler.timesteps[0] == 957
    assert list(model.inverter.timesteps) == sorted(model.sampler.timesteps.tolist())
    with pytest.raises(ValueError, match="inference_steps"):
        model.inference_steps = 0


def test_vae_is_frozen_copied_and_stays_in_eval_mode(vae, ddpms):
    model = ddpms[2]["model"]
    assert _same_weights(model.vae, vae), "training must not change the VAE"
    assert not any(p.requires_grad for p in model.vae.parameters())
    model.train()
    try:
        assert model.denoiser.training and not model.vae.training
    finally:
        model.eval()
    with pytest.raises(ValueError, match="unconditional"):
        LatentDDPM.from_vae(LatentVAE(2, cond_dim=2))


# ----------------------------------------------------------------- inversion
@pytest.mark.parametrize("cond_dim", [0, 2])
@pytest.mark.parametrize("steps", [10, 50])
def test_inversion_inverts_sampling(ddpms, data, vae, cond_dim, steps):
    """DDIM inversion undoes DDIM sampling, so decode(encode(y)) is the VAE reconstruction.

    Tolerances: each inverse step is solved by fixed-point iteration to a change of at
    most 1e-5 (float32), so z_T is recovered to ~1e-4 after T steps (2e-3 allowed).
    The sampler may stretch latent errors between mixture modes, so outputs are checked
    to 1e-2 on data of scale ~2. Plain DDIM inversion misses by ~0.1-0.5 here.
    """
    model = copy.deepcopy(ddpms[cond_dim]["model"]).with_inference_steps(steps)
    x, y = data["pool"][0][:300], data["pool"][1][:300]
    condition = x if cond_dim else None
    z = torch.randn(300, 2, generator=torch.Generator().manual_seed(steps))
    with torch.no_grad():
        z0 = model.sample_latent(z, condition)
        error = (model.invert_latent(z0, condition) - z).norm(dim=1)
        assert error.max() < 2e-3, f"max |invert(sample(z)) - z| = {error.max():.2e}"
        recon = vae.decode(vae.encode(y))
        assert torch.allclose(model.decode(model.encode(y, condition), condition), recon, atol=1e-2)
        model.inversion_iterations = 1  # plain DDIM inversion: same conventions, cruder
        plain = (model.invert_latent(z0, condition) - z).norm(dim=1)
    assert 2e-3 < plain.median() < 1.0, "refinement should matter, and plain inversion be roughly right"
    assert plain.median() > 10 * error.median()


def test_inversion_refinement_never_worse_than_plain(vae):
    """Where the fixed point does not converge (an untrained, rough denoiser), keep the best iterate.

    The residual of an iterate is proportional to how far the sampler's step from it
    lands from the code being inverted, so that error never exceeds plain inversion's.
    """
    torch.manual_seed(0)
    model = LatentDDPM.from_vae(vae, hidden_dims=(16, 16), time_embed_dim=8).eval().with_inference_steps(10)
    t = torch.tensor(500)  # inverse step 400 -> 500, undone by the sampler's step at 500

    def step_error(z_t, z_prev):  # max-norm |sampler step(z_t) - z_prev|
        eps = model(z_t, t.expand(len(z_t)))
        return (model.sampler.step(eps, 500, z_t, return_dict=False)[0] - z_prev).abs().amax(dim=1)

    with torch.no_grad():
        z_prev = torch.randn(200, 2) * 3
        plain = step_error(model._inverse_update(z_prev, z_prev, t, None), z_prev)
        refined = step_error(model._inverse_step(z_prev, t, None), z_prev)
    assert torch.all(refined <= plain + 1e-4)
    assert (refined < 0.1 * plain).float().mean() > 0.5


def test_encode_is_deterministic_and_row_independent(ddpms, data):
    model = ddpms[2]["model"]
    x, y = data["pool"][0][:64], data["pool"][1][:64]
    with torch.no_grad():
        full = model.encode(y, x)
        assert torch.equal(model.encode(y, x), full)
        assert torch.allclose(model.encode(y[:5], x[:5]), full[:5], atol=1e-5)


# ------------------------------------------------------------------ training
def test_training_reduces_the_denoising_loss(ddpms, data):
    """Untrained, the MSE is >= E|eps|^2 = 1; a trained denoiser explains much of the noise."""
    for cond_dim, run in ddpms.items():
        val = _arrays(*data["val"], cond_dim > 0)
        final = _val_loss(run["model"], val)
        assert run["initial_val_loss"] > 0.9
        assert final < 0.6 * run["initial_val_loss"], (cond_dim, run["initial_val_loss"], final)
        assert _val_loss(run["model"], val) == final, "val_loss must be reproducible"
        assert training_summary(run["run_dir"])["best_val_loss"] < 0.6


# --------------------------------------------------------------- checkpoints
def test_checkpoint_is_self_contained(ddpms, data, vae, dqr, tmp_path):
    run = ddpms[2]
    last = run["run_dir"] / "checkpoints" / "epoch=025.ckpt"  # the in-memory model's final state
    loaded = load_lgm(last, inference_steps=20)
    assert isinstance(loaded, LatentDDPM) and not loaded.training and loaded.device.type == "cpu"
    assert loaded.inference_steps == 20 and loaded.hparams.metric == "mse" and loaded.hparams.cond_dim == 2
    reference = copy.deepcopy(run["model"]).with_inference_steps(20)
    z = torch.randn(50, 2, generator=torch.Generator().manual_seed(1))
    x = data["pool"][0][:50]
    with torch.no_grad():
        assert torch.equal(loaded.decode(z, x), reference.decode(z, x))
    assert load_lgm(last).inference_steps == 10, "default: the saved number of steps"

    crel = CReL.from_checkpoints(last, dqr[1], inference_steps=30)
    assert isinstance(crel.lgm, LatentDDPM) and crel.lgm.inference_steps == 30 and crel.metric == "mse"


def test_load_lgm_dispatches_and_names_bad_files(vae, dqr, tmp_path):
    y = _mixture(200)[1]
    best = fit(
        LatentVAE(2, hidden_dims=[8, 8]),
        (y[:150],),
        (y[150:],),
        tmp_path / "vae",
        settings=TrainSettings(epochs=1, batch_size=50, patience=100, progress=False),
        seed=0,
    )
    loaded = load_lgm(best)
    assert type(loaded) is LatentVAE and not loaded.training
    with pytest.raises(ValueError, match="LatentDDPM"):
        load_lgm(best, inference_steps=10)
    garbage = tmp_path / "garbage.ckpt"
    garbage.write_bytes(b"not a checkpoint at all")
    with pytest.raises(ValueError, match="garbage.ckpt"):
        load_lgm(garbage)
    with pytest.raises(ValueError, match="neither a LatentVAE nor a LatentDDPM"):
        load_lgm(dqr[1])


# -------------------------------------------------------------------- resume
def _fit_small_ddpm(vae: LatentVAE, out_dir: Path, max_epochs: int, seed: int = 0) -> tuple[LatentDDPM, Path]:
    """A tiny conditional DDPM fit whose initial weights are seeded too."""
    x, y = _mixture(400, seed=3)
    pl.seed_everything(seed, verbose=False)
    model = LatentDDPM.from_vae(vae, cond_dim=2, hidden_dims=(16, 16), time_embed_dim=8)
    best = fit(
        model,
        (y[:300], x[:300]),
        (y[300:], x[300:]),
        out_dir,
        settings=TrainSettings(epochs=max_epochs, batch_size=100, patience=100, progress=False, lr=1e-3),
        seed=seed,
    )
    return model, best


def test_resume_matches_an_uninterrupted_run(vae, tmp_path):
    _fit_small_ddpm(vae, tmp_path / "resumed", max_epochs=2)
    resumed, best = _fit_small_ddpm(vae, tmp_path / "resumed", max_epochs=4)
    assert _csv_epochs(tmp_path / "resumed", 1) == [2, 3], "the second call must continue, not restart"
    uninterrupted, _ = _fit_small_ddpm(vae, tmp_path / "straight", max_epochs=4)
    assert _same_weights(resumed, uninterrupted), "resumed run should match an uninterrupted one"
    other, _ = _fit_small_ddpm(vae, tmp_path / "other", max_epochs=4, seed=1)
    assert not _same_weights(other, uninterrupted)
    assert training_summary(tmp_path / "resumed")["n_calls"] == 2 and Path(best).exists()


def test_truncated_last_checkpoint_starts_fresh(vae, tmp_path, caplog):
    _fit_small_ddpm(vae, tmp_path, max_epochs=2)
    last = tmp_path / "checkpoints" / "last.ckpt"
    last.write_bytes(last.read_bytes()[:1000])
    with caplog.at_level(logging.WARNING, logger="condeval.core.training"):
        restarted, best = _fit_small_ddpm(vae, tmp_path, max_epochs=3)
    assert any("corrupt" in r.getMessage() for r in caplog.records)
    assert _csv_epochs(tmp_path, 0) == [0, 1, 2], "a fresh run restarts at epoch 0"
    assert training_summary(tmp_path)["n_calls"] == 1
    straight, _ = _fit_small_ddpm(vae, tmp_path / "straight", max_epochs=3)
    assert _same_weights(restarted, straight)
    assert isinstance(load_lgm(best), LatentDDPM)


def test_last_checkpoint_holds_the_final_epoch(vae, tmp_path):
    y = _mixture(200)[1]
    pl.seed_everything(0, verbose=False)
    model = LatentDDPM.from_vae(vae, hidden_dims=(8,), time_embed_dim=4)
    fit(
        model,
        (y,),
        (y,),
        tmp_path,
        settings=TrainSettings(
            epochs=3, batch_size=100, patience=100, progress=False, lr=0.0
        ),  # val_loss never improves
        seed=0,
    )
    assert torch.load(tmp_path / "checkpoints" / "last.ckpt", weights_only=True)["epoch"] == 2


# ------------------------------------------------------------------ gradient
def test_decode_is_differentiable(ddpms, data):
    model = ddpms[2]["model"]
    z = torch.randn(20, 2, generator=torch.Generator().manual_seed(2), requires_grad=True)
    model.decode(z, data["pool"][0][:20]).pow(2).sum().backward()
    assert torch.isfinite(z.grad).all() and (z.grad.norm(dim=1) > 0).all()
    assert not any(p.grad is not None and p.grad.abs().sum() > 0 for p in model.vae.parameters())


def test_decode_gradient_matches_finite_differences(vae):
    torch.manual_seed(0)
    model = LatentDDPM.from_vae(vae, cond_dim=2, hidden_dims=(8, 8), time_embed_dim=8, inference_steps=3)
    model = model.double().eval()
    z = torch.randn(3, 2, dtype=torch.float64, requires_grad=True)
    x = torch.randn(3, 2, dtype=torch.float64)
    assert torch.autograd.gradcheck(lambda v: model.decode(v, x), (z,))


# --------------------------------------------------------- (un)conditional use
def test_condition_is_used_and_checked(ddpms, data):
    conditional, unconditional = ddpms[2]["model"], ddpms[0]["model"]
    x, y = data["pool"][0][:50], data["pool"][1][:50]
    z = torch.randn(50, 2, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        shift = (conditional.decode(z, x) - conditional.decode(z, x + 1.0)).norm(dim=1)
        assert shift.mean() > 0.1, "the conditional denoiser must use x"
    for method, value in ((unconditional.decode, z), (unconditional.encode, y)):
        with pytest.raises(ValueError, match="unconditional"):
            method(value, x)
    for method, value in ((conditional.decode, z), (conditional.encode, y)):
        with pytest.raises(ValueError, match="condition"):
            method(value)


# ------------------------------------------------------------------ coverage
@pytest.mark.slow
def test_crel_z_coverage_with_the_diffusion_lgm(ddpms, dqr, data):
    """Mean Z-coverage of CReL.from_models(DDPM, DQR) over 300 random cal/test splits of a held-out pool.

    Scores are computed once and resplit: given the pool, every split is an exchangeable
    draw, so the expected coverage lies in the conformal band (scores are tie-free
    wherever γ_cal > 0). One split is checked against calibrate()/contains().
    """
    crel = CReL.from_models(ddpms[2]["model"], dqr[0])
    X, Y = data["pool"]
    scores = crel.latent_scores(X, Y)
    n_cal, alpha, n_splits = 300, 0.1, 300
    rng = np.random.default_rng(0)
    coverage = []
    for _ in range(n_splits):
        order = rng.permutation(len(scores))
        crel.calibrate_from_scores(scores[order[:n_cal]], alpha)
        coverage.append(np.mean(scores[order[n_cal:]] <= crel.gamma_cal_))
    coverage = np.array(coverage)
    mean, se = coverage.mean(), coverage.std(ddof=1) / np.sqrt(n_splits)
    low, high = coverage_bounds(n_cal, alpha)
    assert low - 4 * se <= mean <= high + 4 * se, (mean, se, low, high)
    assert crel.gamma_init_ < 0.8 and crel.gamma_cal_ > 0, "regions must need calibration (no ties at 0)"

    cal, test = order[:n_cal], order[n_cal:]
    crel.calibrate(X[cal], Y[cal], alpha)
    assert np.allclose(crel.scores_cal_, scores[cal], atol=1e-4)
    covered = crel.contains(X[test], Y[test])
    assert np.mean(covered != (scores[test] <= crel.gamma_cal_)) <= 0.002
    worst, z_worst = crel.reliability(
        X[test[:5]], Y[test[:5]], search=SearchSettings(num_z0=4, steps=5)
    )  # PGD through decode
    assert np.isfinite(worst).all() and z_worst.shape == (5, 2)


def test_inversion_settings_are_kept_in_the_checkpoint_and_a_misspelt_one_is_refused(vae, tmp_path):
    model = LatentDDPM.from_vae(vae, inversion={"iterations": 3})
    assert (model.inversion_iterations, model.inversion_tol) == (3, 1e-5)
    model.inversion_tol = 1e-3
    loaded = LatentDDPM.load_from_checkpoint(model.save_checkpoint(tmp_path / "ddpm.ckpt"), weights_only=True)
    assert (loaded.inversion_iterations, loaded.inversion_tol) == (3, 1e-3)
    with pytest.raises(ValueError, match=r"inversion names \['iteration'\]; it takes \['iterations', 'tol'\]"):
        LatentDDPM.from_vae(vae, inversion={"iteration": 3})
