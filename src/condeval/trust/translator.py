"""Scoring during generation (Section 3.1, 5.2, Appendix L): a translator from a generator's internal
features to the extractor's space, so the same real-fitted :class:`~condeval.trust.TrustScorer`
scores a sample before it is decoded.

- :class:`Translator`: a linear skip plus a 3-layer SiLU MLP (the paper's 768 → 2048 → 1152), trained in
  Lightning (AdamW, weight decay 1e-4, cosine schedule, 5% of the images held out for validation, every t
  of each) on pairs (internal feature of a noised real training image, the image's extractor feature). The
  loss keeps what the Mahalanobis score reads, the features' spread and covariance, as well as the points
  (:func:`translator_loss`:
  ``mse·MSE + var·Σ_d (σ̂_d − σ_d)² / D + cov·Σ_{d≠e} (Ĉ_de − C_de)² / D``, the paper's weights 0.1, 1.0,
  0.04 on batch statistics). ``loss="whitened"`` is the official code's loss instead
  (:func:`whitened_translator_loss`: a tempered-whitened MSE plus relative mean and covariance matching
  against the training targets, on L2-normalised features).
- :func:`noised_latents`: real latents on the generator's own path, ``x_t = (1 − t) x_0 + t ε``
  (rectified flow, t = 1 pure noise); ``path="official"`` is the official code's ``√(1 − t) x_0 + √t ε``,
  which is not the path its generator samples on.
- :func:`internal_features`: the mean over image tokens of the denoiser's block ``layer`` (1-based)
  at a given t, read by a forward hook.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from condeval.trust.checks import attribute_rows, flags
from condeval.trust.translator_net import (  # noqa: F401 (re-exported)
    LOSS_WEIGHTS,
    LOSSES,
    NOISE_PATHS,
    WHITENED,
    StandardisedTranslator,
    TranslatorLoss,
    TranslatorNet,
    geometry_of,
    pair_moments,
    target_geometry,
    translator_loss,
    whitened_translator_loss,
)

if TYPE_CHECKING:
    import polars as pl

__all__ = [
    "ChunkPlan",
    "FeatureReadout",
    "LOSS_WEIGHTS",
    "StandardisedTranslator",
    "Translator",
    "TranslatorLoss",
    "TranslatorNet",
    "TrajectoryTap",
    "TrustAbstention",
    "compute_saved",
    "internal_features",
    "noised_latents",
    "pair_groups",
    "step_noise_levels",
    "target_geometry",
    "translator_loss",
    "translator_pairs",
    "validation_split",
    "whitened_translator_loss",
    "translator_pair_rows",
    "geometry_of",
    "pair_moments",
    "trajectory_features",
]


class Translator:
    """Internal generator features to extractor features (module description).

    Parameters
    ----------
    hidden : int
        The MLP's width (paper: 2048).
    loss : TranslatorLoss or {"paper", "whitened"}, default "paper"
        The paper's loss or the official code's, with its weights (:class:`TranslatorLoss`; a name takes
        that loss's defaults, the paper's weights 0.1, 1.0, 0.04 for ``"paper"``).
    lr, weight_decay, epochs, batch_size, val_share, seed
        Training (paper: 1e-3, 1e-4, 50, 2048, 5%).

    Examples
    --------
    >>> translator = Translator(hidden=256, epochs=20).fit(internal, siglip)   # doctest: +SKIP
    >>> cache, rows, images = translator_pair_rows(pipe, images, attributes, siglip, t, 8, "run", ChunkPlan(1024))  # doctest: +SKIP
    >>> translator.fit_rows(rows, images, run_dir="run")   # doctest: +SKIP
    >>> trust = scorer.score(translator.transform(internal_at_step), attributes)   # doctest: +SKIP
    """

    def __init__(
        self,
        hidden: int = 2048,
        loss: TranslatorLoss | str = "paper",
        lr: float = 1e-3,
        weight_decay: float = 1e-4,
        epochs: int = 50,
        batch_size: int = 2048,
        val_share: float = 0.05,
        seed: int = 0,
    ):
        loss = TranslatorLoss.of(loss)
        from condeval.core.io import check_integer

        if check_integer(batch_size, "batch_size") < 2:
            raise ValueError(f"batch_size must be at least 2 (the loss reads batch statistics); got {batch_size}")
        check_integer(hidden, "hidden", least=1)
        check_integer(epochs, "epochs", least=1)
        if isinstance(val_share, bool) or not isinstance(val_share, (int, float)) or not 0 <= val_share < 1:
            raise ValueError(f"val_share must be a fraction in [0, 1); got {val_share!r}")
        self.hidden, self.loss = hidden, loss
        self.lr, self.weight_decay, self.epochs, self.batch_size = lr, weight_decay, epochs, batch_size
        self.val_share, self.seed = val_share, seed
        self.model: StandardisedTranslator | None = None
        self.config: dict | None = None  # the module's hyperparameters, saved beside its weights

    def fit(
        self,
        internal: np.ndarray,
        target: np.ndarray,
        run_dir: str | os.PathLike | None = None,
        groups: np.ndarray | None = None,
        accelerator: str = "cpu",
    ) -> Translator:
        """Train on pairs (rows of ``internal`` (N, d_in) and ``target`` (N, d_out)); ``run_dir`` keeps
        checkpoints, so a killed fit resumes (a temporary folder when None). ``accelerator`` is
        Lightning's (``"gpu"`` trains on CUDA and raises without it); the fitted translator lives on the CPU.

        The validation split holds out whole images (:func:`validation_split`): ``groups`` (N,) names each
        pair's image; when None, pairs with the same target (bit for bit) are one image's, as
        :func:`translator_pairs` builds them (one image's extractor feature at every t)."""
        from condeval.core.rows import ArrayRows

        internal, target = _checked(internal, "internal"), _checked(target, "target")
        if len(internal) != len(target):
            raise ValueError(f"one target per internal feature: {len(internal)} against {len(target)}")
        groups = pair_groups(target) if groups is None else np.asarray(groups)
        return self.fit_rows(ArrayRows(internal, target), groups, run_dir, accelerator)

    def fit_rows(
        self, rows, groups: np.ndarray, run_dir: str | os.PathLike | None = None, accelerator: str = "cpu"
    ) -> Translator:
        """:meth:`fit` on pairs read a batch at a time: ``rows`` a dataset of ``(internal, target, ...)``
        items with an ``identity`` (:class:`condeval.core.rows.RowShards` of :func:`translator_pair_rows`),
        ``groups`` (N,) each pair's image. Statistics are accumulated a batch at a time
        (:func:`pair_moments`), so memory holds a batch, not the pairs."""
        import tempfile
        import warnings

        import pytorch_lightning as pl

        from condeval.core.rows import RowSubset
        from condeval.core.training import TrainSettings, cosine_schedule, fit
        from condeval.trust.translator_training import TranslatorModule

        groups = np.asarray(groups)
        if groups.shape != (len(rows),):
            raise ValueError(f"groups must name one group per row ({len(rows)}); got shape {groups.shape}")
        train, val = validation_split(groups, self.val_share, self.seed)
        train_rows, val_rows = RowSubset(rows, train), RowSubset(rows, val)
        moments = pair_moments(train_rows)
        net = {
            "in_dim": len(moments["mean"]),
            "out_dim": len(moments["target_mean"]),
            "hidden": self.hidden,
            "mean": moments["mean"].float().tolist(),
            "scale": moments["std"].float().clamp_min(1e-6).tolist(),
        }
        steps = self.epochs * int(np.ceil(len(train) / self.batch_size))
        pl.seed_everything(self.seed, verbose=False)
        module = TranslatorModule(
            net,
            self.loss.weights,
            cosine_schedule(self.lr, steps, max(1, steps // 20), weight_decay=self.weight_decay),
            loss=self.loss.kind,
            whitened=self.loss.whitened,
        )
        if self.loss.kind == "whitened":
            whitened = self.loss.whitened
            module.set_geometry(
                geometry_of(moments["target_mean"], moments["target_cov"], whitened["gamma"], whitened["kappa"])
            )
        with tempfile.TemporaryDirectory() as scratch, warnings.catch_warnings():
            # TranslatorModule skips a one-row batch on purpose (its batch statistics are NaN)
            warnings.filterwarnings("ignore", message=r"`training_step` returned `None`")
            settings = TrainSettings(self.epochs, self.batch_size, self.epochs, accelerator=accelerator, progress=False)
            best = fit(module, train_rows, val_rows, run_dir or scratch, settings, seed=self.seed)
            module = TranslatorModule.load_from_checkpoint(best, map_location="cpu", weights_only=True)
        self.model, self.config = module.model.eval(), dict(module.hparams)
        return self

    @torch.no_grad()
    def transform(self, internal: np.ndarray) -> np.ndarray:
        """Translated features, (N, d_out) float64."""
        if self.model is None:
            raise RuntimeError("the translator is not fitted: call fit() or Translator.load()")
        internal = _checked(internal, "internal")
        in_dim = self.config["net"]["in_dim"]
        if internal.shape[1] != in_dim:
            raise ValueError(f"internal features are {in_dim}-wide; got {internal.shape[1]}")
        return self.model(torch.as_tensor(internal, dtype=torch.float32)).double().numpy()

    def save(self, folder: str | os.PathLike) -> Path:
        """``translator.safetensors`` (weights) and ``config.json`` (plain data): nothing is pickled."""
        from safetensors.torch import save_file

        from condeval.core.io import atomic_path

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        with atomic_path(folder / "translator.safetensors") as tmp:
            save_file({k: v.contiguous() for k, v in self.model.state_dict().items()}, str(tmp))
        config = self.config | {"seed": self.seed}
        with atomic_path(folder / "config.json") as tmp:
            tmp.write_text(json.dumps(config, indent=1))
        return folder

    @classmethod
    def load(cls, folder: str | os.PathLike) -> Translator:
        from safetensors.torch import load_file

        folder = Path(folder)
        config = json.loads((folder / "config.json").read_text())
        if "net" not in config or "schedule" not in config:
            raise ValueError(
                f"{folder / 'config.json'}: a translator saved with flat keys (in_dim, lr, ...) by an earlier "
                "condeval, which this one does not read: train it again"
            )
        translator = cls(
            hidden=config["net"]["hidden"],
            loss=TranslatorLoss(config["loss"], config["weights"], config.get("whitened")),
            lr=config["schedule"]["lr"],
            weight_decay=config["schedule"]["weight_decay"],
            seed=config.get("seed", 0),
        )
        model = StandardisedTranslator(**config["net"])
        model.load_state_dict(load_file(str(folder / "translator.safetensors")))
        translator.model, translator.config = model.eval(), {k: v for k, v in config.items() if k != "seed"}
        return translator


def pair_groups(target: np.ndarray) -> np.ndarray:
    """A group id per row of ``target`` (N, D): rows equal bit for bit share one. On pairs built as
    :func:`translator_pairs` (one image's extractor feature repeated at every t) a group is an image."""
    rows = np.ascontiguousarray(target)
    keys = rows.view(np.dtype((np.void, rows.dtype.itemsize * rows.shape[1]))).ravel()
    return np.unique(keys, return_inverse=True)[1].ravel()


def validation_split(groups: np.ndarray, val_share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Row indices ``(train, val)`` with every group (an image) on one side: the groups in a seeded random
    order, validation the first of them up to at least ``max(2, round(val_share × N))`` rows. Groups count
    in order of first appearance, so rows that are each their own group split as a seeded permutation of
    the rows (the first rows of it held out)."""
    groups = np.asarray(groups)
    _, first, inverse = np.unique(groups, return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    group = rank[inverse.ravel()]  # 0, 1, ... in order of first appearance
    order = np.random.default_rng(seed).permutation(len(first))
    place = np.empty(len(first), dtype=np.int64)
    place[order] = np.arange(len(first))
    rows = np.argsort(place[group], kind="stable")  # the rows, group by group in the drawn order
    sizes = np.bincount(group, minlength=len(first))[order]
    held = int(np.searchsorted(np.cumsum(sizes), max(2, int(round(val_share * len(group)))))) + 1
    n_val = int(sizes[:held].sum())
    if held >= len(first) or len(rows) - n_val < 2:
        raise ValueError(
            f"{len(group)} rows in {len(first)} groups (images) leave too few to train on after "
            f"holding out {n_val} rows (val_share {val_share}) for validation"
        )
    return rows[n_val:], rows[:n_val]


def _noise_level(t) -> float:
    """``t`` as a noise level in [0, 1] (1: pure noise); outside it the paths extrapolate (or give NaN)."""
    if isinstance(t, bool) or not isinstance(t, (int, float, np.integer, np.floating)) or not 0 <= float(t) <= 1:
        raise ValueError(f"a noise level t must lie in [0, 1] (1: pure noise); got {t!r}")
    return float(t)


def _checked(array, name: str) -> np.ndarray:
    array = np.asarray(array, dtype=np.float32)
    if array.ndim != 2:
        raise ValueError(f"{name} features must be (N, D); got {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name} features hold NaN or infinite values")
    return array


@dataclass(frozen=True)
class FeatureReadout:
    """Which internal features of noised real images are read, and how: the path they are noised along,
    the denoiser's block whose image tokens are kept, the projector each token goes through, and the
    conditioning the denoiser is given.

    Parameters
    ----------
    layer : int >= 1
        The denoiser's block (1-based) whose mean image tokens are read.
    path : {"generator", "official"}, default "generator"
        The noise path (:func:`noised_latents`).
    project : callable, optional
        A module on (B, T, width) tokens applied before the mean (a REPA generator's projector: its
        aligned features).
    conditioning : callable, optional
        The attribute rows (B, K) to the denoiser's ``(encoder_hidden_states, pooled_projections)``; by
        default the pipeline's ``attribute_encoder`` (``AttributeDiffusionPipeline``). A pipeline
        conditioned on text (SD3's) needs it: e.g. ``pipe.encode_prompt`` of each row's prompt.

    Examples
    --------
    >>> FeatureReadout(8).path
    'generator'
    >>> FeatureReadout(8, path="ddpm")
    Traceback (most recent call last):
    ...
    ValueError: path must be one of ('generator', 'official'); got 'ddpm'
    """

    layer: int
    path: str = "generator"
    project: Callable | None = None
    conditioning: Callable | None = None

    def __post_init__(self):
        from condeval.core.io import check_integer

        check_integer(self.layer, "layer", least=1)
        if self.path not in NOISE_PATHS:
            raise ValueError(f"path must be one of {NOISE_PATHS}; got {self.path!r}")

    @classmethod
    def of(cls, readout: FeatureReadout | int) -> FeatureReadout:
        """``readout``, or the readout of block ``readout`` when it is an int (every other setting default)."""
        return readout if isinstance(readout, FeatureReadout) else cls(readout)


@dataclass(frozen=True)
class ChunkPlan:
    """How real images are taken a chunk at a time into a resumable cache
    (:class:`condeval.core.chunks.ChunkedWork`): how many per chunk, the seed each chunk's noise derives
    from, and what the images are.

    Parameters
    ----------
    chunk_size : int >= 1
        Images per chunk.
    seed : int, default 0
        With a chunk's first image, the seed of its noise (:meth:`chunk_seed`).
    fingerprint : str, optional
        What the images are (their files); with the pipeline's weights it decides whether a cache is reused.

    Examples
    --------
    >>> ChunkPlan(1024, seed=3).chunk_seed(0) == ChunkPlan(512, seed=3).chunk_seed(0)
    True
    """

    chunk_size: int
    seed: int = 0
    fingerprint: str | None = None

    def __post_init__(self):
        from condeval.core.io import check_integer

        check_integer(self.chunk_size, "chunk_size", least=1)

    def chunk_seed(self, start: int) -> int:
        """The noise seed of the chunk whose first image is ``start``."""
        return int(np.random.SeedSequence([self.seed, start]).generate_state(1)[0] >> 1)


def noised_latents(latents: torch.Tensor, t: torch.Tensor, noise: torch.Tensor, path: str = "generator"):
    """Latents at noise level ``t`` (B,) in [0, 1] (1: pure noise): the generator's rectified-flow path
    ``(1 − t) x + t ε``, or the official code's ``√(1 − t) x + √t ε`` (``path="official"``)."""
    if path not in NOISE_PATHS:
        raise ValueError(f"path must be one of {NOISE_PATHS}; got {path!r}")
    t = t.reshape(-1, *([1] * (latents.ndim - 1))).to(latents)
    if path == "generator":
        return (1 - t) * latents + t * noise
    return torch.sqrt(1 - t) * latents + torch.sqrt(t) * noise


class _FeaturesKept(Exception):
    """Raised by a stopping tap once it holds its block's features: the blocks above are never run."""


class _TokenTap:
    """A forward hook on a joint block that keeps the mean of its image tokens (each token through
    ``project`` first, when given); with ``stop``, it then ends the forward pass (:class:`_FeaturesKept`)."""

    def __init__(self, block: torch.nn.Module, project=None, stop: bool = False):
        self.features: torch.Tensor | None = None
        self.project, self.stop = project, stop
        self.handle = block.register_forward_hook(self)

    def __call__(self, module, inputs, output):
        tokens = output[1] if isinstance(output, tuple) else output  # a joint block returns (context, image tokens)
        if self.project is not None:
            tokens = self.project(tokens)
        self.features = tokens.mean(dim=1)
        if self.stop:
            raise _FeaturesKept


def block_of(transformer, layer: int) -> torch.nn.Module:
    """The denoiser's block ``layer`` (1-based), checked."""
    blocks = transformer.transformer_blocks
    if not 1 <= layer <= len(blocks):
        raise ValueError(f"layer must be within 1..{len(blocks)} (the denoiser's blocks); got {layer}")
    return blocks[layer - 1]


def _conditioning_of(pipe, conditioning):
    """``conditioning``, or an attribute pipeline's own encoder; a pipeline without one needs it given."""
    if conditioning is not None:
        return conditioning
    if not hasattr(pipe, "attribute_encoder"):
        raise ValueError(
            f"{type(pipe).__name__} has no attribute_encoder: pass conditioning= (FeatureReadout's), a function of "
            "the attribute rows (B, K) returning the denoiser's (encoder_hidden_states, pooled_projections) for them "
            "(for SD3's pipelines, pipe.encode_prompt of each row's prompt)"
        )
    device = next(pipe.transformer.parameters()).device
    return lambda attributes: pipe.attribute_encoder(torch.as_tensor(attribute_rows(attributes), device=device))


@torch.no_grad()
def internal_features(
    pipe,
    latents: torch.Tensor,
    attributes,
    t: float,
    readout: FeatureReadout | int,
    *,
    generator=None,
    noise: torch.Tensor | None = None,
) -> np.ndarray:
    """The denoiser's block-``readout.layer`` image tokens, mean-pooled, for clean ``latents`` (B, C, H, W)
    (as the transformer sees them: shifted and scaled) noised to ``t`` along ``readout.path`` with their
    ``attributes`` (B, K); each token through ``readout.project`` first when given (a REPA generator's
    projector: its aligned features), the denoiser conditioned by ``readout.conditioning``
    (:class:`FeatureReadout`; an int is the readout of that block). The noise is ``noise``, or drawn
    from ``generator``.
    """
    readout = FeatureReadout.of(readout)
    layer, path, project, conditioning = readout.layer, readout.path, readout.project, readout.conditioning
    t = _noise_level(t)
    weight = next(pipe.transformer.parameters())
    device, dtype = weight.device, weight.dtype  # a pipeline loaded in bfloat16 reads bfloat16 inputs
    latents = latents.to(device, dtype)
    if noise is None:
        noise = torch.randn(latents.shape, generator=generator, device="cpu")
    noise = noise.to(device, dtype)
    times = torch.full((len(latents),), float(t), device=device, dtype=dtype)
    context, pooled = _conditioning_of(pipe, conditioning)(np.asarray(attributes))
    if len(context) != len(latents) or len(pooled) != len(latents):
        raise ValueError(f"conditioning returned {len(context)} and {len(pooled)} rows for {len(latents)} latents")
    tap = _TokenTap(block_of(pipe.transformer, layer), project, stop=True)
    try:
        # the scheduler's timesteps are sigma × num_train_timesteps
        timestep = times * pipe.scheduler.config.num_train_timesteps
        pipe.transformer(
            hidden_states=noised_latents(latents, times, noise, path),
            timestep=timestep,
            encoder_hidden_states=context.to(device, dtype),
            pooled_projections=pooled.to(device, dtype),
        )
    except _FeaturesKept:
        pass
    finally:
        tap.handle.remove()
    return tap.features.float().cpu().numpy()


class TrajectoryTap:
    """A step-end callback (diffusers' ``callback_on_step_end``) that keeps, at the chosen denoising
    ``steps`` (0-based), the mean image tokens of the denoiser's block ``layer``.

    ``features(step)`` is (B, width), every call's rows in order (one pipeline call per batch).
    Under classifier-free guidance (SD3's pipelines batch the unconditional half first),
    ``conditional_half=True`` keeps the second half's rows. ``project`` (a module on (B, T, width)
    tokens) maps each token before the mean: :meth:`aligned` reads a REPA generator's aligned features
    that way. ``close()`` removes the hook.
    """

    def __init__(self, transformer, layer: int, steps, conditional_half: bool = False, project=None):
        from condeval.core.io import check_integer

        steps = sorted({check_integer(step, "steps", least=0) for step in steps})
        self.steps, self.conditional_half = steps, conditional_half
        self.tap = _TokenTap(block_of(transformer, layer), project)
        self.kept: dict[int, list[np.ndarray]] = {step: [] for step in self.steps}

    @classmethod
    def aligned(cls, pipe, steps, conditional_half: bool = False) -> TrajectoryTap:
        """The tap of a REPA generator's aligned features ("REPA aligned_mean", Appendix L.1): its block
        ``repa_projector.config.depth`` tokens through its saved projector, mean-pooled, in the space of
        the extractor it was aligned to (``repa_projector.config.extractor``)."""
        projector = getattr(pipe, "repa_projector", None)
        if projector is None:
            raise ValueError(
                f"{type(pipe).__name__} has no repa_projector: only a REPA-trained generator has aligned features"
            )
        return cls(pipe.transformer, projector.config.depth, steps, conditional_half, project=projector)

    def features(self, step: int) -> np.ndarray:
        if not self.kept.get(step):
            raise KeyError(f"no features kept at step {step} (steps: {self.steps})")
        return np.concatenate(self.kept[step])

    def _current(self) -> np.ndarray:
        features = self.tap.features
        if self.conditional_half:
            features = features[len(features) // 2 :]
        return features.float().cpu().numpy()

    def __call__(self, pipe, step: int, timestep, callback_kwargs: dict) -> dict:
        if step in self.kept:
            self.kept[step].append(self._current())
        return {}

    def close(self) -> None:
        self.tap.handle.remove()


class TrustAbstention:
    """The generation callback that scores mid-trajectory and abstains (Section 3.1, "online abstention").

    At the one denoising step of ``tap`` (a :class:`TrajectoryTap` of one step, which says the block, the
    guided half and the projector) the denoiser's features are translated (``translator``, a fitted
    :class:`Translator`; without one they are scored as they are, e.g. the REPA-aligned features of
    :meth:`TrajectoryTap.aligned`), scored by ``scorer``, a real-fitted :class:`~condeval.trust.TrustScorer`, against the
    requested ``attributes`` (N, K) in the scorer's attribute order, and a sample abstains when its trust
    exceeds its condition's threshold: ``thresholds``, a :meth:`TrustScorer.thresholds` table, by default
    the scorer's own P95-real thresholds (a condition without one falls back to the seen conditions at the
    minimum Hamming distance, as after generation). ``abstained`` (B,) and
    ``trust`` (B,) hold the decisions. When every sample abstains the pipeline is interrupted
    (``pipe._interrupt``); per sample, the steps left, the decoder pass and the extractor pass are what
    abstention saves (:func:`compute_saved`). Works with any pipeline that calls ``callback_on_step_end``
    and whose denoiser has ``transformer_blocks`` (``AttributeDiffusionPipeline``, SD3's).

    With ``drop=True`` the abstained samples leave the batch at the step, so the saving is made, not
    only counted: the callback returns the rows of every tensor it was handed that belong to the kept
    samples (under the tap's ``conditional_half``, both halves of a guided batch's conditioning), and the pipeline
    denoises and decodes only those; ``kept_rows`` (the requested rows, in output order) maps its images back.
    When every sample abstains the pipeline is interrupted, as without ``drop``, and its unfinished
    images are to be discarded (``kept_rows`` is empty).
    The pipeline must hand over its conditioning with the latents:
    ``callback_on_step_end_tensor_inputs=["latents", "attributes"]`` (``AttributeDiffusionPipeline``)
    or ``["latents", "prompt_embeds", "pooled_prompt_embeds"]`` (SD3's, which replaces all three).

    Examples
    --------
    A one-block stand-in denoiser, its step run by hand (a pipeline runs it and calls the callback):

    >>> import numpy as np, torch
    >>> from types import SimpleNamespace
    >>> from condeval.trust import TrustAbstention, TrustScorer
    >>> from condeval.trust.translator import TrajectoryTap
    >>> rng = np.random.default_rng(0)
    >>> attributes = rng.integers(0, 2, size=(400, 2))
    >>> features = rng.normal(size=(400, 8)) + 2 * attributes @ rng.normal(size=(2, 8))
    >>> scorer = TrustScorer().fit(features, attributes)  # real features in the block's space: no translator
    >>> denoiser = SimpleNamespace(transformer_blocks=torch.nn.ModuleList([torch.nn.Identity()]))
    >>> requested = np.array([[1, 1], [1, 0], [0, 0], [1, 1]])  # features[:4] are of (1, 1), (1, 0), (0, 0), (0, 0)
    >>> callback = TrustAbstention(TrajectoryTap(denoiser, layer=1, steps=[0]), scorer, requested)
    >>> _ = denoiser.transformer_blocks[0](torch.tensor(features[:4, None], dtype=torch.float32))  # step 0's pass
    >>> callback(SimpleNamespace(), 0, 1000.0, {})  # callback_on_step_end after step 0
    {}
    >>> callback.abstained.tolist()  # the last sample does not show the attributes it was asked for
    [False, False, False, True]
    """

    def __init__(
        self,
        tap: TrajectoryTap,
        scorer,
        attributes,
        *,
        translator: Translator | None = None,
        thresholds: pl.DataFrame | None = None,
        drop: bool = False,
    ):
        if not isinstance(tap, TrajectoryTap) or len(tap.steps) != 1:
            raise ValueError(
                "tap must be a TrajectoryTap of one step, e.g. TrajectoryTap(pipe.transformer, layer, [step]); "
                f"got {tap!r}" + (f" with steps {tap.steps}" if isinstance(tap, TrajectoryTap) else "")
            )
        attributes = attribute_rows(attributes, name="attributes")
        if attributes.shape[1] != len(scorer.names_):
            raise ValueError(
                f"attributes have {attributes.shape[1]} columns; the scorer was fitted on {len(scorer.names_)} "
                f"({list(scorer.names_)})"
            )
        self.trajectory, self.step = tap, tap.steps[0]
        self.translator, self.scorer = translator, scorer
        self.thresholds = scorer.thresholds() if thresholds is None else thresholds
        self.attributes = attributes
        self.drop = drop
        self.abstained: np.ndarray | None = None
        self.trust: np.ndarray | None = None

    @property
    def conditional_half(self) -> bool:
        """Whether the tap keeps the conditional half of a guided batch."""
        return self.trajectory.conditional_half

    def close(self) -> None:
        """Remove the tap's hook."""
        self.trajectory.close()

    @property
    def kept_rows(self) -> np.ndarray:
        """The requested rows that did not abstain, in the order a dropping pipeline returns their images."""
        if self.abstained is None:
            raise RuntimeError(f"no decision yet: the pipeline has not reached step {self.step}")
        return np.flatnonzero(~self.abstained)

    def __call__(self, pipe, step: int, timestep, callback_kwargs: dict) -> dict:
        if step != self.step:
            if step == 0 and self.step >= getattr(pipe, "num_timesteps", self.step + 1):
                raise ValueError(
                    f"step {self.step} is not among the pipeline's {pipe.num_timesteps} denoising "
                    "steps (0-based): no sample would be scored"
                )
            return {}
        from condeval.trust.filtering import accepted_mask

        features = self._step_features()
        translated = features if self.translator is None else self.translator.transform(features)
        self.trust = self.scorer.score(translated, self.attributes)["trust"].to_numpy()
        self.abstained = ~accepted_mask(self.trust, self.attributes, self.thresholds, list(self.scorer.names_))
        if self.abstained.all():  # a pipeline's decoder may not take an empty batch: stop it instead
            pipe._interrupt = True
        elif self.drop and self.abstained.any():
            return self._kept_rows(callback_kwargs)
        return {}

    def _step_features(self) -> np.ndarray:
        """The step's features, one row per requested sample; a batch of another size is refused with the cause."""
        rows, n = len(self.trajectory.tap.features), len(self.attributes)
        if rows == (2 * n if self.conditional_half else n):
            return self.trajectory._current()
        if rows == 2 * n:
            cause = "a guided batch (classifier-free guidance) needs conditional_half=True"
        elif self.conditional_half and rows == n:
            cause = "conditional_half=True, but the batch is not guided (guidance_scale ≤ 1)"
        else:
            cause = "attributes must hold one row per sample the pipeline draws"
        raise ValueError(f"the denoiser's block ran on {rows} rows for {n} requested attribute rows: {cause}")

    def _kept_rows(self, tensors: dict) -> dict:
        """The kept samples' rows of each of ``tensors``: (B, ...) rows, or a guided batch's (2B, ...) halves."""
        if set(tensors) <= {"latents"} or ("prompt_embeds" in tensors) != ("pooled_prompt_embeds" in tensors):
            raise ValueError(
                "drop=True needs the pipeline's conditioning beside its latents: callback_on_step_end_tensor_inputs="
                "['latents', 'attributes'] (AttributeDiffusionPipeline) or ['latents', 'prompt_embeds', "
                f"'pooled_prompt_embeds'] (SD3's); got {sorted(tensors)}"
            )
        keep, n = torch.as_tensor(~self.abstained), len(self.abstained)
        kept = {}
        for name, tensor in tensors.items():
            if len(tensor) == n:
                rows = keep
            elif self.conditional_half and len(tensor) == 2 * n:
                rows = torch.cat([keep, keep])  # the unconditional half first, as SD3's pipelines batch it
            else:
                raise ValueError(
                    f"{name} has {len(tensor)} rows; the batch has {n} samples"
                    + ("" if self.conditional_half else " (a guided batch needs conditional_half=True)")
                )
            kept[name] = tensor[rows.to(tensor.device)]
        return kept


def compute_saved(abstained: np.ndarray, step: int, num_inference_steps: int) -> dict:
    """What abstaining at ``step`` (0-based) saves: the share of all denoising steps not run, and the
    decoder and extractor passes not made (one each per abstained sample)."""
    abstained = flags(abstained, name="abstained")
    step = _sampler_step(step, num_inference_steps)
    left = num_inference_steps - (step + 1)
    return {
        "steps_saved_pct": 100.0 * abstained.mean() * left / num_inference_steps,
        "decoder_passes_saved": int(abstained.sum()),
        "extractor_passes_saved": int(abstained.sum()),
        "steps_run_pct": 100.0 * (step + 1) / num_inference_steps,
    }


@torch.no_grad()
def translator_pairs(
    pipe,
    images: np.ndarray,
    attributes,
    t_values,
    readout: FeatureReadout | int,
    *,
    seed: int = 0,
    batch_size: int = 256,
) -> np.ndarray:
    """Internal features of real ``images`` (N, C, H, W) uint8 with their ``attributes``: encoded by the
    pipeline's VAE, noised to each of ``t_values`` (fresh seeded noise per t) and read as ``readout`` says
    (:class:`FeatureReadout`, see :func:`internal_features`; an int is the readout of that block);
    (len(t_values) × N, width), t-major (all images at the first t, then the next)."""
    from condeval.core.io import image_batch
    from condeval.encoders.patch_features import pixel_values
    from condeval.generators.text_to_image_training import latents_of

    readout = FeatureReadout.of(readout)
    images = image_batch(images, "images")  # uint8: floats would be scaled as pixels 0..255
    attributes = attributes if readout.conditioning is not None else attribute_rows(attributes, len(images))
    t_values = [_noise_level(t) for t in t_values]
    latents = torch.as_tensor(latents_of(pipe.vae, pixel_values(images).numpy()))
    attributes = np.asarray(attributes)
    features = []
    for k, t in enumerate(t_values):
        generator = torch.Generator().manual_seed(int(seed) * 1009 + k)
        for start in range(0, len(latents), batch_size):
            rows = slice(start, start + batch_size)
            features.append(
                internal_features(pipe, latents[rows], attributes[rows], float(t), readout, generator=generator)
            )
    return np.concatenate(features)


def translator_pair_rows(
    pipe,
    images,
    attributes,
    targets: np.ndarray,
    t_values,
    readout: FeatureReadout | int,
    cache_dir,
    chunks: ChunkPlan,
):
    """:func:`translator_pairs` of ``images`` with their ``targets``, computed chunk by chunk into a cache beside
    ``cache_dir`` and read back a batch at a time: the job holds a chunk of images, not the dataset.

    Parameters
    ----------
    pipe, attributes, t_values
        As :func:`translator_pairs`.
    images : ndarray or sequence-like
        uint8 images (N, C, H, W), or anything whose ``images[a:b]`` gives those rows (a release read from disk).
    targets : ndarray (N, D)
        Each image's extractor feature: the target of its pair at every t.
    readout : FeatureReadout or int
        The block and noise path (an int: that block on the generator's path); the cache records only
        those, so a ``project`` or ``conditioning`` is refused.
    cache_dir : path-like
        The cache is ``<cache_dir>/.pairs.chunks`` (a training run's folder); a killed job reuses its chunks.
    chunks : ChunkPlan
        Images per chunk, the seed of each chunk's noise (with its first image), and what ``images`` are
        (with the pipeline's weights it decides whether a cache is reused).

    Returns
    -------
    (condeval.core.chunks.ChunkedWork, condeval.core.rows.RowShards, ndarray)
        The cache (clear it once the translator is saved), its rows ``(internal, target, image, t)`` (t-major
        within each chunk; ``t`` the position in ``t_values``) and each row's image (its position in
        ``images``: the validation groups).
    """
    from condeval.core.chunks import ChunkedWork
    from condeval.core.rows import RowShards, save_rows

    readout, targets, attributes = _pair_inputs(images, attributes, targets, readout)
    identity = _pairs_identity(pipe, targets, attributes, t_values, readout, chunks)
    work = ChunkedWork(Path(cache_dir) / "pairs", identity, len(images), chunks.chunk_size)

    def write_chunk(items: slice, folder: Path) -> None:
        seed = chunks.chunk_seed(items.start)
        internal = translator_pairs(pipe, images[items], attributes[items], t_values, readout, seed=seed)
        save_rows(folder / "internal.npy", internal.astype(np.float32))
        save_rows(folder / "target.npy", np.tile(targets[items], (len(t_values), 1)))
        save_rows(folder / "image.npy", np.tile(np.arange(items.start, items.stop), len(t_values)))
        save_rows(folder / "t.npy", np.repeat(np.arange(len(t_values)), items.stop - items.start))

    folders = work.run(write_chunk)
    groups = np.concatenate([np.load(folder / "image.npy") for folder in folders]) if folders else np.zeros(0, int)
    return work, RowShards(folders, ("internal", "target", "image", "t")), groups


def _pair_inputs(images, attributes, targets, readout) -> tuple[FeatureReadout, np.ndarray, np.ndarray]:
    """:func:`translator_pair_rows`' readout, targets and attributes, checked."""
    readout, targets, attributes = FeatureReadout.of(readout), _checked(targets, "targets"), np.asarray(attributes)
    if readout.project is not None or readout.conditioning is not None:
        raise ValueError(
            "translator_pair_rows reads a block's own tokens: a readout's project and conditioning are not cached"
        )
    if not len(images) == len(targets) == len(attributes):
        raise ValueError(
            f"one target and attribute row per image: {len(images)} images, {len(targets)} targets, "
            f"{len(attributes)} attribute rows"
        )
    return readout, targets, attributes


def _pairs_identity(pipe, targets, attributes, t_values, readout: FeatureReadout, chunks: ChunkPlan) -> dict:
    """What a pairs cache is computed from (its chunks are reused only for the same)."""
    from condeval.core.chunks import digest
    from condeval.core.training import state_digest

    return {
        "images": chunks.fingerprint,
        "targets": digest(targets),
        "attributes": digest(attributes),
        "t": list(t_values),
        "layer": readout.layer,
        "seed": chunks.seed,
        "path": readout.path,
        "pipe": state_digest(pipe.transformer, pipe.vae),
    }


def trajectory_features(
    pipe, images, attributes, levels, taps: dict, output, chunks: ChunkPlan
) -> dict[str, np.ndarray]:
    """Real images on the samples' path: :func:`translator_pairs` of ``images`` at each of ``levels`` through each
    tap, computed a chunk of images at a time (resumable, :class:`condeval.core.chunks.ChunkedWork` beside
    ``output``) and gathered per tap and level.

    Parameters
    ----------
    pipe, attributes
        As :func:`translator_pairs`.
    images : ndarray or sequence-like
        uint8 images (N, C, H, W), or anything whose ``images[a:b]`` gives those rows (a release read from disk).
    levels : sequence of float
        Noise levels (one per scoring step), on the generator's path.
    taps : dict
        Name -> ``(layer, project)``: the block whose tokens are kept and the projector they go through (None).
    output : path-like
        What the features become (its chunks wait beside it).
    chunks : ChunkPlan
        Images per chunk, the seed of each chunk's noise (with its first image), and what ``images`` are
        (with the pipeline's weights it decides whether chunks are reused).

    Returns
    -------
    dict
        ``(name, k)`` -> features (N, width) of every image at ``levels[k]`` through tap ``name``.
    """
    from condeval.core.chunks import ChunkedWork, digest
    from condeval.core.rows import save_rows
    from condeval.core.training import state_digest

    attributes = np.asarray(attributes)
    identity = {
        "images": chunks.fingerprint,
        "attributes": digest(attributes),
        "levels": [float(t) for t in levels],
        "taps": {name: layer for name, (layer, _) in taps.items()},
        "seed": chunks.seed,
        "pipe": state_digest(*(m for m in (pipe.transformer, pipe.vae, pipe.repa_projector) if m is not None)),
    }
    work = ChunkedWork(output, identity, len(images), chunks.chunk_size)

    def write_chunk(items: slice, folder: Path) -> None:
        seed, chunk = chunks.chunk_seed(items.start), images[items]
        for name, (layer, project) in taps.items():
            readout = FeatureReadout(layer, project=project)
            kept = translator_pairs(pipe, chunk, attributes[items], levels, readout, seed=seed)
            for k, features in enumerate(np.split(kept, len(levels))):
                save_rows(folder / f"{name}-{k}.npy", features)

    folders = work.run(write_chunk)
    features = {
        (name, k): np.concatenate([np.load(folder / f"{name}-{k}.npy") for folder in folders])
        for name in taps
        for k in range(len(levels))
    }
    work.clear()
    return features


def step_noise_levels(scheduler, num_inference_steps: int, steps) -> list[float]:
    """The noise level t (1: pure noise) at which a ``num_inference_steps`` sampler runs each of its
    ``steps`` (0-based): the step's timestep over ``num_train_timesteps`` (a flow-matching scheduler's
    sigma), so that real images noised to it on the generator's path stand where the samples stand."""
    steps = [_sampler_step(step, num_inference_steps) for step in steps]
    scheduler.set_timesteps(num_inference_steps)
    total = scheduler.config.num_train_timesteps
    return [float(scheduler.timesteps[step]) / total for step in steps]


def _sampler_step(step, num_inference_steps: int) -> int:
    """``step`` as a 0-based sampler step below ``num_inference_steps`` (-1 must not read the last)."""
    from condeval.core.io import check_integer

    check_integer(num_inference_steps, "num_inference_steps", least=1)
    step = check_integer(step, "step", least=0)
    if step >= num_inference_steps:
        raise ValueError(f"step {step} is past the sampler's {num_inference_steps} steps (0-based)")
    return step
