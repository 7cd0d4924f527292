"""Feature shards: unit rows, provenance in the header, clear refusals."""

import json
import subprocess
import sys

import numpy as np
import pytest
from safetensors.numpy import save_file

from condeval.encoders.features import (
    FeatureShardError,
    check_one_encoder,
    model_identity,
    read_feature_shards,
    write_feature_shard,
)

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


def test_the_same_shard_written_by_other_processes_is_the_same_bytes(tmp_path):
    """safetensors orders the header's metadata by a per-process hash: the shard writer sorts it."""
    meta = META | {"shard": [0, 3], "preprocessing": {"size": 64}, "samples": "s.parquet", "feature": "mean"}
    code = (
        "import sys, numpy as np\n"
        "from condeval.encoders.features import write_feature_shard\n"
        f"write_feature_shard(sys.argv[1], np.arange(3), np.eye(3, 4), {meta!r})\n"
    )
    paths = [tmp_path / f"shard-{k}.safetensors" for k in range(4)]
    for path in paths:
        subprocess.run([sys.executable, "-c", code, str(path)], check=True)
    assert len({path.read_bytes() for path in paths}) == 1
    assert read_feature_shards(paths[:1])[2] == meta


def test_a_nan_feature_is_refused_naming_the_row(tmp_path):
    bad = np.ones((3, 2), np.float32)
    bad[1, 0] = np.nan
    with pytest.raises(ValueError, match="row 1"):
        write_feature_shard(tmp_path / "s.safetensors", np.arange(3), bad, META)
    assert not (tmp_path / "s.safetensors").exists()


def test_shards_of_different_encoders_do_not_mix(tmp_path):
    write_feature_shard(tmp_path / "a.safetensors", np.arange(2), np.ones((2, 2)), META)
    write_feature_shard(
        tmp_path / "b.safetensors",
        np.arange(2, 4),
        np.ones((2, 2)),
        {**META, "encoder": {"name": "bert", "weights_sha256": "def"}},
    )
    with pytest.raises(ValueError, match="another encoder"):
        read_feature_shards([tmp_path / "a.safetensors", tmp_path / "b.safetensors"])


def test_clip_encoder_reads_tokenizer_and_processor_from_their_own_folders(tmp_path):
    """The paper's CLIPs keep tokenizer and image processor elsewhere (xlm-roberta-*, laion/CLIP-ViT-*)."""
    import torch
    from transformers import CLIPModel

    from condeval.datasets.miniworld import vocabulary
    from condeval.encoders.clip import ClipSizes, clip_image_processor, tiny_clip_config
    from condeval.encoders.features import ClipEncoder
    from condeval.encoders.tokenizer import build_word_tokenizer

    tokenizer = build_word_tokenizer(vocabulary())
    torch.manual_seed(0)
    CLIPModel(
        tiny_clip_config(
            tokenizer,
            64,
            ClipSizes(vision_width=32, vision_layers=1, patch_size=16, text_width=32, text_layers=1, projection_dim=8),
        )
    ).save_pretrained(tmp_path / "model")
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    clip_image_processor(96).save_pretrained(tmp_path / "processor")
    encoder = ClipEncoder(tmp_path / "model", tokenizer=tmp_path / "tokenizer", image_processor=tmp_path / "processor")
    assert encoder.image_processor.size["shortest_edge"] == 96
    assert encoder.text_features(["a red star"]).shape == (1, 8)


def _shard(path, ids=(0, 1), features=None, meta=META):
    write_feature_shard(path, np.asarray(ids), np.ones((len(ids), 2)) if features is None else features, meta)
    return path


def test_a_shard_of_another_encoder_than_the_rules_is_refused(tmp_path):
    """A stale shard (made before the encoder was retrained) must not be read as the new encoder's."""
    path = _shard(tmp_path / "shard-0.safetensors")
    read_feature_shards([path], encoder={"weights_sha256": "abc"})
    with pytest.raises(
        FeatureShardError, match=r"shard-0.safetensors: made by encoder weights abc, but this rule uses 0123"
    ):
        read_feature_shards([path], encoder={"weights_sha256": "0123"})


