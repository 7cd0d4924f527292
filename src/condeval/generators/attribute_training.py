"""Training the attribute-conditioned generator (:mod:`condeval.generators.attribute_to_image`) in
Lightning: rectified flow on autoencoder latents, optionally with REPA.

- **Vanilla**: ``x_t = (1 − σ) x_0 + σ ε`` with σ logit-normal; the ``SD3Transformer2DModel`` predicts
  the velocity ``ε − x_0`` from the summed attribute embeddings. Whole tuples drop to the "dropped"
  rows at ``condition_dropout`` (0.1, the paper's).
- **REPA** (representation alignment, Yu et al. 2025; the paper's REPA-DINOv3 and REPA-SigLIP): the
  image tokens after block ``depth`` (1-based; the paper's 8 of 12) go through a projector MLP and
  are pulled towards the extractor's patch features of the clean image by cosine,
  ``loss = flow + coefficient · (1 − cos)`` averaged over tokens (the paper's coefficient 0.5).
  When the extractor's patch grid differs from the denoiser's token grid, the patch features are
  average-pooled (or interpolated) onto the token grid.

Rows are ``(latents, attributes)`` or, with REPA, ``(latents, attributes, patch_features)``; the patch
features are computed once from the frozen extractor, as the latents are from the frozen autoencoder,
chunk by chunk into files beside the run (:func:`cached_rows`), and read back a batch at a time
(:class:`condeval.core.rows.RowShards`): a job's memory is bounded by its batch and its chunk of images,
not by its dataset, and a restarted job encodes nothing twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from condeval.core.settings import check_integer
from condeval.core.training import ScheduledModule, TrainRecipe, cosine_schedule
from condeval.generators.text_to_image_training import _noised

__all__ = [
    "AttributeFlowModule",
    "FlowSchedule",
    "RepaAlignment",
    "align_to_tokens",
    "cached_rows",
    "denoiser_config",
    "train_attribute_generator",
]


def align_to_tokens(patches: torch.Tensor, tokens: int) -> torch.Tensor:
    """(B, P, D) patch features on a √P × √P grid resampled to a √tokens × √tokens grid, (B, tokens, D)."""
    b, p, d = patches.shape
    side, target = round(p**0.5), round(tokens**0.5)
    if side * side != p or target * target != tokens:
        raise ValueError(f"patch ({p}) and token ({tokens}) counts must be square grids")
    if side == target:
        return patches
    grid = patches.transpose(1, 2).reshape(b, d, side, side)
    grid = F.adaptive_avg_pool2d(grid, target) if side > target else F.interpolate(grid, size=target, mode="bilinear")
    return grid.reshape(b, d, tokens).transpose(1, 2)


class AttributeFlowModule(ScheduledModule):
    """Rectified flow of an ``SD3Transformer2DModel`` conditioned by an :class:`AttributeEncoder`, with optional REPA.

    Parameters
    ----------
    transformer_config, encoder_config : dict
        Configs of the denoiser and of the attribute encoder.
    schedule : dict, optional
        The optimiser schedule (:func:`~condeval.core.training.cosine_schedule`).
    condition_dropout : float
        Share of rows whose whole tuple drops to the "dropped" rows.
    repa : dict, optional
        REPA's alignment (none: the vanilla generator), plain values a checkpoint keeps: ``coefficient``
        (> 0), ``depth`` (the block, 1-based, whose image tokens are aligned), ``target_dim`` (the
        extractor's feature width), ``extractor`` (its name, kept in the saved projector) and optional
        ``hidden`` (the projector MLP's width, two SiLU layers as REPA's; default 128).
    """

    def __init__(
        self,
        transformer_config: dict,
        encoder_config: dict,
        schedule: dict | None = None,
        condition_dropout: float = 0.1,
        repa: dict | None = None,
    ):
        super().__init__()
        self.save_hyperparameters()
        from diffusers import SD3Transformer2DModel

        from condeval.generators.attribute_to_image import AttributeEncoder, REPAProjector

        self.transformer = SD3Transformer2DModel.from_config(transformer_config)
        self.attribute_encoder = AttributeEncoder.from_config(encoder_config)
        self._aligned = None
        if repa is not None:
            depth = repa.get("depth")
            if repa.get("target_dim") is None or not (
                isinstance(depth, int) and 1 <= depth <= len(self.transformer.transformer_blocks)
            ):
                raise ValueError("REPA needs repa['depth'] within the denoiser's blocks and the extractor's target_dim")
            width = self.transformer.config.num_attention_heads * self.transformer.config.attention_head_dim
            self.projector = REPAProjector(
                width=width,
                hidden=repa.get("hidden", 128),
                target_dim=repa["target_dim"],
                depth=depth,
                extractor=repa.get("extractor", ""),
            )
            self.transformer.transformer_blocks[depth - 1].register_forward_hook(self._keep_tokens)

    def _keep_tokens(self, module, inputs, output):
        self._aligned = output[1]  # a joint block returns (context, image tokens)

    def _loss(self, batch, training: bool) -> torch.Tensor:
        latents, attributes = batch[0], batch[1].long()
        generator = None if training else torch.Generator().manual_seed(0)
        if training and self.hparams.condition_dropout > 0:
            drop = torch.rand(len(attributes), device=attributes.device) < self.hparams.condition_dropout
            attributes = self.attribute_encoder.dropped(attributes, drop)
        sigma, noise, x_t = _noised(latents, generator)
        context, pooled = self.attribute_encoder(attributes)
        velocity = self.transformer(
            hidden_states=x_t, timestep=sigma * 1000, encoder_hidden_states=context, pooled_projections=pooled
        ).sample
        loss = (velocity - (noise - latents)).square().mean()
        if self.hparams.repa is not None:
            projected = self.projector(self._aligned)
            target = align_to_tokens(batch[2].to(projected), projected.shape[1])
            alignment = (1.0 - F.cosine_similarity(projected, target, dim=-1)).mean()
            self.log("repa_loss" if training else "val_repa_loss", alignment, on_step=False, on_epoch=True)
            loss = loss + self.hparams.repa["coefficient"] * alignment
        return loss


def denoiser_config(latent_shape: tuple, encoder_width: int, transformer: dict) -> dict:
    """An ``SD3Transformer2DModel`` config on the latents' grid (one latent's (C, h, w)): ``transformer``'s
    ``layers`` and ``heads``."""
    from condeval.generators.text_to_image import tiny_sd3_transformer

    model = tiny_sd3_transformer(
        tuple(latent_shape),
        joint_attention_dim=encoder_width,
        pooled_projection_dim=encoder_width,
        **transformer,
    )
    return dict(model.config)


def cached_rows(
    images,
    attributes: np.ndarray,
    vae,
    run_dir,
    *,
    repa_extractor=None,
    chunk_size: int,
    fingerprint: str | None = None,
):
    """The training rows of ``images``, encoded once, chunk by chunk, into ``run_dir``'s row cache.

    Parameters
    ----------
    images : ndarray or sequence-like
        uint8 images (N, C, H, W), or anything whose ``images[a:b]`` gives those rows and ``len`` the
        count (e.g. a release read from disk a chunk at a time).
    attributes : ndarray of int, shape (N, K)
    vae : diffusers.AutoencoderKL
        Its latent means, scaled, are the rows' ``latents`` (float32).
    run_dir : path-like
        The training run's folder; the cache waits beside it until the model is saved.
    repa_extractor : condeval.encoders.patch_encoder.PatchEncoder, optional
        Its patch tokens of each image are the rows' ``tokens`` (stored as float16: half the disk).
    chunk_size : int
        Images read and encoded at a time.
    fingerprint : str, optional
        What ``images`` are (their files); with the autoencoder's and extractor's weights and the
        attributes it decides whether a cache of an earlier run can be reused.

    Returns
    -------
    (condeval.core.chunks.ChunkedWork, condeval.core.rows.RowShards)
        The cache (cleared once the model is saved) and its rows, in image order.
    """
    from condeval.core.chunks import ChunkedWork, digest
    from condeval.core.io import image_batch
    from condeval.core.rows import RowShards, save_rows
    from condeval.core.training import state_digest
    from condeval.encoders.patch_features import pixel_values
    from condeval.generators.autoencoders import image_channels
    from condeval.generators.text_to_image_training import latents_of

    image_batch(images[0:1], channels=image_channels(vae))  # a wrong dtype or layout refused before any file is written
    names = ("latents", "attributes") + (("tokens",) if repa_extractor is not None else ())
    identity = {
        "images": fingerprint,
        "attributes": digest(attributes),
        "vae": state_digest(vae),
        "extractor": repa_extractor.identity if repa_extractor is not None else None,
    }
    work = ChunkedWork(Path(run_dir) / "rows", identity, len(images), chunk_size)

    def write_chunk(items: slice, folder: Path) -> None:
        chunk = image_batch(images[items], channels=image_channels(vae))
        save_rows(folder / "latents.npy", latents_of(vae, pixel_values(chunk).numpy()))
        save_rows(folder / "attributes.npy", np.asarray(attributes[items], dtype=np.int64))
        if repa_extractor is not None:
            save_rows(folder / "tokens.npy", repa_extractor.tokens(chunk).astype(np.float16))

    return work, RowShards(work.run(write_chunk), names)


@dataclass(frozen=True)
class FlowSchedule:
    """How :func:`train_attribute_generator` trains, beyond its recipe.

    Parameters
    ----------
    condition_dropout : float, default 0.1
        Share of rows whose whole attribute tuple drops to the "dropped" rows (the paper's 0.1).
    steps : int >= 1, optional
        The training's length in optimiser steps, rounded up to whole epochs of the support (the paper
        trains 400,000 at batch 256); give it or the recipe's ``epochs``, one of the two.
    warmup_steps : int >= 1, optional
        The learning rate's linear warm-up (the paper's 1,000); default 5% of the steps.
    chunk_size : int, optional
        Images read and encoded at a time into the row cache (default 4 batches).
    """

    condition_dropout: float = 0.1
    steps: int | None = None
    warmup_steps: int | None = None
    chunk_size: int | None = None

    def __post_init__(self):
        for name in ("steps", "warmup_steps"):
            if getattr(self, name) is not None:
                check_integer(getattr(self, name), name, least=1)


@dataclass(frozen=True)
class RepaAlignment:
    """REPA (representation alignment) of :func:`train_attribute_generator`: the denoiser's image tokens
    after block ``depth`` pulled towards an extractor's patch features of the clean images.

    Parameters
    ----------
    extractor : condeval.encoders.patch_encoder.PatchEncoder
        Its patch tokens of the clean images (``tokens``) are the alignment's target.
    coefficient : float, default 0.5
        The alignment's weight in the loss (the paper's 0.5).
    depth : int, default 1
        The block (1-based) whose image tokens are aligned.
    name : str, default ""
        The extractor's name, kept in the saved :class:`~condeval.generators.attribute_to_image.REPAProjector`.
    """

    extractor: Any
    coefficient: float = 0.5
    depth: int = 1
    name: str = ""


def _training_length(recipe: TrainRecipe, schedule: FlowSchedule, train_rows: int) -> tuple[int, int, int]:
    """(epochs, optimiser steps, warm-up steps) of the recipe's epochs or the schedule's steps."""
    from condeval.core.resources import optimizer_steps

    epochs = recipe.epochs
    if (epochs is None) == (schedule.steps is None):
        raise ValueError(
            "give the training's length as epochs or as steps, one of the two; "
            f"got epochs={epochs}, steps={schedule.steps}"
        )
    batches = optimizer_steps(train_rows, recipe.batch_size, 1)
    if schedule.steps is not None:
        epochs = -(-schedule.steps // batches)
    steps = epochs * batches
    warmup_steps = max(1, steps // 20) if schedule.warmup_steps is None else schedule.warmup_steps
    return epochs, steps, min(warmup_steps, steps)


def _checked_attributes(attributes, values: tuple[int, ...], images: int, held_out: int) -> np.ndarray:
    """``attributes`` checked against ``values`` (no "dropped" row), one per image, with rows to train on."""
    from condeval.generators.attribute_to_image import attribute_values

    attributes = attribute_values(attributes, values, allow_dropped=False)
    if len(attributes) != images:
        raise ValueError(f"one attribute row per image: {images} images, {len(attributes)} attribute rows")
    if not held_out < images:
        raise ValueError(f"cannot hold out {held_out} of {images} training images for validation")
    return attributes


def _alignment(repa: RepaAlignment | None, tokens: list) -> dict | None:
    """:class:`AttributeFlowModule`'s ``repa`` (None for the vanilla generator); ``tokens``: a row's patch
    tokens, whose width the projector maps to."""
    if repa is None:
        return None
    return {
        "coefficient": repa.coefficient,
        "depth": repa.depth,
        "target_dim": tokens[0].shape[-1],
        "extractor": repa.name,
    }


def train_attribute_generator(
    images: np.ndarray,
    attributes: np.ndarray,
    out_dir,
    recipe: TrainRecipe,
    *,
    vae,
    model: dict,
    schedule: FlowSchedule = FlowSchedule(),
    repa: RepaAlignment | None = None,
) -> dict:
    """Train the attribute-conditioned generator (vanilla, or REPA with ``repa``) and save the whole
    :class:`~condeval.generators.attribute_to_image.AttributeDiffusionPipeline` (with its REPA projector
    when REPA-trained).

    Parameters
    ----------
    images : ndarray or sequence-like
        uint8 images (N, C, H, W) of the regime's training support, or anything whose ``images[a:b]`` gives
        those rows (a release read from disk a chunk at a time); the first ``recipe.held_out`` validate.
        They are encoded once into the run's row cache (:func:`cached_rows`), which training reads a batch
        at a time.
    attributes : ndarray of int, shape (N, K)
    out_dir : path-like
        Receives the pipeline (``AttributeDiffusionPipeline.from_pretrained(out_dir)``); its Lightning
        run folder is ``<out_dir>_run``.
    recipe : condeval.core.training.TrainRecipe
        Epochs (``None`` with the schedule's ``steps``), batch size, learning rate, held-out images, seed,
        where it runs (``workers``: processes reading cached rows while the model trains), the job's
        deadline (``stop_at``, :func:`condeval.core.training.job_deadline`: training pauses at the last
        epoch's end before it, raising :class:`~condeval.core.training.TrainingPaused`, and the next call
        resumes, the row cache kept) and the fingerprint (what the images are: a run folder or row cache
        of other inputs is not reused).
    vae : diffusers.AutoencoderKL
        The trained autoencoder (its shift and scale set).
    model : dict
        ``values`` (how many values each attribute takes: the encoder's tables) and the
        ``SD3Transformer2DModel``'s ``layers``, ``heads`` and optionally ``head_dim`` (16) and ``qk_norm``.
    schedule : FlowSchedule, default FlowSchedule()
        Condition dropout, the length in steps, the warm-up and the cache's chunk size.
    repa : RepaAlignment, optional
        REPA's extractor, weight, block and name; ``None`` trains the vanilla generator.

    Returns
    -------
    dict
        The training summary (also ``out_dir/training.json``).
    """
    import pytorch_lightning as pl

    from condeval.generators.attribute_to_image import AttributeDiffusionPipeline, AttributeEncoder
    from condeval.generators.text_to_image import flow_scheduler
    from condeval.generators.text_to_image_training import _fit_best, _run_dir, _save_folder

    transformer = dict(model)
    values = tuple(check_integer(v, f"values[{k}]", least=1) for k, v in enumerate(transformer.pop("values")))
    held_out = recipe.held_out
    attributes = _checked_attributes(attributes, values, len(images), held_out)
    epochs, steps, warmup_steps = _training_length(recipe, schedule, len(images) - held_out)
    pl.seed_everything(recipe.seed, workers=True, verbose=False)
    out_dir = Path(out_dir)
    cache, rows = cached_rows(
        images,
        attributes,
        vae,
        _run_dir(out_dir),
        repa_extractor=None if repa is None else repa.extractor,
        chunk_size=schedule.chunk_size or 4 * recipe.batch_size,
        fingerprint=recipe.fingerprint,
    )
    latents, _, *tokens = rows[0]
    width = transformer.get("head_dim", 16) * transformer["heads"]
    encoder_config = dict(AttributeEncoder(values=values, width=width, context_width=width).config)
    module = AttributeFlowModule(
        denoiser_config(latents.shape, width, transformer),
        encoder_config,
        schedule=cosine_schedule(recipe.lr, steps, warmup_steps),
        condition_dropout=schedule.condition_dropout,
        repa=_alignment(repa, tokens),
    )
    split = (rows.window(held_out), rows.window(0, held_out))
    trained, summary = _fit_best(module, split, _run_dir(out_dir), recipe, epochs=epochs)
    pipe = AttributeDiffusionPipeline(
        trained.transformer, vae, flow_scheduler(), trained.attribute_encoder, getattr(trained, "projector", None)
    )
    _save_folder(out_dir, pipe.save_pretrained, summary)
    cache.clear()
    return summary
