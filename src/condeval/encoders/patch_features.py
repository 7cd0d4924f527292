"""The trust score's feature spaces: a DINOv3 ViT and a SigLIP vision tower, read as the mean of their
patch tokens (the paper's scoring and KID space is DINOv3's; SigLIP's is REPA's second teacher and the
translator's target).

Both load with ``from_pretrained`` like ``facebook/dinov3-vitl16-pretrain-lvd1689m`` and
``google/siglip-so400m-patch14-224``; the offline default builds tiny configs of the same classes.
Which tokens are the patches is one choice made here (:func:`patch_tokens`): DINOv3's sequence is
``[CLS, registers…, patches…]``, SigLIP's vision tower has patches only.
"""

from __future__ import annotations

import torch

__all__ = ["tiny_dinov3", "tiny_siglip_vision", "patch_tokens", "mean_patch_features"]


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
