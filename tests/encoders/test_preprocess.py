"""Checkpoints' image processors applied with torch alone, and the hub extractors on six-channel sites."""

import json

import numpy as np
import pytest
import torch

from condeval.encoders.preprocess import PROCESSOR_FILE, ImageProcessing

#: ``facebook/dinov3-vitl16-pretrain-lvd1689m``'s processor file: a class transformers 5 builds only with torchvision.
DINOV3_PROCESSOR = {
    "image_processor_type": "DINOv3ViTImageProcessorFast",
    "do_resize": True,
    "size": {"height": 224, "width": 224},
    "resample": 2,
    "do_rescale": True,
    "rescale_factor": 1 / 255,
    "do_normalize": True,
    "image_mean": [0.485, 0.456, 0.406],
    "image_std": [0.229, 0.224, 0.225],
    "do_center_crop": None,
}


@pytest.fixture
def dinov3_folder(tmp_path):
    """A DINOv3 ViT at the hub checkpoint's patch (16), registers (4) and processor, random and narrow."""
    from transformers import DINOv3ViTConfig, DINOv3ViTModel

    torch.manual_seed(0)
    config = DINOv3ViTConfig(
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        patch_size=16,
        image_size=224,
        num_register_tokens=4,
    )
    DINOv3ViTModel(config).save_pretrained(tmp_path)
    (tmp_path / PROCESSOR_FILE).write_text(json.dumps(DINOV3_PROCESSOR))
    return tmp_path


def _images(n: int, channels: int = 3, height: int = 97, width: int = 131, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, channels, height, width), dtype=np.uint8)


def test_the_hub_dinov3_folder_loads_and_reads_images_without_torchvision(dinov3_folder):
    from transformers import AutoImageProcessor

    from condeval.encoders.patch_encoder import PatchEncoder

    with pytest.raises(ImportError, match="[Tt]orchvision"):  # what loading it the library's way does here
        AutoImageProcessor.from_pretrained(str(dinov3_folder))
    encoder = PatchEncoder(dinov3_folder)
    features = encoder.encode(_images(3))
    assert features.shape == (3, 32) and features.dtype == np.float32 and np.isfinite(features).all()
    assert encoder.tokens(_images(2)).shape == (2, (224 // 16) ** 2, 32)  # patches only: no CLS, no registers


def test_image_size_reads_dinov3_at_the_official_256_pixels(dinov3_folder):
    from condeval.encoders.patch_encoder import PatchEncoder

    tokens = PatchEncoder(dinov3_folder, image_size=256).tokens(_images(2, height=256, width=256))
    assert tokens.shape == (2, 16 * 16, 32)  # SiT-B/2's 256 tokens at 256 px: REPA aligns token for token


def test_the_processing_matches_the_library_processor_of_the_same_values():
    """CLIP's processor (shortest edge 224, centre crop, bicubic, OpenAI mean and std) through transformers'
    own PIL path and through ImageProcessing: the same pixels within one uint8 level (of the resize's
    rounding) on photograph-like images. On pure noise PIL's bicubic differs by up to 14 levels at a few
    pixels: it rounds to uint8 between its horizontal and vertical passes, torch does not."""
    from transformers import CLIPImageProcessor

    library = CLIPImageProcessor(size={"shortest_edge": 224}, crop_size={"height": 224, "width": 224})
    values = library.to_dict()
    ours = ImageProcessing(
        size=None,
        shortest_edge=224,
        crop=(224, 224),
        resample="bicubic",
        rescale=values["rescale_factor"],
        mean=tuple(values["image_mean"]),
        std=tuple(values["image_std"]),
    )
    rows, columns = np.mgrid[0:300, 0:420]
    images = np.stack([rows * 0.4 + columns * 0.3, 255 - rows * 0.8, (columns * 0.6) % 256])  # ramps and an edge
    images = np.stack([np.roll(images, shift, axis=2) for shift in (0, 50, 100)]).astype(np.uint8)
    expected = library(list(images.transpose(0, 2, 3, 1)), return_tensors="pt")["pixel_values"]
    got = ours(torch.from_numpy(images))
    assert got.shape == expected.shape == (3, 3, 224, 224)
    step = 1 / 255 / min(values["image_std"])  # one uint8 level after normalisation
    difference = (got - expected).abs()
    assert difference.mean() < 0.1 * step and difference.max() <= step + 1e-5


def test_from_pretrained_reads_each_key_and_refuses_what_it_cannot_apply(tmp_path):
    (tmp_path / PROCESSOR_FILE).write_text(json.dumps(DINOV3_PROCESSOR))
    processing = ImageProcessing.from_pretrained(tmp_path)
    assert processing.size == (224, 224) and processing.resample == "bilinear" and processing.crop is None
    assert processing.mean == (0.485, 0.456, 0.406) and processing.std == (0.229, 0.224, 0.225)
    assert ImageProcessing.from_pretrained(tmp_path, side=256).output_size == (256, 256)
    (tmp_path / PROCESSOR_FILE).write_text(json.dumps({**DINOV3_PROCESSOR, "resample": 4}))
    with pytest.raises(ValueError, match=f"{PROCESSOR_FILE}: resample 4"):
        ImageProcessing.from_pretrained(tmp_path)
    with pytest.raises(FileNotFoundError, match="no preprocessor_config.json"):
        ImageProcessing.from_pretrained(tmp_path / "elsewhere")


def test_six_channel_sites_reach_an_rgb_checkpoint_as_their_composite(dinov3_folder):
    from condeval.datasets.rxrx1 import composites
    from condeval.encoders.patch_encoder import PatchEncoder

    encoder = PatchEncoder(dinov3_folder)
    sites = _images(3, channels=6, height=64, width=64)
    np.testing.assert_array_equal(encoder.encode(sites), encoder.encode(composites(sites)))
    with pytest.raises(ValueError, match="reads 3-channel images"):
        encoder.encode(_images(2, channels=4))


def test_a_composite_is_the_same_whatever_the_batch():
    from condeval.datasets.rxrx1 import composite, composites

    sites = _images(3, channels=6, height=32, width=32)
    batch = composites(sites)
    assert batch.shape == (3, 3, 32, 32) and batch.dtype == np.uint8
    for site, rgb in zip(sites, batch):
        np.testing.assert_array_equal(composite(site), rgb.transpose(1, 2, 0))
