"""The attribute-conditioned pipeline: it round-trips through from_pretrained, samples through __call__
independently of the batch, composes an unseen tuple from summed rows, and refuses bad tuples."""

import numpy as np
import pytest
import torch

from condeval.generators.attribute_to_image import AttributeDiffusionPipeline, AttributeEncoder, REPAProjector


def _images(pipe, attributes, seeds):
    generators = [torch.Generator().manual_seed(s) for s in seeds]
    return pipe(attributes, num_inference_steps=2, generator=generators, output_type="np").images


def test_round_trip_and_a_two_step_call(tmp_path, attribute_pipeline):
    pipe = attribute_pipeline()
    pipe.save_pretrained(tmp_path)
    loaded = AttributeDiffusionPipeline.from_pretrained(tmp_path)
    assert isinstance(loaded.attribute_encoder, AttributeEncoder) and loaded.attribute_encoder.config.values == [2, 3]
    attributes = np.array([[0, 2], [1, 0]])
    np.testing.assert_array_equal(_images(pipe, attributes, [1, 2]), _images(loaded, attributes, [1, 2]))
    assert _images(pipe, attributes, [1, 2]).shape == (2, 16, 16, 3)


def test_a_repa_projector_travels_with_the_pipeline_and_a_vanilla_one_has_none(tmp_path, attribute_pipeline):
    pipe = attribute_pipeline()
    pipe.save_pretrained(tmp_path / "vanilla")
    assert AttributeDiffusionPipeline.from_pretrained(tmp_path / "vanilla").repa_projector is None
    width = pipe.transformer.config.num_attention_heads * pipe.transformer.config.attention_head_dim
    projector = REPAProjector(width=width, hidden=8, target_dim=5, depth=1, extractor="dinov3")
    repa = AttributeDiffusionPipeline(pipe.transformer, pipe.vae, pipe.scheduler, pipe.attribute_encoder, projector)
    repa.save_pretrained(tmp_path / "repa")
    loaded = AttributeDiffusionPipeline.from_pretrained(tmp_path / "repa").repa_projector
    assert loaded.config.depth == 1 and loaded.config.extractor == "dinov3"
    tokens = torch.randn(2, 4, width)
    torch.testing.assert_close(loaded(tokens), projector(tokens))


def test_an_image_does_not_depend_on_its_batch(attribute_pipeline):
    pipe = attribute_pipeline()
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


@pytest.mark.parametrize(
    ("attributes", "error", "message"),
    [
        ([[0.6, 1.9]], TypeError, "attributes must hold integers; got dtype float64"),
        ([[2, 0]], ValueError, r"attributes\[0\] = \[2, 0\].*only for a whole row"),
        ([[1, 0], [0, 3]], ValueError, r"attributes\[1\] = \[0, 3\]"),
        ([[0, 4]], ValueError, r"0..values\[k\] - 1 \(values = \[2, 3\]\)"),
        ([[-1, 0]], ValueError, r"attributes\[0\] = \[-1, 0\]"),
        ([[0, 1, 1]], ValueError, r"\(B, 2\), one value per attribute"),
    ],
)
def test_a_requested_tuple_is_refused_by_row_before_sampling(attribute_pipeline, attributes, error, message):
    """0.6 was truncated onto value 0 (images byte for byte those of [0, 1]); [2, 0] sampled a half-dropped
    condition training never produces."""
    with pytest.raises(error, match=message):
        attribute_pipeline()(attributes, num_inference_steps=1)


def test_the_whole_dropped_row_samples_unconditionally(attribute_pipeline):
    assert _images(attribute_pipeline(), np.array([[2, 3]]), [0]).shape == (1, 16, 16, 3)


def test_pil_output_of_other_than_one_or_three_channels_is_refused_before_sampling(attribute_pipeline):
    from condeval.generators.channelwise import ChannelwiseAutoencoderKL

    pipe = attribute_pipeline()
    sites = AttributeDiffusionPipeline(
        pipe.transformer, ChannelwiseAutoencoderKL.wrapping(pipe.vae, 6), pipe.scheduler, pipe.attribute_encoder
    )
    calls = []
    with pytest.raises(ValueError, match="this generator draws 6.*output_type='np'"):
        sites([[0, 1]], num_inference_steps=2, callback_on_step_end=lambda *a: calls.append(a) or {})
    assert not calls
    with pytest.raises(ValueError, match="output_type must be one of"):
        pipe([[0, 1]], num_inference_steps=1, output_type="numpy")
