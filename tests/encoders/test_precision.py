"""bfloat16 (the paper config's precision on a GPU) against float32 on the tiny models: features and scores agree
within the stated tolerances, and every output is float32 whatever the model's precision.

Stated tolerances (measured on random tiny models, whose errors are larger than trained ones'):
- unit features: cosine to the float32 feature >= 0.999 (measured 0.99997 for CLIP, 0.9998 for DINOv3);
- cosine similarities, and the masked-minus-unmasked similarities that attention-mask sampling turns into word
  scores: within 0.02 (measured 0.005, against a spread of 0.06 between masked samples), correlation >= 0.99.
"""

import numpy as np
import pytest
import torch
from PIL import Image

FEATURE_COSINE, SIMILARITY_ERROR, SAMPLE_CORRELATION = 0.999, 0.02, 0.99


@pytest.fixture(scope="module")
def clip_folder(tmp_path_factory):
    from transformers import CLIPModel

    from condeval.datasets.miniworld import vocabulary
    from condeval.encoders.clip import ClipSizes, clip_image_processor, tiny_clip_config
    from condeval.encoders.tokenizer import build_word_tokenizer

    folder = tmp_path_factory.mktemp("clip")
    tokenizer = build_word_tokenizer(vocabulary())
    torch.manual_seed(0)
    config = tiny_clip_config(
        tokenizer,
        64,
        ClipSizes(vision_width=64, vision_layers=4, patch_size=8, text_width=64, text_layers=4, projection_dim=32),
    )
    CLIPModel(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    clip_image_processor(64).save_pretrained(folder)
    return folder


def _images(n: int, side: int = 64) -> list:
    rng = np.random.default_rng(0)
    return [Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)) for _ in range(n)]


CAPTIONS = ["a red star", "two blue circles beside a green square", "a yellow triangle above a purple moon"]


def test_clip_features_in_bfloat16_agree_with_float32(clip_folder):
    from condeval.encoders.features import ClipEncoder

    full, half = ClipEncoder(clip_folder, dtype="float32"), ClipEncoder(clip_folder, dtype="bfloat16")
    assert half.model.dtype == torch.bfloat16 and full.model.dtype == torch.float32
    images = {dtype: encoder.image_features(_images(6)) for dtype, encoder in (("32", full), ("16", half))}
    texts = {dtype: encoder.text_features(CAPTIONS) for dtype, encoder in (("32", full), ("16", half))}
    assert images["16"].dtype == texts["16"].dtype == np.float32
    assert (images["16"] * images["32"]).sum(axis=1).min() >= FEATURE_COSINE
    assert (texts["16"] * texts["32"]).sum(axis=1).min() >= FEATURE_COSINE
    similarity = {dtype: images[dtype] @ texts[dtype].T for dtype in images}
    assert np.abs(similarity["16"] - similarity["32"]).max() <= SIMILARITY_ERROR


def test_attention_mask_samples_in_bfloat16_keep_their_differences(clip_folder):
    """Word scores come from the masked samples' differences to the unmasked score, which are small: bfloat16
    rounding must stay well below their spread."""
    from condeval.crc.pos import LexiconTagger
    from condeval.crc.sampling import AttentionMaskSampler
    from condeval.encoders.features import ClipEncoder

    words = CAPTIONS[1].split()
    differences = {}
    for dtype in ("float32", "bfloat16"):
        sampler = AttentionMaskSampler(
            ClipEncoder(clip_folder, dtype=dtype),
            LexiconTagger(dict.fromkeys(words, "NOUN")),
            n_image=8,
            n_text=16,
            image_ratio=0.05,
            text_ratio=0.1,
        )
        images = torch.nn.functional.normalize(
            sampler.image_embeddings(_images(1)[0], np.random.default_rng(1)), dim=-1
        )
        texts, _ = sampler.text_embeddings(words, np.random.default_rng(2))
        cosine = (torch.nn.functional.normalize(texts, dim=-1) @ images.T).numpy()
        assert cosine.dtype == np.float32
        differences[dtype] = cosine - cosine[0, 0]
    error = np.abs(differences["bfloat16"] - differences["float32"])
    assert error.max() <= SIMILARITY_ERROR < differences["float32"].std()
    assert np.corrcoef(differences["bfloat16"].ravel(), differences["float32"].ravel())[0, 1] >= SAMPLE_CORRELATION


def test_dinov3_mean_patch_features_in_bfloat16_agree_with_float32(tmp_path):
    from transformers import DINOv3ViTConfig, DINOv3ViTModel

    from condeval.encoders.patch_encoder import PatchEncoder

    torch.manual_seed(0)
    config = DINOv3ViTConfig(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        patch_size=16,
        image_size=64,
        num_register_tokens=4,
    )
    DINOv3ViTModel(config).save_pretrained(tmp_path)
    images = np.random.default_rng(0).integers(0, 256, (4, 3, 64, 64), dtype=np.uint8)
    full = PatchEncoder(tmp_path, dtype="float32").encode(images)
    half = PatchEncoder(tmp_path, dtype="bfloat16").encode(images)
    assert half.dtype == np.float32
    unit = [features / np.linalg.norm(features, axis=1, keepdims=True) for features in (full, half)]
    assert (unit[0] * unit[1]).sum(axis=1).min() >= FEATURE_COSINE


def test_auto_is_bfloat16_on_a_gpu_and_float32_on_a_cpu():
    from condeval.core.devices import torch_dtype

    assert torch_dtype(None) is torch_dtype("auto", "cpu") is torch.float32
    assert torch_dtype("auto", "cuda") is torch.bfloat16 and torch_dtype("float16", "cpu") is torch.float16
    with pytest.raises(ValueError, match="dtype 'half' is none of"):
        torch_dtype("half")


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_a_loaded_model_logs_the_precision_its_weights_are_in(clip_folder, dtype, caplog):
    """What a job's log says of each checkpoint it loads: the precision its weights hold, read from the weights
    (the rehearsal checks it for every model of the paper config's GPU rules)."""
    from condeval.encoders.features import ClipEncoder

    with caplog.at_level("INFO", logger="condeval.core.devices"):
        encoder = ClipEncoder(clip_folder, dtype=dtype)
    assert {p.dtype for p in encoder.model.parameters()} == {getattr(torch, dtype)}
    assert f"{clip_folder}: weights in {dtype}" in caplog.text