def test_the_expected_encoder_can_be_its_saved_folder(tmp_path):
    folder = tmp_path / "clip"
    folder.mkdir()
    (folder / "model.safetensors").write_bytes(b"weights")
    identity = model_identity(folder)
    path = _shard(tmp_path / "s.safetensors", meta={"encoder": identity})
    read_feature_shards([path], encoder=folder)
    (folder / "model.safetensors").write_bytes(b"retrained")
    with pytest.raises(FeatureShardError, match=r"s.safetensors: made by encoder weights .* but this rule uses"):
        read_feature_shards([path], encoder=folder)


def test_image_and_caption_features_must_share_one_encoder(tmp_path):
    _, _, image = read_feature_shards([_shard(tmp_path / "image.safetensors")])
    _, _, caption = read_feature_shards(
        [_shard(tmp_path / "caption.safetensors", meta={"encoder": {"weights_sha256": "fff"}})]
    )
    check_one_encoder({"image": image, "caption_clip": image})
    with pytest.raises(FeatureShardError, match=r"one encoder.*image: abc, caption_clip: fff"):
        check_one_encoder({"image": image, "caption_clip": caption})


def _rewrite(path, **arrays):
    """A shard written past write_feature_shard's checks, as a damaged or foreign file would be."""
    save_file(
        {key: np.asarray(value) for key, value in arrays.items()},
        str(path),
        metadata={"encoder": json.dumps(META["encoder"])},
    )
    return path


def test_nan_truncated_idless_and_hashless_shards_are_refused_naming_the_file(tmp_path):
    nan = np.ones((2, 2), np.float32)
    nan[1, 1] = np.nan
    with pytest.raises(FeatureShardError, match=r"nan.safetensors: features hold NaN or inf \(row 1\)"):
        read_feature_shards([_rewrite(tmp_path / "nan.safetensors", ids=np.arange(2), features=nan)])
    with pytest.raises(FeatureShardError, match=r"noids.safetensors: the shard has no 'ids' array"):
        read_feature_shards([_rewrite(tmp_path / "noids.safetensors", features=np.ones((2, 2), np.float32))])
    with pytest.raises(FeatureShardError, match=r"short.safetensors: need features \(n, d\) and ids \(n,\)"):
        read_feature_shards(
            [_rewrite(tmp_path / "short.safetensors", ids=np.arange(3), features=np.ones((2, 2), np.float32))]
        )
    truncated = _shard(tmp_path / "cut.safetensors")
    truncated.write_bytes(truncated.read_bytes()[:-5])
    with pytest.raises(FeatureShardError, match=r"cut.safetensors: not a readable feature shard"):
        read_feature_shards([truncated])
    hashless = _shard(tmp_path / "anon.safetensors", meta={"encoder": {"name": "clip"}})
    with pytest.raises(
        FeatureShardError, match=r"anon.safetensors: the shard's metadata names no encoder weights hash"
    ):
        read_feature_shards([hashless])
    with pytest.raises(FeatureShardError, match=r"gone.safetensors: feature shard not found"):
        read_feature_shards([tmp_path / "gone.safetensors"])


def test_crel_refuses_image_and_caption_features_of_two_clips(tmp_path):
    """CReL's CLIP metric compares image and caption features: both must come from one CLIP."""
    from condeval.crel.image_to_text import aligned_features

    image = _shard(tmp_path / "image.safetensors")
    same = _shard(tmp_path / "caption-same.safetensors")
    other = _shard(tmp_path / "caption-other.safetensors", meta={"encoder": {"weights_sha256": "fff"}})
    ids, arrays = aligned_features({"image": [image], "caption_clip": [same]})
    assert ids.tolist() == [0, 1] and set(arrays) == {"image", "caption_clip"}
    with pytest.raises(FeatureShardError, match=r"one encoder.*image: abc, caption_clip: fff"):
        aligned_features({"image": [image], "caption_clip": [other]})
    aligned_features(
        {"image": [image], "caption_bert": [other]}
    )  # BERT features are another space, compared with BERT only


