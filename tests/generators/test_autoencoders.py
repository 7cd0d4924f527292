"""The latent autoencoders: unit-variance latents for the diffusion models that read them."""

import numpy as np
import pytest
import torch

from condeval.core.training import TrainRecipe
from condeval.generators.autoencoders import fold_movq_scale, latent_statistics, tiny_movq, train_autoencoder


def _images(n=64, side=16, seed=0):
    """Smooth random colour fields in [-1, 1]."""
    g = torch.Generator().manual_seed(seed)
    coarse = torch.rand(n, 3, side // 4, side // 4, generator=g) * 2 - 1
    return torch.nn.functional.interpolate(coarse, size=side, mode="bilinear", align_corners=False)


def _random_movq():
    torch.manual_seed(0)
    movq = tiny_movq(16, channels=(32, 32)).eval()
    with torch.no_grad():  # a trained-looking scale: small latents, as the MoVQ trained here had
        movq.quant_conv.weight.mul_(0.1)
        movq.quant_conv.bias.mul_(0.1)
    return movq


def test_folding_a_scale_into_the_movq_scales_its_latents_and_keeps_its_reconstructions():
    movq, images = _random_movq(), _images()
    with torch.no_grad():
        latents = movq.encode(images).latents
        decoded = movq.decode(latents, force_not_quantize=True).sample
        fold_movq_scale(movq, 7.0)
        folded = movq.encode(images).latents
        torch.testing.assert_close(folded, 7.0 * latents, rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(movq.decode(folded, force_not_quantize=True).sample, decoded, rtol=1e-4, atol=1e-5)


def test_a_trained_movq_is_saved_with_unit_variance_latents(tmp_path):
    from diffusers import VQModel

    images = _images(96).numpy()
    summary = train_autoencoder(
        images,
        tmp_path / "vq",
        TrainRecipe(epochs=1, batch_size=32, lr=1e-3, held_out=16, seed=0),
        kind="vq",
        model={"channels": (32, 32)},
    )
    saved = VQModel.from_pretrained(tmp_path / "vq").eval()
    mean, std = latent_statistics(saved, torch.as_tensor(images[16:]))
    assert abs(std - 1.0) < 1e-3, (summary, std)
    assert np.isfinite(summary["latent_std_folded"]) and summary["latent_std_folded"] != 1.0


@pytest.mark.parametrize(
    ("images", "error", "message"),
    [
        (
            np.zeros((8, 3, 16, 16), np.uint8),
            TypeError,
            r"floats in \[-1, 1\]; got uint8 \(uint8 pixels: x / 127.5 - 1\)",
        ),
        (np.full((8, 3, 16, 16), 200.0, np.float32), ValueError, r"lie in \[-1, 1\]; got 200..200"),
        (np.zeros((8, 16, 16, 3), np.float32), ValueError, r"look like \(N, H, W, C\)"),
        (np.zeros((8, 1, 16, 16), np.float32), ValueError, "must have 3 channels"),
        (
            np.where(np.arange(8)[:, None, None, None] == 5, np.nan, np.zeros((8, 3, 16, 16), np.float32)),
            ValueError,
            r"images\[5\] holds NaN",
        ),
    ],
)
def test_images_outside_the_models_range_are_refused_before_training(tmp_path, images, error, message):
    """0..255 floats trained to a validation loss of 2e4; one NaN pixel saved a model of NaN weights."""
    with pytest.raises(error, match=message):
        train_autoencoder(
            images,
            tmp_path / "vae",
            TrainRecipe(epochs=1, batch_size=4, lr=1e-3, held_out=2, seed=0),
            kind="kl",
            model={"channels": (8, 8)},
        )
    assert not (tmp_path / "vae").exists()
