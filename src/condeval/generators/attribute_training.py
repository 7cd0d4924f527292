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

import torch
import torch.nn.functional as F

from condeval.core.training import ScheduledModule
from condeval.generators.text_to_image_training import _noised

__all__ = ["AttributeFlowModule", "align_to_tokens"]


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
    """

    def __init__(
        self, transformer_config: dict, encoder_config: dict, lr: float = 1e-3, warmup_steps: int = 50,
        total_steps: int = 1000, weight_decay: float = 0.0, condition_dropout: float = 0.1,
        repa_coefficient: float = 0.0, repa_depth: int | None = None, target_dim: int | None = None,
        projector_width: int = 128,
    ):  # fmt: skip
        super().__init__()
        self.save_hyperparameters()
        from diffusers import SD3Transformer2DModel

        from condeval.generators.attribute_to_image import AttributeEncoder

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
            self.projector = torch.nn.Sequential(
                torch.nn.Linear(width, projector_width), torch.nn.SiLU(), torch.nn.Linear(projector_width, projector_width),
                torch.nn.SiLU(), torch.nn.Linear(projector_width, target_dim),
            )  # fmt: skip
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
