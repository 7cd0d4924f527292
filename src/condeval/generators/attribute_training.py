"""Training the attribute-conditioned generator (:mod:`condeval.generators.attribute_to_image`) in
Lightning: rectified flow on autoencoder latents, optionally with REPA.

- **Vanilla**: ``x_t = (1 − σ) x_0 + σ ε`` with σ logit-normal; the ``SD3Transformer2DModel`` predicts
  the velocity ``ε − x_0`` from the summed attribute embeddings. Whole tuples drop to the "dropped"
  rows at ``condition_dropout`` (0.1, the paper's).
- **REPA** (representation alignment, Yu et al. 2025; the paper's REPA-DINOv3 and REPA-SigLIP): the
  image tokens after block ``repa_depth`` (1-based; the paper's 8 of 12) go through a projector MLP and
  are pulled towards the extractor's patch features of the clean image by cosine,
  ``loss = flow + repa_coefficient · (1 − cos)`` averaged over tokens (the paper's coefficient 0.5).
  When the extractor's patch grid differs from the denoiser's token grid, the patch features are
  average-pooled (or interpolated) onto the token grid.

Rows are ``(latents, attributes)`` or, with REPA, ``(latents, attributes, patch_features)``; the patch
features are computed once from the frozen extractor, as the latents are from the frozen autoencoder,
chunk by chunk into files beside the run (:func:`cached_rows`), and read back a batch at a time
(:class:`condeval.core.rows.RowShards`): a job's memory is bounded by its batch and its chunk of images,
not by its dataset, and a restarted job encodes nothing twice.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from condeval.core.training import ScheduledModule
from condeval.generators.text_to_image_training import _noised

__all__ = ["AttributeFlowModule", "align_to_tokens", "cached_rows", "train_attribute_generator"]


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
    lr, warmup_steps, total_steps, weight_decay
        The optimiser schedule (:class:`~condeval.core.training.ScheduledModule`).
    condition_dropout : float
        Share of rows whose whole tuple drops to the "dropped" rows.
    repa_coefficient : float
        0 for the vanilla generator.
    repa_depth : int, optional
        The block (1-based) whose image tokens are aligned.
    target_dim : int, optional
        The extractor's feature width.
    projector_width : int
        Hidden width of the projector MLP (two SiLU layers, as REPA's).
    extractor : str
        Name of the extractor whose patch features are the target (kept in the saved projector).
    """

    def __init__(
        self,
        transformer_config: dict,
        encoder_config: dict,
        lr: float = 1e-3,
        warmup_steps: int = 50,
        total_steps: int = 1000,
        weight_decay: float = 0.0,
        condition_dropout: float = 0.1,
        repa_coefficient: float = 0.0,
        repa_depth: int | None = None,
        target_dim: int | None = None,
        projector_width: int = 128,
        extractor: str = "",
    ):
        super().__init__()
        self.save_hyperparameters()
        from diffusers import SD3Transformer2DModel

        from condeval.generators.attribute_to_image import AttributeEncoder, REPAProjector

        self.transformer = SD3Transformer2DModel.from_config(transformer_config)
        self.attribute_encoder = AttributeEncoder.from_config(encoder_config)
        self._aligned = None
        if repa_coefficient > 0:
            if (
                repa_depth is None
                or target_dim is None
                or not 1 <= repa_depth <= len(self.transformer.transformer_blocks)
            ):
                raise ValueError("REPA needs repa_depth within the denoiser's blocks and the extractor's target_dim")
            width = self.transformer.config.num_attention_heads * self.transformer.config.attention_head_dim
            self.projector = REPAProjector(
                width=width, hidden=projector_width, target_dim=target_dim, depth=repa_depth, extractor=extractor
            )
            self.transformer.transformer_blocks[repa_depth - 1].register_forward_hook(self._keep_tokens)

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
        if self.hparams.repa_coefficient > 0:
            projected = self.projector(self._aligned)
            target = align_to_tokens(batch[2].to(projected), projected.shape[1])
            alignment = (1.0 - F.cosine_similarity(projected, target, dim=-1)).mean()
            self.log("repa_loss" if training else "val_repa_loss", alignment, on_step=False, on_epoch=True)
            loss = loss + self.hparams.repa_coefficient * alignment
        return loss


