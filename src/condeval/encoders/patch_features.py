"""The trust score's feature spaces: a DINOv3 ViT and a SigLIP vision tower, read as the mean of their
patch tokens (the paper's scoring and KID space is DINOv3's; SigLIP's is REPA's second teacher and the
translator's target).

Both load with ``from_pretrained`` like ``facebook/dinov3-vitl16-pretrain-lvd1689m`` and
``google/siglip-so400m-patch14-224``; the offline default builds tiny configs of the same classes.
Which tokens are the patches is one choice made here (:func:`patch_tokens`): DINOv3's sequence is
``[CLS, registers…, patches…]``, SigLIP's vision tower has patches only.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from condeval.core.training import ScheduledModule

__all__ = [
    "tiny_dinov3", "tiny_siglip_vision", "patch_tokens", "mean_patch_features", "pixel_values", "augmented_views",
    "ContrastivePatchEncoder", "train_patch_encoder",
]  # fmt: skip


def tiny_dinov3(image_size: int, *, width: int = 64, layers: int = 3, heads: int = 4, patch_size: int = 8,
                registers: int = 4):  # fmt: skip
    """A randomly initialised ``DINOv3ViTModel`` of the real architecture at a CPU-trainable size."""
    from transformers import DINOv3ViTConfig, DINOv3ViTModel

    config = DINOv3ViTConfig(image_size=image_size, patch_size=patch_size, hidden_size=width, num_hidden_layers=layers,
                             num_attention_heads=heads, intermediate_size=2 * width, num_register_tokens=registers)  # fmt: skip
    return DINOv3ViTModel(config)


def tiny_siglip_vision(image_size: int, *, width: int = 64, layers: int = 3, heads: int = 4, patch_size: int = 8):
    """A randomly initialised ``SiglipVisionModel`` of the real architecture at a CPU-trainable size."""
    from transformers import SiglipVisionConfig, SiglipVisionModel

    config = SiglipVisionConfig(image_size=image_size, patch_size=patch_size, hidden_size=width,
                                num_hidden_layers=layers, num_attention_heads=heads, intermediate_size=2 * width)  # fmt: skip
    return SiglipVisionModel(config)


def patch_tokens(model, pixel_values: torch.Tensor) -> torch.Tensor:
    """(B, P, D): the final hidden states of the image patches alone (DINOv3: after its CLS and register tokens)."""
    hidden = model(pixel_values=pixel_values).last_hidden_state
    if model.config.model_type == "dinov3_vit":
        return hidden[:, 1 + model.config.num_register_tokens :]
    if model.config.model_type == "siglip_vision_model":
        return hidden
    raise ValueError(f"patch_tokens reads DINOv3 or SigLIP vision models, not {model.config.model_type!r}")


def mean_patch_features(model, pixel_values: torch.Tensor) -> torch.Tensor:
    """(B, D): the mean of the patch tokens, the trust score's image feature."""
    return patch_tokens(model, pixel_values).mean(dim=1)


# ------------------------------------------------------------------------------------ training
def pixel_values(images) -> torch.Tensor:
    """uint8 images (N, C, H, W) as the extractors read them: each channel scaled to [−1, 1]."""
    return torch.as_tensor(np.asarray(images), dtype=torch.float32) / 127.5 - 1.0


def augmented_views(images: np.ndarray, seed: int) -> np.ndarray:
    """One random view per uint8 image (N, C, H, W): a crop of 70–100% of the side resized back, a
    horizontal flip half the time, a per-channel gain in [0.8, 1.2] and pixel noise (seeded)."""
    rng = np.random.default_rng(seed)
    n, _, side, _ = images.shape
    out = np.empty_like(images)
    for i in range(n):
        crop = int(side * rng.uniform(0.7, 1.0))
        y, x = rng.integers(0, side - crop + 1, 2)
        patch = torch.as_tensor(images[i, :, y : y + crop, x : x + crop], dtype=torch.float32)[None]
        view = F.interpolate(patch, size=side, mode="bilinear", align_corners=False)[0].numpy()
        if rng.random() < 0.5:
            view = view[:, :, ::-1]
        view = view * rng.uniform(0.8, 1.2, (len(view), 1, 1)) + rng.normal(0, 4.0, view.shape)
        out[i] = np.clip(view, 0, 255).astype(np.uint8)
    return out