def test_clip_and_dino_read_images_alike_and_refuse_a_lone_str(tmp_path):
    """One interface for both image encoders (code written against image_encoder('clip', ...) works with
    'dino'); a str was read character by character (12 caption rows for 'a red circle', or '/' opened as
    an image), an array failed on a missing .convert."""
    import numpy as np
    import torch
    from PIL import Image
    from transformers import CLIPModel, Dinov2Model

    from condeval.datasets.miniworld import vocabulary
    from condeval.encoders.clip import ClipSizes, clip_image_processor, tiny_clip_config
    from condeval.encoders.dino import dino_image_processor, tiny_dinov2_config
    from condeval.encoders.features import image_encoder
    from condeval.encoders.tokenizer import build_word_tokenizer

    tokenizer = build_word_tokenizer(vocabulary())
    torch.manual_seed(0)
    config = tiny_clip_config(
        tokenizer,
        32,
        ClipSizes(vision_width=32, vision_layers=1, patch_size=16, text_width=32, text_layers=1, projection_dim=8),
    )
    CLIPModel(config).save_pretrained(tmp_path / "clip")
    tokenizer.save_pretrained(tmp_path / "clip")
    clip_image_processor(32).save_pretrained(tmp_path / "clip")
    Dinov2Model(tiny_dinov2_config(32, width=16, layers=1, heads=2)).save_pretrained(tmp_path / "dino")
    dino_image_processor(32).save_pretrained(tmp_path / "dino")
    arrays = np.random.default_rng(0).integers(0, 256, (2, 3, 32, 32), dtype=np.uint8)
    Image.fromarray(arrays[0].transpose(1, 2, 0)).save(tmp_path / "image.png")
    for name, width in (("clip", 8), ("dino", 16)):
        encoder = image_encoder(name, tmp_path / name)
        assert encoder.width == width and isinstance(encoder.feature, str)
        from_arrays = encoder.encode(torch.from_numpy(arrays))
        np.testing.assert_allclose(from_arrays[:1], encoder.image_features([tmp_path / "image.png"]), atol=1e-6)
        with pytest.raises(TypeError, match="got one path .*wrap it in a list"):
            encoder.image_features(str(tmp_path / "image.png"))
        with pytest.raises(TypeError, match="got one PIL image"):
            encoder.image_features(Image.open(tmp_path / "image.png"))
        with pytest.raises(TypeError, match=r"images\[0\] must be a PIL image or a file path; got ndarray"):
            encoder.image_features(list(arrays))
        with pytest.raises(ValueError, match=r"encodes uint8 RGB images \(N, 3, H, W\)"):
            encoder.encode(arrays.transpose(0, 2, 3, 1))
    clip = image_encoder("clip", tmp_path / "clip")
    with pytest.raises(TypeError, match="got one str 'a red circle'"):
        clip.text_features("a red circle")
    with pytest.raises(TypeError, match=r"texts\[1\] must be a str; got int"):
        clip.text_features(["a red circle", 3])


@pytest.mark.parametrize(
    ("ids", "error", "message"),
    [
        (np.array([0.5, 1.7, 2.2]), TypeError, "ids must hold integers; got dtype float64"),
        (np.array([0.0, np.nan, 2.0]), TypeError, "ids must hold integers"),
        (np.array([2**63 + 5, 1, 2], dtype=np.uint64), ValueError, "past the int64 range"),
        (np.array([True, False, True]), TypeError, "got dtype bool"),
    ],
)
def test_shard_ids_that_are_not_integers_are_refused_not_truncated(tmp_path, ids, error, message):
    """0.5 was written as id 0 and NaN as -2**63; aligned_features then lined image 10.2 up with 10."""
    with pytest.raises(error, match=message):
        write_feature_shard(tmp_path / "s.safetensors", ids, np.ones((3, 2)), META)
    assert not (tmp_path / "s.safetensors").exists()


def test_sixteen_bit_images_are_read_at_eight_bits_and_32_bit_ones_refused(tmp_path):
    """A 16-bit PNG became a white image (convert("RGB") clips at 255): CLIP cosine 1.000 with white."""
    from PIL import Image

    from condeval.encoders.inputs import rgb_images

    grey = np.arange(0, 256, dtype=np.uint8).reshape(16, 16)
    Image.fromarray(grey.astype(np.uint16) * 257).save(tmp_path / "deep.png")
    assert Image.open(tmp_path / "deep.png").mode.startswith("I;16")
    for image in rgb_images([tmp_path / "deep.png"]) + rgb_images([Image.open(tmp_path / "deep.png")]):
        np.testing.assert_array_equal(np.asarray(image)[..., 0], grey)
    with pytest.raises(ValueError, match="32-bit float image .*convert it to uint8"):
        rgb_images([Image.fromarray(grey.astype(np.float32) / 255)])
