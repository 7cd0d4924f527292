"""The face CLIP (Appendix J's alignment scorer offline): it reads the attributes from the pixels, and
``ClipEncoder.encode`` takes the trust track's uint8 arrays."""

import itertools

import numpy as np
import pytest

from condeval.core.training import TrainRecipe
from condeval.datasets.celeba_prompts import condition_prompts
from condeval.encoders.face_clip import render_prompted_faces, train_face_clip
from condeval.encoders.features import ClipEncoder, image_feature_encoder
from condeval.trust.scorers import clip_alignment_scores

MODEL = dict(vision_width=32, vision_layers=2, patch_size=8, text_width=32, text_layers=1, heads=4, projection_dim=32)


@pytest.fixture(scope="module")
def face_clip(tmp_path_factory):
    out = tmp_path_factory.mktemp("face_clip") / "clip"
    recipe = TrainRecipe(epochs=30, batch_size=16, lr=2e-3, held_out=20, seed=0)
    train_face_clip(out, recipe, instances=300, model={**MODEL, "image_size": 32})
    return out


@pytest.mark.slow
def test_the_face_clip_picks_the_right_prompt_far_above_chance(face_clip):
    clip = image_feature_encoder(face_clip)
    assert isinstance(clip, ClipEncoder)
    images, attributes = render_prompted_faces(320, 32, seed=99)  # faces it never saw
    arrays = np.stack([np.asarray(image).transpose(2, 0, 1) for image in images])
    embeddings = clip.encode(arrays)
    conditions = np.array(list(itertools.product([0, 1], repeat=4)))
    similarity = embeddings @ clip.text_features(condition_prompts(conditions)).T
    picked = conditions[similarity.argmax(axis=1)]
    per_attribute = (picked == attributes).mean(axis=0)
    assert (per_attribute > 0.75).all(), per_attribute  # chance 0.5
    assert (picked == attributes).all(axis=1).mean() > 4 / 16  # chance 1/16
    shuffled = np.random.default_rng(0).permutation(attributes)
    own, other = clip_alignment_scores(clip, (embeddings, attributes), (embeddings, shuffled))
    assert own.mean() < other.mean() - 0.05  # lower is better


def test_encode_reads_uint8_arrays_as_image_features_reads_pil_and_refuses_the_rest(tmp_path):
    from transformers import CLIPModel

    from condeval.datasets.celeba_prompts import prompt_vocabulary
    from condeval.encoders.clip import ClipSizes, clip_image_processor, tiny_clip_config
    from condeval.encoders.tokenizer import build_word_tokenizer

    tokenizer = build_word_tokenizer(prompt_vocabulary(), model_max_length=16)
    CLIPModel(tiny_clip_config(tokenizer, 32, ClipSizes(**MODEL, max_length=16))).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    clip_image_processor(32).save_pretrained(tmp_path)
    clip = ClipEncoder(tmp_path)
    images, _ = render_prompted_faces(5, 32, seed=1)
    arrays = np.stack([np.asarray(image).transpose(2, 0, 1) for image in images])
    np.testing.assert_allclose(clip.encode(arrays), clip.image_features(images), atol=1e-6)
    assert clip.encode(arrays).shape == (5, clip.width)
    with pytest.raises(ValueError, match="uint8 RGB"):
        clip.encode(arrays.astype(np.float32))
    with pytest.raises(ValueError, match="uint8 RGB"):
        clip.encode(np.zeros((2, 6, 32, 32), np.uint8))