class ContrastivePatchEncoder(ScheduledModule):
    """Lightning wrapper: two views of each image pulled together by their mean-patch features.

    ``kind="dinov3"``: symmetric InfoNCE at ``temperature`` (view invariance, as the DINO-SIM encoder;
    DINOv3 itself self-distils). ``kind="siglip"``: SigLIP's pairwise sigmoid loss with a learnt scale
    and bias (initialised at log 10 and −10, as SigLIP's), the second view in the text's place. The
    two extractors thus differ by objective as well as by architecture.
    """

    decay_matrices_only = True

    def __init__(self, kind: str, config: dict, lr: float = 1e-3, weight_decay: float = 0.05, warmup_steps: int = 50,
                 total_steps: int = 1000, temperature: float = 0.1):  # fmt: skip
        super().__init__()
        self.save_hyperparameters()
        if kind == "dinov3":
            from transformers import DINOv3ViTConfig, DINOv3ViTModel

            self.model = DINOv3ViTModel(DINOv3ViTConfig(**config))
        elif kind == "siglip":
            from transformers import SiglipVisionConfig, SiglipVisionModel

            self.model = SiglipVisionModel(SiglipVisionConfig(**config))
            self.logit_scale = torch.nn.Parameter(torch.tensor(float(np.log(10.0))))
            self.logit_bias = torch.nn.Parameter(torch.tensor(-10.0))
        else:
            raise ValueError(f"kind must be 'dinov3' or 'siglip'; got {kind!r}")

    def _loss(self, batch, training: bool) -> torch.Tensor:
        a, b = (F.normalize(mean_patch_features(self.model, pixel_values(view)), dim=-1) for view in batch)
        if self.hparams.kind == "dinov3":
            logits = a @ b.T / self.hparams.temperature
            labels = torch.arange(len(a), device=a.device)
            return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2
        logits = a @ b.T * self.logit_scale.exp() + self.logit_bias
        signs = 2 * torch.eye(len(a), device=a.device) - 1  # +1 on the matching pairs, −1 elsewhere
        return -F.logsigmoid(signs * logits).sum() / len(a)


def train_patch_encoder(
    images: np.ndarray, out_dir, *, kind: str, model: dict, epochs: int, batch_size: int, lr: float, val_images: int,
    seed: int, temperature: float = 0.1, accelerator: str = "cpu", fingerprint: str | None = None,
) -> dict:  # fmt: skip
    """Train a tiny DINOv3 (``kind="dinov3"``) or SigLIP vision tower on two augmented views of each
    uint8 image (N, C, H, W) and ``save_pretrained`` it into ``out_dir`` (see :class:`ContrastivePatchEncoder`).

    Returns
    -------
    dict
        The training summary.
    """
    import pytorch_lightning as pl

    from condeval.encoders.train import _steps, train_and_export

    side, channels = images.shape[-1], images.shape[1]
    build = tiny_dinov3 if kind == "dinov3" else tiny_siglip_vision
    config = build(side, **model).config
    config.num_channels = channels
    pl.seed_everything(seed, workers=True, verbose=False)
    first, second = augmented_views(images, seed), augmented_views(images, seed + 1)
    steps = _steps(len(images) - val_images, batch_size, epochs)
    module = ContrastivePatchEncoder(kind, config.to_dict(), lr=lr, warmup_steps=max(1, steps // 10),
                                     total_steps=steps, temperature=temperature)  # fmt: skip
    return train_and_export(module, (first, second), out_dir, val_rows=val_images, epochs=epochs,
                            batch_size=batch_size, seed=seed, accelerator=accelerator, fingerprint=fingerprint)  # fmt: skip
