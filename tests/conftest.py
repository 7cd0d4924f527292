"""Fixtures shared by more than one test folder."""

import pytest
import torch


@pytest.fixture
def attribute_pipeline():
    """A factory of randomly initialised tiny ``AttributeDiffusionPipeline``s (attributes with 2 and 3
    values, 16-pixel images, ``num_layers`` joint blocks), seeded."""

    def make(seed: int = 0, num_layers: int = 1):
        from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, SD3Transformer2DModel

        from condeval.generators.attribute_to_image import AttributeDiffusionPipeline, AttributeEncoder

        torch.manual_seed(seed)
        transformer = SD3Transformer2DModel(
            sample_size=8, patch_size=2, in_channels=4, out_channels=4, num_layers=num_layers, attention_head_dim=8,
            num_attention_heads=2, joint_attention_dim=24, caption_projection_dim=16, pooled_projection_dim=32,
            pos_embed_max_size=4,
        )  # fmt: skip
        vae = AutoencoderKL(block_out_channels=(8, 8), down_block_types=("DownEncoderBlock2D",) * 2,
                            up_block_types=("UpDecoderBlock2D",) * 2, norm_num_groups=4, latent_channels=4,
                            use_quant_conv=False, use_post_quant_conv=False)  # fmt: skip
        encoder = AttributeEncoder(values=(2, 3), width=32, context_width=24)
        return AttributeDiffusionPipeline(transformer, vae, FlowMatchEulerDiscreteScheduler(), encoder)

    return make
