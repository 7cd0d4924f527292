"""Training the attribute-conditioned generator: REPA aligns the chosen block's tokens (its loss falls
and only blocks up to it receive its gradient), patch grids resample onto token grids, the condition
reaches the loss."""

import pytest
import torch

from condeval.generators.attribute_training import AttributeFlowModule, align_to_tokens

TRANSFORMER = dict(
    sample_size=8,
    patch_size=2,
    in_channels=4,
    out_channels=4,
    num_layers=2,
    attention_head_dim=8,
    num_attention_heads=2,
    joint_attention_dim=16,
    caption_projection_dim=16,
    pooled_projection_dim=16,
    pos_embed_max_size=4,
)
ENCODER = dict(values=(2, 2), width=16, context_width=16)


def _module(**kwargs):
    torch.manual_seed(0)
    return AttributeFlowModule(TRANSFORMER, ENCODER, **kwargs)


def _batch(n: int = 8, with_patches: bool = True):
    torch.manual_seed(1)
    latents, attributes = torch.randn(n, 4, 8, 8), torch.randint(0, 2, (n, 2))
    return (latents, attributes, torch.randn(n, 64, 12)) if with_patches else (latents, attributes)


def test_patch_grids_resample_onto_token_grids():
    patches = torch.arange(2 * 64 * 3, dtype=torch.float32).reshape(2, 64, 3)
    pooled = align_to_tokens(patches, 16)
    grid = patches.transpose(1, 2).reshape(2, 3, 8, 8)
    torch.testing.assert_close(pooled[:, 0], grid[:, :, :2, :2].mean(dim=(2, 3)))
    assert align_to_tokens(patches, 64) is patches and align_to_tokens(patches, 256).shape == (2, 256, 3)
    with pytest.raises(ValueError, match="square"):
        align_to_tokens(patches, 15)


def test_repa_aligns_the_chosen_block_and_its_loss_falls():
    module = _module(repa={"coefficient": 0.5, "depth": 1, "target_dim": 12, "hidden": 32})
    batch = _batch()
    optimiser = torch.optim.Adam(module.parameters(), lr=3e-3)
    alignments = []
    for _ in range(30):
        optimiser.zero_grad()
        module._loss(batch, training=False).backward()
        optimiser.step()
        with torch.no_grad():
            projected = module.projector(module._aligned)
            target = align_to_tokens(batch[2], projected.shape[1])
            alignments.append(float((1 - torch.nn.functional.cosine_similarity(projected, target, dim=-1)).mean()))
    assert module._aligned.shape == (8, 16, 16)  # (batch, 4 x 4 tokens, 2 heads x 8)
    assert alignments[-1] < 0.7 * alignments[0], alignments[::10]


def test_only_blocks_up_to_the_aligned_one_get_the_repa_gradient():
    module = _module(repa={"coefficient": 1.0, "depth": 1, "target_dim": 12})
    batch = _batch()
    module._loss(batch, training=False)
    alignment = (
        1
        - torch.nn.functional.cosine_similarity(
            module.projector(module._aligned), align_to_tokens(batch[2], 16), dim=-1
        )
    ).mean()
    alignment.backward()
    first = module.transformer.transformer_blocks[0].attn.to_q.weight.grad
    second = module.transformer.transformer_blocks[1].attn.to_q.weight.grad
    assert first is not None and first.abs().sum() > 0 and (second is None or second.abs().sum() == 0)


def test_the_condition_reaches_the_loss_and_refusals():
    module = _module()
    latents, attributes = _batch(with_patches=False)
    module._loss((latents, attributes), training=False).backward()
    assert module.attribute_encoder.tables[0].weight.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="REPA needs"):
        _module(repa={"coefficient": 0.5, "depth": 3, "target_dim": 12})