def _denoiser_config(latent_shape: tuple, encoder_width: int, transformer: dict) -> dict:
    """An ``SD3Transformer2DModel`` config on the latents' grid (one latent's (C, h, w)): ``transformer``'s
    ``layers`` and ``heads``."""
    from condeval.generators.text_to_image import tiny_sd3_transformer

    model = tiny_sd3_transformer(
        latent_shape[-1],
        latent_shape[0],
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


def train_attribute_generator(
    images: np.ndarray,
    attributes: np.ndarray,
    out_dir,
    *,
    values,
    vae,
    transformer: dict,
    epochs: int | None = None,
    batch_size: int,
    lr: float,
    val_images: int,
    seed: int,
    condition_dropout: float = 0.1,
    steps: int | None = None,
    warmup_steps: int | None = None,
    repa_extractor=None,
    repa_coefficient: float = 0.5,
    repa_depth: int = 1,
    repa_name: str = "",
    accelerator: str = "cpu",
    fingerprint: str | None = None,
    chunk_size: int | None = None,
    workers: int = 0,
    stop_at: float | None = None,
) -> dict:
    """Train the attribute-conditioned generator (vanilla, or REPA with ``repa_extractor``) and save
    the whole :class:`~condeval.generators.attribute_to_image.AttributeDiffusionPipeline` (with its
    REPA projector when REPA-trained).

    Parameters
    ----------
    images : ndarray or sequence-like
        uint8 images (N, C, H, W) of the regime's training support, or anything whose ``images[a:b]`` gives
        those rows (a release read from disk a chunk at a time); the first ``val_images`` validate. They
        are encoded once into the run's row cache (:func:`cached_rows`), which training reads a batch
        at a time.
    attributes : ndarray of int, shape (N, K)
    out_dir : path-like
        Receives the pipeline (``AttributeDiffusionPipeline.from_pretrained(out_dir)``); its Lightning
        run folder is ``<out_dir>_run``.
    values : sequence of int
        How many values each attribute takes (the encoder's tables).
    vae : diffusers.AutoencoderKL
        The trained autoencoder (its shift and scale set).
    transformer : dict
        ``layers``, ``heads`` and optionally ``head_dim`` (16) and ``qk_norm`` of the ``SD3Transformer2DModel``.
    epochs, steps : int
        The training's length, one of the two: passes over the support, or optimiser steps (rounded up to
        whole epochs; the paper trains 400,000 at batch 256).
    warmup_steps : int, optional
        The learning rate's linear warm-up (the paper's 1,000); default 5% of the steps.
    batch_size, val_images, seed : int
    lr : float
    condition_dropout : float
        The paper's 0.1.
    repa_extractor : condeval.encoders.patch_encoder.PatchEncoder, optional
        Its patch tokens of the clean images (``tokens``) are REPA's target; ``None`` trains the
        vanilla generator.
    repa_coefficient, repa_depth
        The alignment's weight and block (1-based).
    repa_name : str
        The extractor's name, kept in the saved :class:`REPAProjector`.
    accelerator : str
    fingerprint : str, optional
        What the images are (their files, settings): a run folder or row cache of other inputs is not reused.
    chunk_size : int, optional
        Images read and encoded at a time into the cache (default 4 batches).
    workers : int
        Processes reading cached rows while the model trains.
    stop_at : float, optional
        The job's deadline (:func:`condeval.core.training.job_deadline`): training pauses at the last
        epoch's end before it, raising :class:`~condeval.core.training.TrainingPaused`, and the next call
        resumes (the row cache is kept).

    Returns
    -------
    dict
        The training summary (also ``out_dir/training.json``).
    """
    import pytorch_lightning as pl

    from condeval.core.io import check_integer
    from condeval.core.resources import optimizer_steps
    from condeval.generators.attribute_to_image import AttributeDiffusionPipeline, AttributeEncoder, attribute_values
    from condeval.generators.text_to_image import flow_scheduler
    from condeval.generators.text_to_image_training import _fit_best, _run_dir, _save_folder

    values = tuple(check_integer(v, f"values[{k}]", least=1) for k, v in enumerate(values))
    attributes = attribute_values(attributes, values, allow_dropped=False)
    if len(attributes) != len(images):
        raise ValueError(f"one attribute row per image: {len(images)} images, {len(attributes)} attribute rows")
    if not 0 < val_images < len(images):
        raise ValueError(f"cannot hold out {val_images} of {len(images)} training images for validation")
    pl.seed_everything(seed, workers=True, verbose=False)
    out_dir = Path(out_dir)
    cache, rows = cached_rows(
        images,
        attributes,
        vae,
        _run_dir(out_dir),
        repa_extractor=repa_extractor,
        chunk_size=chunk_size or 4 * batch_size,
        fingerprint=fingerprint,
    )
    latents, _, *tokens = rows[0]
    width = transformer.get("head_dim", 16) * transformer["heads"]
    encoder_config = dict(AttributeEncoder(values=values, width=width, context_width=width).config)
    repa = {}
    if repa_extractor is not None:
        repa = dict(
            repa_coefficient=repa_coefficient,
            repa_depth=repa_depth,
            target_dim=tokens[0].shape[-1],
            extractor=repa_name,
        )
    if (epochs is None) == (steps is None):
        raise ValueError(
            f"give the training's length as epochs or as steps, one of the two; got epochs={epochs}, steps={steps}"
        )
    batches = optimizer_steps(len(images) - val_images, batch_size, 1)
    if steps is not None:
        epochs = -(-check_integer(steps, "steps", least=1) // batches)
    steps = epochs * batches
    warmup_steps = max(1, steps // 20) if warmup_steps is None else check_integer(warmup_steps, "warmup_steps", least=1)
    module = AttributeFlowModule(
        _denoiser_config(latents.shape, width, transformer),
        encoder_config,
        lr=lr,
        warmup_steps=min(warmup_steps, steps),
        total_steps=steps,
        condition_dropout=condition_dropout,
        **repa,
    )
    trained, summary = _fit_best(
        module,
        (rows.window(val_images), rows.window(0, val_images)),
        _run_dir(out_dir),
        epochs=epochs,
        batch_size=batch_size,
        seed=seed,
        accelerator=accelerator,
        fingerprint=fingerprint,
        workers=workers,
        stop_at=stop_at,
    )
    pipe = AttributeDiffusionPipeline(
        trained.transformer, vae, flow_scheduler(), trained.attribute_encoder, getattr(trained, "projector", None)
    )
    _save_folder(out_dir, pipe.save_pretrained, summary)
    cache.clear()
    return summary
