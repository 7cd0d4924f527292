"""Latent generative model (LGM): a DDPM in the latent space of a frozen VAE (Appendix A.2).

The paper's "Stable Diffusion" LGM is a latent diffusion model: a VAE is trained
first, its encoder maps each output to ``z_0 = E(y)`` and a denoising diffusion
model (DDPM, Ho et al., 2020) is trained on those codes with the noise-prediction
loss ``E ||eps - eps_theta(z_t, t[, x])||^2``, ``t ~ Unif{0, ..., 999}``. Sampling
runs the reverse process from noise ``z_T`` and decodes ``y = Dec(z_0)``.

Interpretation adopted here
---------------------------
CReL needs a deterministic, invertible pair ``encode(y, x) -> z`` and
``decode(z, x) -> y``. For this LGM the latent code seen by CReL is the diffusion
*noise* ``z_T`` in ``R^r`` (``r`` = the VAE's latent dimension):

* ``decode(z_T, x) = VAE.decode(DDIM(z_T, x))`` where ``DDIM`` is deterministic
  DDIM sampling (``eta = 0``, Song et al., 2021) with ``T`` inference steps,
  conditioned on ``x`` when the denoiser is conditional;
* ``encode(y, x) = DDIM^-1(VAE.encode(y), x)``, the DDIM inversion of the VAE's
  posterior mean with the same ``T`` steps, so ``encode(decode(z)) ~= z``.

``T`` (:attr:`LatentDDPM.inference_steps`, 10 to 50 in the paper's Appendix C.2)
can be changed after training without retraining. The VAE is unconditional and
frozen: its weights and hyperparameters are part of this module, so one
checkpoint file holds the whole LGM.

Timestep conventions (diffusers' ``"leading"`` spacing, ``steps_offset = 0``)
--------------------------------------------------------------------------------
With ``N = num_train_timesteps`` and ``k = N // T`` the sampler visits
``t = (T - 1) k, ..., k, 0``; its step at ``t`` evaluates ``eps_theta(z_t, t)`` and
moves from noise level ``alpha_bar[t]`` to ``alpha_bar[t - k]``, the last one (from
``t = 0``) to ``alpha_bar = 1`` (``set_alpha_to_one``), i.e. the clean code. The
inverse scheduler visits ``t = 0, k, ..., (T - 1) k``; its step at ``t`` moves from
level ``alpha_bar[t - k]`` (1 for ``t = 0``) to ``alpha_bar[t]``, and is the exact
algebraic inverse of the sampler's step at the same ``t`` *given the same noise
prediction* ``eps_theta(z_t, t)``. So ``z_T`` lives at level ``alpha_bar[(T - 1) k]``
(``t = 900`` for ``T = 10``, ``t = 957`` for ``T = 30``; ``alpha_bar < 3e-4`` for
the linear schedule: pure noise). "Trailing" spacing is not used because the
schedulers' step size ``N // T`` would not match its timesteps when ``T`` does not
divide ``N`` (e.g. ``T = 30``). ``clip_sample`` is off: clipping the predicted
``z_0`` to ``[-1, 1]`` would break invertibility and VAE codes are not bounded.

Inversion accuracy
------------------
Plain DDIM inversion evaluates ``eps_theta`` at the known, less noisy point instead
of the unknown ``z_t``. In a low-dimensional latent space with few steps this is
crude (on a small 2-D mixture, ``|encode(decode(z)) - z|`` has a median of about
0.4 for ``T = 10`` and 0.1 for ``T = 50``, with ``z ~ N(0, I)``). Each inverse step
is therefore refined by the fixed-point iteration
``z_t <- inverse_step(eps_theta(z_t, t), t, z_{t-k})``, at most
``inversion_iterations`` noise predictions per step and row, a row stopping once
it moves by at most ``inversion_tol`` (a row that does not converge keeps its best
iterate). It converges to the exact inverse of the sampler where ``eps_theta`` is
smooth enough (a trained denoiser; not a randomly initialised one), giving
``|encode(decode(z)) - z| ~ 1e-4`` there. ``inversion_iterations = 1`` is plain
DDIM inversion.

Batches are tuples of tensors: ``(y,)`` for an unconditional denoiser and
``(y, x)`` for a conditional one (output first, condition second), as for
:class:`~condeval.crel.models.vae.LatentVAE`.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

import numpy as np
import torch
from diffusers import DDIMInverseScheduler, DDIMScheduler, DDPMScheduler
from diffusers.models.embeddings import TimestepEmbedding, Timesteps
from torch import Tensor, nn

from condeval.core.nn import CheckpointedModule
from condeval.crel.models.vae import LatentVAE

__all__ = ["LatentDDPM", "NoiseMLP"]

DEFAULT_HIDDEN = (128, 256, 128)
#: The inverse DDIM steps' fixed-point refinement, as :class:`LatentDDPM`'s ``inversion`` defaults it.
DEFAULT_INVERSION = {"iterations": 200, "tol": 1e-5}
VALIDATION_SEED = 20_240_917


def _silu_mlp(sizes: Sequence[int]) -> nn.Sequential:
    """Linear layers of the given sizes with SiLU between them (none at the end)."""
    layers: list[nn.Module] = []
    for i, (fan_in, fan_out) in enumerate(pairwise(sizes)):
        if i > 0:
            layers.append(nn.SiLU())
        layers.append(nn.Linear(fan_in, fan_out))
    return nn.Sequential(*layers)


class NoiseMLP(nn.Module):
    """Noise predictor ``eps_theta(z_t, t[, x])``: an MLP on ``concat(z_t, emb(t)[, x])``.

    Parameters
    ----------
    latent_dim : int
        Dimension ``r`` of ``z_t`` (and of the predicted noise).
    cond_dim : int
        Dimension ``p`` of the condition; 0 for an unconditional denoiser.
    hidden_dims : sequence of int
        Hidden widths of the MLP.
    time_embed_dim : int
        Size of the sinusoidal projection of ``t`` and of its learned embedding
        (diffusers' ``Timesteps`` followed by ``TimestepEmbedding``).
    """

    def __init__(self, latent_dim: int, cond_dim: int, hidden_dims: Sequence[int], time_embed_dim: int) -> None:
        super().__init__()
        self.time_proj = Timesteps(time_embed_dim, flip_sin_to_cos=True, downscale_freq_shift=0)
        self.time_embedding = TimestepEmbedding(time_embed_dim, time_embed_dim)
        self.net = _silu_mlp([latent_dim + time_embed_dim + cond_dim, *hidden_dims, latent_dim])

    def forward(self, z: Tensor, t: Tensor, x: Tensor | None = None) -> Tensor:
        """Predicted noise, ``(n, r)``; ``t`` holds one timestep per row, shape ``(n,)``."""
        emb = self.time_embedding(self.time_proj(t).to(z.dtype))
        inputs = [z, emb] if x is None else [z, emb, x]
        return self.net(torch.cat(inputs, dim=1))


class LatentDDPM(CheckpointedModule):
    """Latent diffusion LGM: DDIM noise code ``z_T`` <-> output ``y`` through a frozen VAE.

    Build one from a trained VAE with :meth:`from_vae`; the constructor makes a VAE
    with random weights from ``vae_hparams`` (that is what
    :meth:`load_from_checkpoint` relies on before loading the state dict).

    Parameters
    ----------
    vae_hparams : dict
        Hyperparameters of the unconditional :class:`LatentVAE` (its ``hparams``).
    cond_dim : int
        Dimension ``p`` of the conditions; 0 gives an unconditional denoiser.
    hidden_dims : sequence of int
        Hidden widths of the denoiser MLP (paper: ``[128, 256, 128]``).
    time_embed_dim : int
        Time embedding size (paper: 128).
    num_train_timesteps : int
        Diffusion steps of the forward process (paper: 1000).
    inference_steps : int
        DDIM steps ``T`` used by :meth:`encode` and :meth:`decode`; changeable later.
    beta_schedule : {"linear", "scaled_linear", "squaredcos_cap_v2"}
        Noise schedule of the diffusers schedulers.
    inversion : dict, optional
        The inverse DDIM steps' fixed-point refinement: ``iterations`` (default 200), at most this many
        noise predictions per inverse step (1 is plain DDIM inversion, more add refinements, see the
        module docstring), and ``tol`` (default 1e-5), a row's refinement stopping once it moves by at
        most this much (max norm). They are :attr:`inversion_iterations` and :attr:`inversion_tol`.

    Notes
    -----
    It trains at the paper's Adam learning rate, 1e-4 (:attr:`default_lr`), unless its
    :class:`~condeval.core.settings.TrainSettings` name another. ``inference_steps`` and
    ``inversion`` only affect
    :meth:`encode` / :meth:`decode`, not training: set them on a loaded model
    (attributes, or :meth:`with_inference_steps`) without retraining.
    """

    default_lr = 1e-4  # the paper's Adam learning rate

    def __init__(
        self,
        vae_hparams: dict,
        cond_dim: int = 0,
        hidden_dims: Sequence[int] = DEFAULT_HIDDEN,
        time_embed_dim: int = 128,
        num_train_timesteps: int = 1000,
        inference_steps: int = 10,
        beta_schedule: str = "linear",
        inversion: dict | None = None,
    ) -> None:
        super().__init__()
        vae = LatentVAE(**vae_hparams)
        if vae.is_conditional:
            raise ValueError(
                "the VAE of a LatentDDPM must be unconditional (cond_dim=0); condition the denoiser instead"
            )
        if cond_dim < 0 or time_embed_dim < 1 or num_train_timesteps < 1 or not hidden_dims:
            raise ValueError(
                f"bad sizes: cond_dim={cond_dim}, time_embed_dim={time_embed_dim}, "
                f"num_train_timesteps={num_train_timesteps}, hidden_dims={list(hidden_dims)}"
            )
        self.save_hyperparameters(
            {
                "vae_hparams": dict(vae.hparams),
                "output_dim": int(vae.hparams.output_dim),
                "latent_dim": int(vae.hparams.latent_dim),
                "cond_dim": int(cond_dim),
                "metric": str(vae.hparams.metric),
                "hidden_dims": [int(h) for h in hidden_dims],
                "time_embed_dim": int(time_embed_dim),
                "num_train_timesteps": int(num_train_timesteps),
                "inference_steps": int(inference_steps),
                "beta_schedule": str(beta_schedule),
                "inversion": {},
            }
        )
        self.vae = vae.requires_grad_(False).eval()
        self.denoiser = NoiseMLP(self.hparams.latent_dim, cond_dim, self.hparams.hidden_dims, time_embed_dim)
        self.noise_scheduler = DDPMScheduler(
            num_train_timesteps=num_train_timesteps, beta_schedule=beta_schedule, clip_sample=False
        )
        self.sampler = DDIMScheduler.from_config(self.noise_scheduler.config)
        self.inverter = DDIMInverseScheduler.from_config(self.noise_scheduler.config)
        self.inference_steps = inference_steps
        unknown = sorted(set(inversion or {}) - set(DEFAULT_INVERSION))
        if unknown:
            raise ValueError(f"inversion names {unknown}; it takes {sorted(DEFAULT_INVERSION)}")
        inversion = {**DEFAULT_INVERSION, **(inversion or {})}
        self.inversion_iterations = inversion["iterations"]
        self.inversion_tol = inversion["tol"]

    @classmethod
    def from_vae(cls, vae: LatentVAE, **kwargs) -> LatentDDPM:
        """A DDPM whose frozen VAE is a copy of the trained ``vae`` (keyword arguments as in the class)."""
        model = cls(dict(vae.hparams), **kwargs)
        model.vae.load_state_dict(vae.state_dict())
        return model

    # ----------------------------------------------------------- inference T
    @property
    def inference_steps(self) -> int:
        """DDIM steps ``T`` of :meth:`encode` / :meth:`decode`."""
        return self._inference_steps

    @inference_steps.setter
    def inference_steps(self, steps: int) -> None:
        steps = int(steps)
        if not 1 <= steps <= self.hparams.num_train_timesteps:
            raise ValueError(f"inference_steps must lie in [1, {self.hparams.num_train_timesteps}], got {steps}")
        self.sampler.set_timesteps(steps)
        self.inverter.set_timesteps(steps)
        self._inference_steps = steps
        self.hparams.inference_steps = steps

    def with_inference_steps(self, steps: int) -> LatentDDPM:
        """Set :attr:`inference_steps` in place and return ``self`` (no retraining needed)."""
        self.inference_steps = steps
        return self

    @property
    def inversion_iterations(self) -> int:
        """Noise predictions per inverse DDIM step (1: plain DDIM inversion)."""
        return self._inversion_iterations

    @inversion_iterations.setter
    def inversion_iterations(self, iterations: int) -> None:
        iterations = int(iterations)
        if iterations < 1:
            raise ValueError(f"inversion_iterations must be at least 1, got {iterations}")
        self._inversion_iterations = iterations
        self.hparams.inversion = dict(self.hparams.inversion, iterations=iterations)

    @property
    def inversion_tol(self) -> float:
        """Convergence tolerance (max norm) of the fixed-point refinement of inverse steps."""
        return self._inversion_tol

    @inversion_tol.setter
    def inversion_tol(self, tol: float) -> None:
        tol = float(tol)
        if not tol >= 0.0:
            raise ValueError(f"inversion_tol must be non-negative, got {tol}")
        self._inversion_tol = tol
        self.hparams.inversion = dict(self.hparams.inversion, tol=tol)

    # ------------------------------------------------------------------ model
    @property
    def is_conditional(self) -> bool:
        """True for a conditional denoiser (``cond_dim > 0``)."""
        return self.hparams.cond_dim > 0

    def train(self, mode: bool = True) -> LatentDDPM:
        """Switch the denoiser's mode; the frozen VAE always stays in eval mode."""
        super().train(mode)
        self.vae.eval()
        return self

    def _as_tensor(self, value: Tensor | np.ndarray) -> Tensor:
        return torch.as_tensor(value, dtype=self.dtype, device=self.device)

    def _condition(self, x: Tensor | np.ndarray | None) -> Tensor | None:
        """The condition as a tensor (conditional model) or None after checking it is absent."""
        if not self.is_conditional:
            if x is not None:
                raise ValueError("this LatentDDPM is unconditional (cond_dim=0) but a condition x was given")
            return None
        if x is None:
            raise ValueError(f"this conditional LatentDDPM needs a condition x of dimension {self.hparams.cond_dim}")
        return self._as_tensor(x)

    def forward(self, z_t: Tensor, t: Tensor, x: Tensor | None = None) -> Tensor:
        """Predicted noise ``eps_theta(z_t, t[, x])``, shape ``(n, r)``."""
        return self.denoiser(z_t, t, x)

    def _noise(self, z: Tensor, t: Tensor, x: Tensor | None) -> Tensor:
        """``eps_theta`` at one timestep ``t`` (a 0-d tensor) for every row of ``z``."""
        return self(z, t.to(z.device).expand(z.shape[0]), x)

    def sample_latent(self, z_T: Tensor | np.ndarray, x: Tensor | np.ndarray | None = None) -> Tensor:
        """Deterministic DDIM sampling (``eta = 0``): noise code ``z_T`` -> VAE code ``z_0``."""
        z, x = self._as_tensor(z_T), self._condition(x)
        for t in self.sampler.timesteps:
            z = self.sampler.step(self._noise(z, t, x), int(t), z, eta=0.0, return_dict=False)[0]
        return z

    def invert_latent(self, z_0: Tensor | np.ndarray, x: Tensor | np.ndarray | None = None) -> Tensor:
        """DDIM inversion: VAE code ``z_0`` -> noise code ``z_T`` (inverse of :meth:`sample_latent`)."""
        z, x = self._as_tensor(z_0), self._condition(x)
        for t in self.inverter.timesteps:
            z = self._inverse_step(z, t, x)
        return z

    def _inverse_update(self, guess: Tensor, z_prev: Tensor, t: Tensor, x: Tensor | None) -> Tensor:
        """One inverse DDIM step from ``z_prev`` with the noise predicted at ``(guess, t)``."""
        return self.inverter.step(self._noise(guess, t, x), int(t), z_prev, return_dict=False)[0]

    def _inverse_step(self, z_prev: Tensor, t: Tensor, x: Tensor | None) -> Tensor:
        """Solve ``sampler_step(z_t) = z_prev`` for ``z_t``: plain DDIM inversion, then fixed-point refinement.

        The residual ``|inverse_update(g) - g|`` of an iterate ``g`` is proportional to
        ``|sampler_step(g) - z_prev|``. A row stops once its residual is at most
        ``inversion_tol`` (keeping the last update); a row that never gets there
        keeps its iterate of smallest residual, so it is never worse than plain
        inversion. Rows are refined independently of each other.
        """
        guess = self._inverse_update(z_prev, z_prev, t, x)  # plain DDIM inversion
        out = guess.clone()
        best = torch.full((guess.shape[0],), float("inf"), dtype=guess.dtype, device=guess.device)
        rows = torch.arange(guess.shape[0], device=guess.device)
        for _ in range(self.inversion_iterations - 1):
            refined = self._inverse_update(guess, z_prev[rows], t, None if x is None else x[rows])
            residual = (refined - guess).abs().amax(dim=1)
            better = residual < best[rows]
            out[rows[better]], best[rows[better]] = guess[better], residual[better]
            done = residual <= self.inversion_tol
            out[rows[done]] = refined[done]
            rows, guess = rows[~done], refined[~done]
            if rows.numel() == 0:
                break
        return out

    def encode(self, y: Tensor | np.ndarray, x: Tensor | np.ndarray | None = None) -> Tensor:
        """Noise code ``z_T`` of ``y``: DDIM inversion of the VAE posterior mean, shape ``(n, r)``."""
        self._condition(x)  # validate before the VAE sees y
        return self.invert_latent(self.vae.encode(self._as_tensor(y)), x)

    def decode(self, z: Tensor | np.ndarray, x: Tensor | np.ndarray | None = None) -> Tensor:
        """Output ``y_hat = VAE.decode(DDIM(z, x))`` for noise codes ``z``, shape ``(n, d)``.

        Differentiable in ``z`` (the DDIM steps are torch operations).
        """
        return self.vae.decode(self.sample_latent(z, x))

    # --------------------------------------------------------------- training
    def _split_batch(self, batch: Sequence[Tensor]) -> tuple[Tensor, Tensor | None]:
        if self.is_conditional:
            if len(batch) < 2:
                raise ValueError("a conditional LatentDDPM batch must be (y, x)")
            return batch[0], batch[1]
        return batch[0], None

    def _loss(self, batch: Sequence[Tensor], generator: torch.Generator | None = None) -> Tensor:
        """Noise-prediction MSE at uniform random timesteps (drawn from ``generator`` if given)."""
        y, x = self._split_batch(batch)
        with torch.no_grad():
            z0 = self.vae.encode(y)
        n, steps = z0.shape[0], self.hparams.num_train_timesteps
        if generator is None:
            noise = torch.randn_like(z0)
            t = torch.randint(0, steps, (n,), device=z0.device)
        else:  # drawn on the CPU so validation noise is the same on every device
            noise = torch.randn(z0.shape, generator=generator).to(z0)
            t = torch.randint(0, steps, (n,), generator=generator).to(z0.device)
        z_t = self.noise_scheduler.add_noise(z0, noise, t)
        return nn.functional.mse_loss(self(z_t, t, x), noise)

    def training_step(self, batch: Sequence[Tensor], batch_idx: int) -> Tensor:
        loss = self._loss(batch)
        self.log("train_loss", loss, on_step=False, on_epoch=True, prog_bar=True)
        return loss

    def validation_step(self, batch: Sequence[Tensor], batch_idx: int) -> None:
        """Validation noise and timesteps come from a generator seeded by ``batch_idx``: ``val_loss`` is reproducible."""
        generator = torch.Generator().manual_seed(VALIDATION_SEED + batch_idx)
        self.log("val_loss", self._loss(batch, generator), on_step=False, on_epoch=True, prog_bar=True)

    def configure_optimizers(self, lr: float) -> torch.optim.Optimizer:
        """Adam on the denoiser at ``lr`` (:class:`~condeval.core.settings.TrainSettings`' ``lr``, default
        :attr:`default_lr`)."""
        return torch.optim.Adam(self.denoiser.parameters(), lr=lr)
