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
features are computed once from the frozen extractor, as the latents are from the frozen autoencoder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from condeval.core.training import ScheduledModule
from condeval.generators.text_to_image_training import _noised

__all__ = ["AttributeFlowModule", "align_to_tokens", "train_attribute_generator"]


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
        self, transformer_config: dict, encoder_config: dict, lr: float = 1e-3, warmup_steps: int = 50,
        total_steps: int = 1000, weight_decay: float = 0.0, condition_dropout: float = 0.1,
        repa_coefficient: float = 0.0, repa_depth: int | None = None, target_dim: int | None = None,
        projector_width: int = 128, extractor: str = "",
    ):  # fmt: skip
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
            self.projector = REPAProjector(width=width, hidden=projector_width, target_dim=target_dim,
                                           depth=repa_depth, extractor=extractor)  # fmt: skip
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
        velocity = self.transformer(hidden_states=x_t, timestep=sigma * 1000, encoder_hidden_states=context,
                                    pooled_projections=pooled).sample  # fmt: skip
        loss = (velocity - (noise - latents)).square().mean()
        if self.hparams.repa_coefficient > 0:
            projected = self.projector(self._aligned)
            target = align_to_tokens(batch[2].to(projected), projected.shape[1])
            alignment = (1.0 - F.cosine_similarity(projected, target, dim=-1)).mean()
            self.log("repa_loss" if training else "val_repa_loss", alignment, on_step=False, on_epoch=True)
            loss = loss + self.hparams.repa_coefficient * alignment
        return loss


def _denoiser_config(latents: np.ndarray, encoder_width: int, transformer: dict) -> dict:
    """An ``SD3Transformer2DModel`` config on the latents' grid: ``transformer``'s ``layers`` and ``heads``."""
    from condeval.generators.text_to_image import tiny_sd3_transformer

    model = tiny_sd3_transformer(latents.shape[-1], latents.shape[1], joint_attention_dim=encoder_width,
                                 pooled_projection_dim=encoder_width, **transformer)  # fmt: skip
    return dict(model.config)


def train_attribute_generator(
    images: np.ndarray, attributes: np.ndarray, out_dir, *, values, vae, transformer: dict, epochs: int,
    batch_size: int, lr: float, val_images: int, seed: int, condition_dropout: float = 0.1,
    repa_extractor=None, repa_coefficient: float = 0.5, repa_depth: int = 1, repa_name: str = "",
    accelerator: str = "cpu", fingerprint: str | None = None,
) -> dict:  # fmt: skip
    """Train the attribute-conditioned generator (vanilla, or REPA with ``repa_extractor``) and save
    the whole :class:`~condeval.generators.attribute_to_image.AttributeDiffusionPipeline` (with its
    REPA projector when REPA-trained).

    Parameters
    ----------
    images : ndarray
        uint8 images (N, C, H, W) of the regime's training support; the first ``val_images`` validate.
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
    epochs, batch_size, val_images, seed : int
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

    Returns
    -------
    dict
        The training summary (also ``out_dir/training.json``).
    """
    import pytorch_lightning as pl

    from condeval.core.io import check_integer, image_batch
    from condeval.encoders.patch_features import pixel_values
    from condeval.encoders.train import _steps
    from condeval.generators.attribute_to_image import AttributeDiffusionPipeline, AttributeEncoder, attribute_values
    from condeval.generators.autoencoders import image_channels
    from condeval.generators.text_to_image import flow_scheduler
    from condeval.generators.text_to_image_training import _fit_best, _run_dir, _save_folder, latents_of

    images = image_batch(images, channels=image_channels(vae))
    values = tuple(check_integer(v, f"values[{k}]", least=1) for k, v in enumerate(values))
    attributes = attribute_values(attributes, values, allow_dropped=False)
    if len(attributes) != len(images):
        raise ValueError(f"one attribute row per image: {len(images)} images, {len(attributes)} attribute rows")
    pl.seed_everything(seed, workers=True, verbose=False)
    latents = latents_of(vae, pixel_values(images).numpy())
    width = transformer.get("head_dim", 16) * transformer["heads"]
    encoder_config = dict(AttributeEncoder(values=values, width=width, context_width=width).config)
    rows = (latents, attributes)
    repa = {}
    if repa_extractor is not None:
        rows += (repa_extractor.tokens(images),)
        repa = dict(repa_coefficient=repa_coefficient, repa_depth=repa_depth, target_dim=rows[2].shape[-1],
                    extractor=repa_name)  # fmt: skip
    steps = _steps(len(images) - val_images, batch_size, epochs)
    module = AttributeFlowModule(_denoiser_config(latents, width, transformer), encoder_config, lr=lr,
                                 warmup_steps=max(1, steps // 20), total_steps=steps,
                                 condition_dropout=condition_dropout, **repa)  # fmt: skip
    out_dir = Path(out_dir)
    trained, summary = _fit_best(module, rows, _run_dir(out_dir), val_rows=val_images, epochs=epochs,
                                 batch_size=batch_size, seed=seed, accelerator=accelerator,
                                 fingerprint=fingerprint)  # fmt: skip
    pipe = AttributeDiffusionPipeline(trained.transformer, vae, flow_scheduler(), trained.attribute_encoder,
                                      getattr(trained, "projector", None))  # fmt: skip
    _save_folder(out_dir, pipe.save_pretrained, summary)
    return summary
