"""Feature shards: unit rows, provenance in the header, clear refusals."""
import numpy as np
import pytest

from condeval.encoders.features import read_feature_shards, write_feature_shard

META = {"encoder": {"name": "clip", "weights_sha256": "abc"}, "input": "val images"}


def test_shards_concatenate_in_order_with_their_metadata(tmp_path):
    rng = np.random.default_rng(0)
    parts = [rng.normal(size=(3, 4)).astype(np.float32), rng.normal(size=(2, 4)).astype(np.float32)]
    for k, part in enumerate(parts):
        write_feature_shard(tmp_path / f"shard-{k}.safetensors", np.arange(3 * k, 3 * k + len(part)), part, META)
    ids, features, meta = read_feature_shards([tmp_path / "shard-0.safetensors", tmp_path / "shard-1.safetensors"])
    np.testing.assert_array_equal(ids, [0, 1, 2, 3, 4])
    np.testing.assert_array_equal(features, np.vstack(parts))
    assert meta == META


def test_a_nan_feature_is_refused_naming_the_row(tmp_path):
    bad = np.ones((3, 2), np.float32)
    bad[1, 0] = np.nan
    with pytest.raises(ValueError, match="row 1"):
        write_feature_shard(tmp_path / "s.safetensors", np.arange(3), bad, META)
    assert not (tmp_path / "s.safetensors").exists()


def test_shards_of_different_encoders_do_not_mix(tmp_path):
    write_feature_shard(tmp_path / "a.safetensors", np.arange(2), np.ones((2, 2)), META)
    write_feature_shard(tmp_path / "b.safetensors", np.arange(2, 4), np.ones((2, 2)), {**META, "encoder": {"name": "bert"}})
    with pytest.raises(ValueError, match="another encoder"):
        read_feature_shards([tmp_path / "a.safetensors", tmp_path / "b.safetensors"])


def test_clip_encoder_reads_tokenizer_and_processor_from_their_own_folders(tmp_path):
    """The paper's CLIPs keep tokenizer and image processor elsewhere (xlm-roberta-*, laion/CLIP-ViT-*)."""
    import torch
    from transformers import CLIPModel

    from condeval.datasets.miniworld import vocabulary
    from condeval.encoders.clip import clip_image_processor, tiny_clip_config
    from condeval.encoders.features import ClipEncoder
    from condeval.encoders.tokenizer import build_word_tokenizer

    tokenizer = build_word_tokenizer(vocabulary())
    torch.manual_seed(0)
    CLIPModel(tiny_clip_config(tokenizer, 64, vision_width=32, vision_layers=1, patch_size=16, text_width=32, text_layers=1, projection_dim=8)).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    clip_image_processor(96).save_pretrained(tmp_path / "processor")
    encoder = ClipEncoder(tmp_path / "model", tokenizer=tmp_path / "tokenizer", image_processor=tmp_path / "processor")
    assert encoder.image_processor.size["shortest_edge"] == 96 and encoder.text_model is encoder.model
    assert encoder.text_features(["a red star"]).shape == (1, 8)
