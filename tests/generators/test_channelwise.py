"""The official code's RxRx1 autoencoding: each channel through an RGB AutoencoderKL as grey. The wrapper
encodes and decodes exactly as the RGB model does per channel, saves and loads as a diffusers model (alone
and as a generator pipeline's vae), and a generator trains and samples on its 24 latent channels."""

import subprocess
import sys

import numpy as np
import pytest
import torch

from condeval.generators.autoencoders import tiny_autoencoder_kl
from condeval.generators.channelwise import ChannelwiseAutoencoderKL, load_autoencoder


def _rgb():
    torch.manual_seed(0)
    vae = tiny_autoencoder_kl(16, channels=(8, 8), latent_channels=4).eval()
    vae.register_to_config(scaling_factor=0.5, shift_factor=0.1)
    return vae


def _sites(n: int = 3, channels: int = 6) -> torch.Tensor:
    return torch.rand(n, channels, 16, 16, generator=torch.Generator().manual_seed(1)) * 2 - 1


@torch.no_grad()
def test_each_channel_goes_through_the_rgb_model_as_grey():
    rgb, sites = _rgb(), _sites()
    wrapper = ChannelwiseAutoencoderKL.wrapping(rgb, image_channels=6).eval()
    assert wrapper.config.scaling_factor == 0.5 and wrapper.config.shift_factor == 0.1
    posterior = wrapper.encode(sites).latent_dist
    assert posterior.mean.shape == (3, 24, 8, 8)
    for c in (0, 4):
        alone = rgb.encode(sites[:, c : c + 1].repeat(1, 3, 1, 1)).latent_dist
        torch.testing.assert_close(posterior.mean[:, 4 * c : 4 * c + 4], alone.mean)
        torch.testing.assert_close(posterior.logvar[:, 4 * c : 4 * c + 4], alone.logvar)
    decoded = wrapper.decode(posterior.mean).sample
    assert decoded.shape == sites.shape
    torch.testing.assert_close(decoded[:, 4], rgb.decode(posterior.mean[:, 16:20]).sample.mean(dim=1))
    with pytest.raises(ValueError, match=r"\(B, 6, H, W\)"):
        wrapper.encode(sites[:, :3])
    with pytest.raises(ValueError, match=r"\(B, 24, h, w\)"):
        wrapper.decode(posterior.mean[:, :20])
    with pytest.raises(ValueError, match="wraps an RGB one"):
        ChannelwiseAutoencoderKL.wrapping(tiny_autoencoder_kl(16, channels=(8, 8), image_channels=6), 6)


@torch.no_grad()
def test_it_saves_and_loads_as_a_diffusers_model(tmp_path):
    rgb, sites = _rgb(), _sites()
    wrapper = ChannelwiseAutoencoderKL.wrapping(rgb, image_channels=6).eval()
    wrapper.save_pretrained(tmp_path / "channelwise")
    rgb.save_pretrained(tmp_path / "rgb")
    loaded = load_autoencoder(tmp_path / "channelwise")
    assert isinstance(loaded, ChannelwiseAutoencoderKL)
    torch.testing.assert_close(loaded.encode(sites).latent_dist.mean, wrapper.encode(sites).latent_dist.mean)
    assert type(load_autoencoder(tmp_path / "rgb")).__name__ == "AutoencoderKL"
    with pytest.raises(FileNotFoundError, match="no config.json"):
        load_autoencoder(tmp_path)


def test_a_generator_trains_on_its_latents_and_samples_six_channel_sites(tmp_path):
    from condeval.core.training import TrainRecipe
    from condeval.generators.attribute_to_image import AttributeDiffusionPipeline
    from condeval.generators.attribute_training import train_attribute_generator

    wrapper = ChannelwiseAutoencoderKL.wrapping(_rgb(), image_channels=6).eval()
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (40, 6, 16, 16), dtype=np.uint8)
    attributes = rng.integers(0, 2, (40, 2))
    summary = train_attribute_generator(
        images,
        attributes,
        tmp_path / "generator",
        TrainRecipe(epochs=1, batch_size=16, lr=1e-3, held_out=8, seed=0),
        vae=wrapper,
        model={"values": [2, 2], "layers": 1, "heads": 2},
    )
    assert summary["epochs_run"] == 1
    pipe = AttributeDiffusionPipeline.from_pretrained(str(tmp_path / "generator"))
    assert isinstance(pipe.vae, ChannelwiseAutoencoderKL) and pipe.transformer.config.in_channels == 24
    sampled = pipe(
        [[0, 1], [1, 0]], num_inference_steps=2, generator=torch.Generator().manual_seed(0), output_type="np"
    ).images
    assert sampled.shape == (2, 16, 16, 6) and np.isfinite(sampled).all()
    # a job reading the generator imports the pipeline alone: the vae's module must come with it
    load = (
        "import sys; from condeval.generators.attribute_to_image import AttributeDiffusionPipeline as P; "
        "print(type(P.from_pretrained(sys.argv[1]).vae).__name__)"
    )
    fresh = subprocess.run([sys.executable, "-c", load, str(tmp_path / "generator")], capture_output=True, text=True)
    assert fresh.stdout.strip().endswith("ChannelwiseAutoencoderKL"), fresh.stderr[-2000:]


