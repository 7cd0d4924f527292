"""The attribute-conditioned pipeline: it round-trips through from_pretrained, samples through __call__
independently of the batch, composes an unseen tuple from summed rows, and refuses bad tuples."""

import numpy as np
import pytest
import torch

from condeval.generators.attribute_to_image import AttributeDiffusionPipeline, AttributeEncoder


def _pipeline(seed: int = 0) -> AttributeDiffusionPipeline:
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler, SD3Transformer2DModel

    torch.manual_seed(seed)
    transformer = SD3Transformer2DModel(
        sample_size=8, patch_size=2, in_channels=4, out_channels=4, num_layers=1, attention_head_dim=8,
        num_attention_heads=2, joint_attention_dim=24, caption_projection_dim=16, pooled_projection_dim=32,
        pos_embed_max_size=4,
    )  # fmt: skip
    vae = AutoencoderKL(block_out_channels=(8, 8), down_block_types=("DownEncoderBlock2D",) * 2,
                        up_block_types=("UpDecoderBlock2D",) * 2, norm_num_groups=4, latent_channels=4,
                        use_quant_conv=False, use_post_quant_conv=False)  # fmt: skip
    encoder = AttributeEncoder(values=(2, 3), width=32, context_width=24)
    return AttributeDiffusionPipeline(transformer, vae, FlowMatchEulerDiscreteScheduler(), encoder)


def _images(pipe, attributes, seeds):
    generators = [torch.Generator().manual_seed(s) for s in seeds]
    return pipe(attributes, num_inference_steps=2, generator=generators, output_type="np").images


def test_round_trip_and_a_two_step_call(tmp_path):
    pipe = _pipeline()
    pipe.save_pretrained(tmp_path)
    loaded = AttributeDiffusionPipeline.from_pretrained(tmp_path)
    assert isinstance(loaded.attribute_encoder, AttributeEncoder) and loaded.attribute_encoder.config.values == [2, 3]
    attributes = np.array([[0, 2], [1, 0]])
    np.testing.assert_array_equal(_images(pipe, attributes, [1, 2]), _images(loaded, attributes, [1, 2]))
    assert _images(pipe, attributes, [1, 2]).shape == (2, 16, 16, 3)


def test_an_image_does_not_depend_on_its_batch():
    pipe = _pipeline()
    together = _images(pipe, np.array([[0, 1], [1, 2], [1, 0]]), [5, 6, 7])
    alone = _images(pipe, np.array([[1, 2]]), [6])
    np.testing.assert_allclose(alone[0], together[1], atol=1e-5)


def test_the_condition_is_a_sum_of_rows_so_an_unseen_tuple_composes():
    encoder = AttributeEncoder(values=(2, 3), width=8, context_width=4)
    a, b = encoder.tables
    _, pooled = encoder(torch.tensor([[1, 2]]))
    torch.testing.assert_close(pooled[0], a.weight[1] + b.weight[2])
    dropped = encoder.dropped(torch.tensor([[1, 2], [0, 1]]), torch.tensor([True, False]))
    assert dropped.tolist() == [[2, 3], [0, 1]]  # the extra "dropped" rows


def test_bad_tuples_are_refused():
    encoder = AttributeEncoder(values=(2, 3), width=8, context_width=4)
    with pytest.raises(ValueError, match="outside"):
        encoder(torch.tensor([[0, 4]]))
    with pytest.raises(ValueError, match=r"\(B, 2\)"):
        encoder(torch.tensor([[0, 1, 1]]))
