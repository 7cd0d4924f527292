"""The CReL estimator: fit → calibrate → predict, numpy in and out.

A lab scores its own model without Snakemake::

    from condeval.crel import CReL, CReLSettings
    crel = CReL(CReLSettings(metric="cosine")).fit(X_vae, Y_vae, X_dqr, Y_dqr)
    crel.calibrate(X_cal, Y_cal, alpha=0.1)
    covered = crel.contains(X_test, Y_test)           # Z ∈ S^γ(x)
    worst, z_worst = crel.reliability(X_test, GT_test) # CReL-ρ per point
    crel.save("runs/my-model"); crel = CReL.load("runs/my-model")
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from condeval.core.conformal import conformal_quantile, unit_scores
from condeval.core.devices import check_device
from condeval.core.io import check_finite, real_array
from condeval.core.settings import SearchSettings, TrainSettings
from condeval.crel.models.dqr import DirectionalQuantileRegressor
from condeval.crel.models.metrics import similarity
from condeval.crel.models.vae import LatentVAE
from condeval.crel.polytope import polytope_distance
from condeval.crel.regions import iter_region_clouds
from condeval.crel.reliability import CalibratedRegions, reliability_score
from condeval.metrics import as_numpy

__all__ = ["CReL", "CReLSettings"]


def _numeric_rows(array, name: str) -> np.ndarray:
    """``array`` as finite float64 rows (n, k), or an error naming ``name`` (strings, numeric ones
    included, bools and complex numbers are refused: a complex array would lose its imaginary part)."""
    rows = real_array(array, name)
    if rows.ndim != 2:
        raise ValueError(f"{name} must be 2-D (rows, features); got shape {rows.shape}")
    return check_finite(rows, name)


def _fit_inputs(X_lgm, Y_lgm, X_dqr, Y_dqr, val_fraction: float) -> tuple[np.ndarray, ...]:
    """The four training arrays, checked before any training: numeric, 2-D, finite, rows paired, widths agreed."""
    arrays = {
        name: _numeric_rows(a, name)
        for name, a in (("X_lgm", X_lgm), ("Y_lgm", Y_lgm), ("X_dqr", X_dqr), ("Y_dqr", Y_dqr))
    }
    for x, y in (("X_lgm", "Y_lgm"), ("X_dqr", "Y_dqr")):
        if len(arrays[x]) != len(arrays[y]):
            raise ValueError(
                f"{x} and {y} must have the same number of rows; got {len(arrays[x])} and {len(arrays[y])}"
            )
    for first, second in (("Y_lgm", "Y_dqr"), ("X_lgm", "X_dqr")):
        if arrays[first].shape[1] != arrays[second].shape[1]:
            raise ValueError(
                f"{first} and {second} must have the same width; got "
                f"{arrays[first].shape[1]} and {arrays[second].shape[1]}"
            )
    for name in ("Y_lgm", "X_dqr"):
        if len(arrays[name]) * val_fraction < 1 or len(arrays[name]) * (1 - val_fraction) < 2:
            raise ValueError(
                f"{name} has {len(arrays[name])} rows: too few to hold out val_fraction={val_fraction} "
                "for early stopping and train on the rest"
            )
    return tuple(arrays.values())


#: Hyperparameters ``CReL.fit`` sets itself, which ``lgm_kwargs`` / ``dqr_kwargs`` may not repeat.
_SET_BY_FIT = {
    "lgm_kwargs": ("output_dim", "latent_dim", "beta", "metric"),
    "dqr_kwargs": ("cond_dim", "latent_dim", "quantile_level", "direction_seed"),
}


@dataclass(frozen=True)
class CReLSettings:
    """How :meth:`CReL.fit` trains the latent model and the DQR, checked on construction.

    Parameters
    ----------
    latent_dim : int, default 2
        The latent space's width r.
    beta : float, default 1e-3
        The VAE's KL weight.
    metric : {"mse", "mae", "cosine"}, default "mse"
        The VAE's reconstruction loss and the similarity ρ that :meth:`CReL.reliability` searches.
    quantile_level : float in (0, 1), default 0.1
        The DQR's quantile level τ.
    val_fraction : float in (0, 1), default 0.1
        Share of each training fold held out for early stopping.
    seed : int, default 0
    lgm, dqr : TrainSettings
        Epochs, batch size, patience, learning rate (default each model's ``default_lr``) and accelerator of each
        model.
    lgm_kwargs, dqr_kwargs : mapping
        Further constructor arguments of :class:`LatentVAE` (``cond_dim`` = X's width for a conditional
        VAE, ``hidden_dims``, …) and :class:`DirectionalQuantileRegressor` (``n_directions``, …); not
        those the settings above set.
    work_dir : path, optional
        Where training writes its checkpoints and logs and resumes from (one folder per model; a folder
        left by another fit is cleared, with a warning). None: a temporary folder, gone after the fit.

    Examples
    --------
    >>> from condeval.crel import CReLSettings
    >>> settings = CReLSettings(metric="cosine", latent_dim=4, dqr_kwargs={"n_directions": 64})
    >>> settings.latent_dim, settings.lgm.epochs, settings.dqr.patience
    (4, 300, 8)
    >>> CReLSettings(lgm_kwargs={"latent_dim": 3})
    Traceback (most recent call last):
    ...
    TypeError: lgm_kwargs may not set ['latent_dim']: CReLSettings sets them (its own fields, or the data)
    """

    latent_dim: int = 2
    beta: float = 1e-3
    metric: str = "mse"
    quantile_level: float = 0.1
    val_fraction: float = 0.1
    seed: int = 0
    lgm: TrainSettings = TrainSettings(epochs=300, batch_size=512, patience=20)
    dqr: TrainSettings = TrainSettings(epochs=60, batch_size=256, patience=8)
    lgm_kwargs: Mapping = field(default_factory=dict)
    dqr_kwargs: Mapping = field(default_factory=dict)
    work_dir: str | Path | None = None

    def __post_init__(self):
        from condeval.core.io import check_integer

        check_integer(self.latent_dim, "latent_dim", least=1)
        similarity(self.metric)  # an unknown metric is refused by name
        if not 0 < self.val_fraction < 1:
            raise ValueError(f"val_fraction must be in (0, 1) (the early-stopping hold-out); got {self.val_fraction}")
        if not 0 < self.quantile_level < 1:
            raise ValueError(f"quantile_level must be in (0, 1); got {self.quantile_level}")
        for name in ("lgm", "dqr"):
            if not isinstance(getattr(self, name), TrainSettings):
                raise TypeError(f"{name} must be a TrainSettings; got {type(getattr(self, name)).__name__}")
        for name in ("lgm_kwargs", "dqr_kwargs"):
            repeated = sorted(set(getattr(self, name)) & set(_SET_BY_FIT[name]))
            if repeated:
                raise TypeError(f"{name} may not set {repeated}: CReLSettings sets them (its own fields, or the data)")
            if "lr" in getattr(self, name):
                raise TypeError(
                    f"{name} may not set lr: the learning rate is the training's, TrainSettings(..., lr=...)"
                )


def _check_cond_dim(settings: CReLSettings, x_width: int) -> None:
    """A conditional VAE's ``cond_dim`` is X's width (else it fails inside the first training step)."""
    cond_dim = settings.lgm_kwargs.get("cond_dim", 0)
    if cond_dim and cond_dim != x_width:
        raise ValueError(
            f"lgm_kwargs cond_dim={cond_dim}: a conditional VAE reads X_lgm, {x_width} wide "
            "(cond_dim must be its width, or 0 for an unconditional VAE)"
        )


def _holdout(rng: np.random.Generator, fraction: float, *arrays: np.ndarray) -> tuple[tuple, tuple]:
    """Split arrays row-wise into (training, early-stopping validation) tuples, each row held out with
    probability ``fraction``; at least one row on each side (a draw of none would train without early
    stopping and call its last epoch the best)."""
    n = arrays[0].shape[0]
    is_val = rng.random(n) < fraction
    if is_val.all() or not is_val.any():
        is_val[rng.integers(n)] = not is_val.any()  # only where the draw left a side empty
    return tuple(a[~is_val] for a in arrays), tuple(a[is_val] for a in arrays)


class CReL:
    """Conformal ReLiability on a latent generative model and a latent DQR (MAPIE's life cycle).

    Parameters
    ----------
    settings : CReLSettings, optional
        How :meth:`fit` trains both models (the defaults when None).

    Attributes
    ----------
    lgm : LatentVAE or LatentDDPM
        The latent generative model, with ``encode(y, x)`` and ``decode(z, x)`` (set by :meth:`fit`,
        :meth:`from_models`, :meth:`load` or :meth:`from_checkpoints`).
    dqr : DirectionalQuantileRegressor
        The directional quantile regressor in ``lgm``'s latent space.
    metric : str
        The similarity ρ that :meth:`reliability` searches (higher is better).
    checkpoints_ : dict of Path
        After a :meth:`fit` with ``settings.work_dir``: the best checkpoints (``"lgm"``, ``"dqr"``).
    alpha_ : float
        Miscoverage level of the last calibration.
    scores_cal_ : ndarray (n_cal,) or (n_units,)
        E_i⁺, exact distances of the calibration codes to their regions; with ``groups``, one per
        unit (its rows' largest).
    gamma_cal_ : float
        The ⌈(n+1)(1−α)⌉-th smallest of ``scores_cal_`` (Eq. 6).
    gamma_init_ : float
        Coverage of the uncalibrated regions on the calibration set (Eq. 5): a share of rows, or with
        ``groups`` of units.

    Examples
    --------
    >>> import numpy as np
    >>> from condeval.core.settings import SearchSettings, TrainSettings
    >>> from condeval.crel import CReL, CReLSettings
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(1200, 3))
    >>> Y = np.hstack([X, X[:, :1] ** 2]) + 0.2 * rng.normal(size=(1200, 4))
    >>> settings = CReLSettings(lgm=TrainSettings(epochs=3, batch_size=128, patience=2, progress=False),
    ...                         dqr=TrainSettings(epochs=2, batch_size=128, patience=2, progress=False),
    ...                         dqr_kwargs={"n_directions": 32, "directions_per_step": 16})
    >>> crel = CReL(settings).fit(X[:600], Y[:600], X[600:900], Y[600:900])
    >>> crel = crel.calibrate(X[900:1000], Y[900:1000], alpha=0.1)
    >>> covered = crel.contains(X[1000:], Y[1000:])
    >>> bool(0.7 < covered.mean() <= 1.0)
    True
    """

    def __init__(self, settings: CReLSettings | None = None):
        self.settings = CReLSettings() if settings is None else settings
        if not isinstance(self.settings, CReLSettings):
            raise TypeError(f"settings must be a CReLSettings; got {type(self.settings).__name__}")
        self.metric = self.settings.metric
        self._similarity = similarity(self.metric)

    @classmethod
    def from_models(cls, lgm: LatentVAE, dqr: DirectionalQuantileRegressor, metric: str = "mse") -> CReL:
        """A CReL on models already trained (a LatentVAE or LatentDDPM and a DQR in its latent space)."""
        crel = cls(CReLSettings(metric=metric, latent_dim=int(dqr.hparams.latent_dim)))
        crel.lgm, crel.dqr = lgm.eval(), dqr.eval()
        return crel

    def fit(self, X_lgm, Y_lgm, X_dqr, Y_dqr) -> CReL:
        """Train the VAE on Y_lgm (a conditional VAE, ``lgm_kwargs={"cond_dim": p}``, on (Y_lgm, X_lgm)),
        then the latent DQR on (X_dqr, E(Y_dqr)), as :attr:`settings` say.

        The folds must be disjoint from each other and from the calibration fold (Proposition 3.2), and
        disjoint by the exchangeable unit: several outputs of one condition belong to one fold
        (:func:`condeval.crel.image_to_text.assign_unit_folds`). Every input is checked before any
        training, naming the argument. Training resumes from ``settings.work_dir`` when it is given.

        Returns
        -------
        CReL
            ``self``, with :attr:`lgm` and :attr:`dqr` trained (the best epoch of each).
        """
        import tempfile

        settings = self.settings
        X_lgm, Y_lgm, X_dqr, Y_dqr = _fit_inputs(X_lgm, Y_lgm, X_dqr, Y_dqr, settings.val_fraction)
        _check_cond_dim(settings, X_lgm.shape[1])
        if settings.work_dir is not None:
            self._fit_in(Path(settings.work_dir), X_lgm, Y_lgm, X_dqr, Y_dqr)
            return self
        with tempfile.TemporaryDirectory(prefix="crel-fit-") as work_dir:
            self._fit_in(Path(work_dir), X_lgm, Y_lgm, X_dqr, Y_dqr)
        return self

    def _fit_in(self, out_dir: Path, X_lgm, Y_lgm, X_dqr, Y_dqr) -> None:
        import pytorch_lightning as pl

        from condeval.core.training import fit as fit_module

        settings = self.settings
        rng = np.random.default_rng(settings.seed)
        pl.seed_everything(settings.seed, workers=True, verbose=False)
        lgm = LatentVAE(
            output_dim=Y_lgm.shape[1],
            latent_dim=settings.latent_dim,
            beta=settings.beta,
            metric=settings.metric,
            **settings.lgm_kwargs,
        )
        conditional = int(lgm.hparams.get("cond_dim", 0)) > 0
        train, val = _holdout(rng, settings.val_fraction, *((Y_lgm, X_lgm) if conditional else (Y_lgm,)))
        best_lgm = self._train(lgm, train, val, out_dir / "lgm", settings.lgm, fit_module)
        self.lgm = LatentVAE.load_from_checkpoint(best_lgm, map_location="cpu", weights_only=True).eval()
        with torch.no_grad():
            x_dqr = torch.as_tensor(X_dqr, dtype=torch.float32) if conditional else None
            Z_dqr = self.lgm.encode(torch.as_tensor(Y_dqr, dtype=torch.float32), x_dqr).double().numpy()
        dqr = DirectionalQuantileRegressor(
            cond_dim=X_dqr.shape[1],
            latent_dim=settings.latent_dim,
            quantile_level=settings.quantile_level,
            direction_seed=settings.seed,
            **settings.dqr_kwargs,
        )
        train, val = _holdout(rng, settings.val_fraction, X_dqr, Z_dqr)
        best_dqr = self._train(dqr, train, val, out_dir / "dqr", settings.dqr, fit_module)
        self.dqr = DirectionalQuantileRegressor.load_from_checkpoint(
            best_dqr, map_location="cpu", weights_only=True
        ).eval()
        if settings.work_dir is not None:
            self.checkpoints_ = {"lgm": Path(best_lgm), "dqr": Path(best_dqr)}

    def _train(self, module, train, val, out_dir: Path, training: TrainSettings, fit_module) -> str:
        return fit_module(module, train, val, out_dir, training, seed=self.settings.seed)

    # -- persistence ---------------------------------------------------------------------------
    def save(self, folder: str | Path) -> Path:
        """Write the models (``lgm.ckpt``, ``dqr.ckpt``, read with torch alone) and, once calibrated, the
        calibration (``calibration.json``: α, the metric and the calibration scores) to ``folder``,
        atomically; :meth:`load` reads it back."""
        from condeval.core.io import atomic_directory, write_json

        self._require_models()
        with atomic_directory(folder) as tmp:
            self.lgm.save_checkpoint(tmp / "lgm.ckpt")
            self.dqr.save_checkpoint(tmp / "dqr.ckpt")
            record = {"metric": self.metric}
            if hasattr(self, "scores_cal_"):
                record |= {"alpha": self.alpha_, "scores_cal": self.scores_cal_.tolist()}
            write_json(record, tmp / "calibration.json")
        return Path(folder)

    @classmethod
    def load(cls, folder: str | Path, *, inference_steps: int | None = None) -> CReL:
        """A CReL written by :meth:`save`, calibrated again at its saved α when it was calibrated."""
        from condeval.core.io import read_json

        folder = Path(folder)
        record = read_json(folder / "calibration.json")
        crel = cls.from_checkpoints(
            folder / "lgm.ckpt", folder / "dqr.ckpt", metric=record["metric"], inference_steps=inference_steps
        )
        if "scores_cal" in record:
            crel.calibrate_from_scores(np.asarray(record["scores_cal"], dtype=np.float64), record["alpha"])
        return crel

    @classmethod
    def from_checkpoints(
        cls,
        lgm_path: str | Path,
        dqr_path: str | Path,
        metric: str | None = None,
        *,
        inference_steps: int | None = None,
    ) -> CReL:
        """A CReL on the LGM (LatentVAE or LatentDDPM) and DQR of two checkpoints (a workflow's, on the CPU).

        ``inference_steps`` sets the DDIM steps T of a LatentDDPM (default: the saved value).
        """
        from condeval.crel.models.lgm import load_lgm

        lgm = load_lgm(lgm_path, inference_steps=inference_steps)
        dqr = DirectionalQuantileRegressor.load_from_checkpoint(dqr_path, map_location="cpu", weights_only=True)
        return cls.from_models(lgm, dqr, metric=metric or lgm.hparams.metric)

    def _require_models(self) -> None:
        if not hasattr(self, "dqr"):
            raise RuntimeError("CReL has no models: fit(X_lgm, Y_lgm, X_dqr, Y_dqr) first, or load() a saved one")

    # -- latent space -------------------------------------------------------------------------
    @property
    def conditional_lgm(self) -> bool:
        return int(self.lgm.hparams.get("cond_dim", 0)) > 0

    def _x_for_lgm(self, x: torch.Tensor | None) -> torch.Tensor | None:
        return x if self.conditional_lgm else None

    def _check_inputs(self, X: np.ndarray, Y: np.ndarray | None = None) -> None:
        """Shapes the models expect, named by argument (X: (n, p); Y: (n, d), same n)."""
        self._require_models()
        p = int(self.dqr.hparams.cond_dim)
        X = as_numpy(X)
        if X.ndim != 2 or X.shape[1] != p:
            raise ValueError(f"X must have shape (n, {p}) (the DQR's condition width); got {X.shape}")
        real_array(X, "X")
        if Y is None:
            return
        d = int(self.lgm.hparams.output_dim)
        Y = as_numpy(Y)
        if Y.ndim != 2 or Y.shape[1] != d:
            raise ValueError(f"Y must have shape (n, {d}) (the LGM's output width); got {Y.shape}")
        if Y.shape[0] != X.shape[0]:
            raise ValueError(f"X and Y must have the same number of rows; got {X.shape[0]} and {Y.shape[0]}")
        real_array(Y, "Y")

    @torch.no_grad()
    def encode(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """Latent codes Z = E(y, x) (the posterior mean)."""
        self._check_inputs(X, Y)
        y = torch.as_tensor(check_finite(Y, "Y"), dtype=torch.float32)
        x = torch.as_tensor(check_finite(X, "X"), dtype=torch.float32)
        return self.lgm.encode(y, self._x_for_lgm(x)).double().numpy()

    def decode_torch(self, z: torch.Tensor, x: torch.Tensor | None = None) -> torch.Tensor:
        """Differentiable decoder ``Dec(z, x)`` (``x`` ignored by an unconditional VAE)."""
        return self.lgm.decode(z.float(), self._x_for_lgm(x.float() if x is not None else None))

    @property
    def directions(self) -> np.ndarray:
        return self.dqr.directions.double().cpu().numpy()

    @torch.no_grad()
    def offsets(self, X: np.ndarray) -> np.ndarray:
        """DQR offsets b[i, k] = f(x_i, u_k): R_Z(x_i) = {z : U z ≥ b[i]}."""
        self._check_inputs(X)
        x = torch.as_tensor(check_finite(X, "X"), dtype=torch.float32)
        return self.dqr.offsets(x).double().cpu().numpy()

    def latent_scores(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """E⁺ = exact distance from E(y, x) to R_Z(x), per row (Eq. 6)."""
        return polytope_distance(self.directions, self.offsets(X), self.encode(X, Y))

    # -- calibration --------------------------------------------------------------------------
    def calibrate(self, X_cal: np.ndarray, Y_cal: np.ndarray, alpha: float, groups=None) -> CReL:
        """Compute E_i⁺ on the calibration fold and γ_cal for level ``alpha``.

        ``groups`` (n_cal,), the exchangeable unit of each row (e.g. its condition, when the fold holds
        several outputs of each): γ_cal is then the conformal quantile of each unit's largest E⁺
        (:func:`~condeval.core.conformal.unit_scores`), so every output of a new unit lies in its region
        with probability ≥ 1 − α. Without it, the rows must be exchangeable (one output per condition).

        All or nothing: a call that raises (too few points for ``alpha``, NaN, wrong shapes)
        leaves the estimator as it was.
        """
        return self.calibrate_from_scores(self.latent_scores(X_cal, Y_cal), alpha, groups)

    def calibrate_from_scores(self, scores_cal: np.ndarray, alpha: float, groups=None) -> CReL:
        """Calibrate from precomputed E_i⁺ (e.g. a workflow artifact), per unit with ``groups``; all or
        nothing, as :meth:`calibrate`. ``scores_cal_`` keeps what γ_cal is the quantile of (the units'
        maxima with ``groups``)."""
        scores_cal = np.asarray(scores_cal)
        if scores_cal.dtype.kind not in "iuf":  # strings and booleans are no distances
            raise TypeError(f"scores_cal must be real numbers (E+ distances); got dtype {scores_cal.dtype}")
        scores_cal = check_finite(scores_cal.astype(np.float64), "scores_cal")
        if scores_cal.ndim != 1:
            raise ValueError(f"scores_cal must be 1-D (one E+ per calibration point); got shape {scores_cal.shape}")
        if (scores_cal < 0).any():
            raise ValueError(
                f"scores_cal must be non-negative (E+ is a distance); row {int(np.argmin(scores_cal))} "
                f"is {scores_cal.min()}"
            )
        if groups is not None:
            groups = np.asarray(groups)
            if groups.shape != scores_cal.shape:
                raise ValueError(
                    f"groups must hold one unit per calibration row; got {groups.shape} for {scores_cal.shape[0]} rows"
                )
            scores_cal = unit_scores(scores_cal, groups, "groups")
        gamma_cal = conformal_quantile(scores_cal, alpha)
        self.scores_cal_, self.gamma_cal_, self.alpha_ = scores_cal, gamma_cal, float(alpha)
        self.gamma_init_ = float(np.mean(scores_cal <= 0.0))
        return self

    def set_alpha(self, alpha: float) -> CReL:
        """Re-threshold the stored calibration scores at a new ``alpha`` (unchanged if it raises)."""
        if not hasattr(self, "scores_cal_"):
            raise RuntimeError("CReL is not calibrated: call calibrate(X_cal, Y_cal, alpha) first")
        gamma_cal = conformal_quantile(self.scores_cal_, alpha)
        self.gamma_cal_, self.alpha_ = gamma_cal, float(alpha)
        return self

    def _require_calibrated(self) -> None:
        if not hasattr(self, "gamma_cal_"):
            raise RuntimeError("CReL is not calibrated: call calibrate(X_cal, Y_cal, alpha) first")

    # -- prediction ---------------------------------------------------------------------------
    def contains(self, X: np.ndarray, Y: np.ndarray) -> np.ndarray:
        """Whether E(y, x) ∈ S^γcal(x) for each row: coverage in Z."""
        self._require_calibrated()
        return self.latent_scores(X, Y) <= self.gamma_cal_

    def region_clouds(self, X: np.ndarray, n_latent: int = 2048, gamma: float | None = None):
        """Iterate the decoded clouds of S^γ(x_i) (C_Y(x_i) discretized); ``gamma`` defaults to γ_cal."""
        if gamma is None:
            self._require_calibrated()
            gamma = self.gamma_cal_
        return iter_region_clouds(self.directions, self.offsets(X), gamma, self.decode_torch, X, n_latent)

    def reliability(
        self,
        X: np.ndarray,
        gt: np.ndarray,
        *,
        search: SearchSettings | None = None,
        device: str | torch.device | None = None,
        extra_starts: np.ndarray | None = None,
        return_info: bool = False,
    ) -> tuple[np.ndarray, np.ndarray]:
        """CReL-ρ: min over z ∈ S^γcal(x) of ρ(Dec(z, x), gt), per row (Eq. 8).

        ``search`` sets the projected gradient descent (:class:`~condeval.core.settings.SearchSettings`:
        starts, steps, step size, seed, stopping rule; None: its defaults). ``device`` (e.g. ``"cuda"``) runs it and the
        decoder there; the default keeps everything on the CPU in numpy. ``extra_starts`` (n, r), e.g.
        the codes of the model's own outputs, join the random starts where they lie in the region.
        ``return_info`` adds the per-row convergence record third
        (:func:`condeval.crel.reliability.reliability_score`).

        Returns
        -------
        scores : ndarray (n,)
            The worst similarity found in each calibrated region.
        z_worst : ndarray (n, r)
            Where it is attained.
        """
        self._require_calibrated()
        if device is not None:
            check_device(device)
        self._check_inputs(X)
        gt = _numeric_rows(gt, "gt")
        d = int(self.lgm.hparams.output_dim)
        if gt.shape != (len(X), d):
            raise ValueError(
                f"gt must have shape ({len(X)}, {d}) (one ground truth per row of X, in the LGM's "
                f"output space); got {gt.shape}"
            )
        zero = np.flatnonzero(~gt.any(axis=1))
        if self.metric == "cosine" and len(zero):  # a zero row's cosine is 0 to every point: a score of 0, silently
            raise ValueError(f"gt row {int(zero[0])} is all zeros: its cosine similarity is undefined")
        U, b, X = self.directions, self.offsets(X), check_finite(np.asarray(X, dtype=np.float64), "X")
        options = {"search": search, "return_info": return_info}

        def search_region(U, b, gt, X, extra_starts):
            return reliability_score(
                self.decode_torch,
                self._similarity,
                CalibratedRegions(U, b, self.gamma_cal_),
                gt,
                x=X,
                extra_starts=extra_starts,
                **options,
            )

        if device is None:
            return search_region(U, b, gt, X, extra_starts)
        device = torch.device(device)
        U, b, gt, X = (torch.as_tensor(a, dtype=torch.float64, device=device) for a in (U, b, gt, X))
        if extra_starts is not None:
            extra_starts = torch.as_tensor(extra_starts, dtype=torch.float64, device=device)
        self.lgm.to(device)
        try:
            return search_region(U, b, gt, X, extra_starts)
        finally:
            self.lgm.to("cpu")