def test_a_length_in_steps_rounds_up_to_whole_epochs_and_one_length_only_is_taken(tmp_path):
    """The paper gives its generators' training as 400k steps; the support's size sets the epochs."""
    from condeval.core.training import TrainRecipe
    from condeval.generators.attribute_training import FlowSchedule, train_attribute_generator

    wrapper = ChannelwiseAutoencoderKL.wrapping(_rgb(), image_channels=6).eval()
    images = np.random.default_rng(0).integers(0, 256, (40, 6, 16, 16), dtype=np.uint8)
    attributes = np.random.default_rng(1).integers(0, 2, (40, 2))
    recipe = TrainRecipe(epochs=None, batch_size=16, lr=1e-3, held_out=8, seed=0)
    settings = dict(vae=wrapper, model={"values": [2, 2], "layers": 1, "heads": 2})
    for epochs, steps in ((None, None), (1, 2)):
        with pytest.raises(ValueError, match="as epochs or as steps, one of the two"):
            train_attribute_generator(
                images,
                attributes,
                tmp_path / "refused",
                recipe.replace(epochs=epochs),
                schedule=FlowSchedule(steps=steps),
                **settings,
            )
    # 32 training images at batch 16: 2 steps an epoch, so 3 steps take 2 epochs
    schedule = FlowSchedule(steps=3, warmup_steps=1000)
    summary = train_attribute_generator(images, attributes, tmp_path / "g", recipe, schedule=schedule, **settings)
    assert summary["epochs_run"] == 2


@pytest.mark.parametrize(
    ("change", "error", "message"),
    [
        (
            {"images": np.zeros((4, 6, 16, 16), np.float32)},
            TypeError,
            "images must be uint8 pixels 0..255; got float32",
        ),
        ({"images": np.zeros((4, 16, 16, 6), np.uint8)}, ValueError, r"look like \(N, H, W, C\)"),
        ({"images": np.zeros((4, 3, 16, 16), np.uint8)}, ValueError, "must have 6 channels"),
        ({"attributes": np.full((4, 2), 0.5)}, TypeError, "attributes must hold integers"),
        ({"attributes": [[0, 2], [0, 0], [1, 1], [0, 1]]}, ValueError, r"attributes\[0\].*training data may not"),
        ({"attributes": [[0, 1]] * 3}, ValueError, "4 images, 3 attribute rows"),
        ({"values": [2, 0]}, ValueError, r"values\[1\] must be an integer >= 1"),
    ],
)
def test_training_data_is_refused_by_name_before_any_training(tmp_path, change, error, message):
    """Float images in [-1, 1] were rescaled as uint8 into a constant field; a value of values[k] (the
    dropped row) trained the unconditional row; 0.5 was truncated onto value 0."""
    from condeval.core.training import TrainRecipe
    from condeval.generators.attribute_training import train_attribute_generator

    arguments = {
        "images": np.zeros((4, 6, 16, 16), np.uint8),
        "attributes": [[0, 1], [1, 0], [1, 1], [0, 0]],
        "values": [2, 2],
    } | change
    wrapper = ChannelwiseAutoencoderKL.wrapping(_rgb(), image_channels=6).eval()
    with pytest.raises(error, match=message):
        train_attribute_generator(
            arguments["images"],
            arguments["attributes"],
            tmp_path / "g",
            TrainRecipe(epochs=1, batch_size=2, lr=1e-3, held_out=1, seed=0),
            vae=wrapper,
            model={"values": arguments["values"], "layers": 1, "heads": 2},
        )
    assert not (tmp_path / "g_run").exists()
