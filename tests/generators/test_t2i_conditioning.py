"""The conditioning path of a text-to-image generator is real: cut it and the requested colour is lost.

A tiny SD3 is trained briefly on lone, centred objects of four colours ("a red circle", ...); its
images are read by the nearest palette colour of their centre, a reader that is right on the real
images. The test fails when the prompt does not reach the denoiser (e.g. if training ignored the
text, or the pipeline dropped it): with the text embeddings zeroed, accuracy must fall to chance.
"""

import numpy as np
import pytest
import torch

from condeval.datasets.miniworld import COLOURS, SceneObject, render_scene
from condeval.generators import text_to_image as t2i

pytestmark = pytest.mark.slow  # trains an autoencoder and a generator (about 90 s on 2 cores)
SIDE = 32
PALETTE = ("red", "blue", "green", "yellow")
SHAPES = ("circle", "square")


def _scenes(n: int, seed: int):
    rng = np.random.default_rng(seed)
    objects = [SceneObject(str(rng.choice(SHAPES)), str(rng.choice(PALETTE)), "large", 0.5, 0.5) for _ in range(n)]
    images = [render_scene([o], rng, SIDE) for o in objects]
    return images, [f"a {o.colour} {o.shape}" for o in objects], [o.colour for o in objects]


def _read_colour(images) -> np.ndarray:
    """The palette colour nearest the mean of each image's central 6 x 6 pixels."""
    palette = np.array([COLOURS[c] for c in PALETTE], dtype=float)
    centre = np.stack([np.asarray(i, dtype=float)[13:19, 13:19].reshape(-1, 3).mean(0) for i in images])
    return np.array(PALETTE)[np.argmin(((centre[:, None] - palette[None]) ** 2).sum(-1), axis=1)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    from transformers import CLIPModel

    from condeval.core.training import TrainRecipe
    from condeval.datasets.miniworld import vocabulary
    from condeval.encoders.clip import ClipSizes, tiny_clip_config
    from condeval.encoders.tokenizer import build_word_tokenizer
    from condeval.generators.autoencoders import train_autoencoder
    from condeval.generators.text_to_image_training import (
        FlowOptions,
        FrozenEncoders,
        train_flow_generator,
        world_images,
    )

    torch.manual_seed(0)
    folder = tmp_path_factory.mktemp("conditioning")
    images, captions, _ = _scenes(1200, seed=0)
    paths = []
    for k, image in enumerate(images):
        paths.append(folder / f"{k}.png")
        image.save(paths[-1])
    pixels = world_images(paths, SIDE)
    train_autoencoder(
        pixels,
        folder / "vae",
        TrainRecipe(epochs=5, batch_size=32, lr=3e-3, held_out=100, seed=0),
        kind="kl",
        model={"channels": (16, 32)},
        crop=16,
    )
    from diffusers import AutoencoderKL

    tokenizer = t2i.pipeline_tokenizer(build_word_tokenizer(vocabulary()), 8)
    clip = CLIPModel(
        tiny_clip_config(
            tokenizer,
            SIDE,
            ClipSizes(vision_width=16, vision_layers=1, text_width=16, text_layers=1, projection_dim=16, max_length=8),
        )
    ).eval()
    t5 = t2i.tiny_t5_encoder(tokenizer, 32, layers=1)
    train_flow_generator(
        pixels,
        [[c] for c in captions],
        folder / "sd3",
        TrainRecipe(epochs=10, batch_size=32, lr=4e-3, held_out=100, seed=0),
        family="sd3",
        encoders=FrozenEncoders(clip, tokenizer, t5, max_length=8),
        vae=AutoencoderKL.from_pretrained(folder / "vae"),
        options=FlowOptions(transformer={"layers": 1, "heads": 2}),
    )
    return t2i.load_text_to_image(folder / "sd3")


def test_the_reader_is_right_on_real_images():
    images, _, colours = _scenes(100, seed=1)
    assert np.mean(_read_colour(images) == np.array(colours)) == 1.0


def test_the_requested_colour_is_drawn_and_lost_when_the_text_is_cut(trained):
    _, captions, colours = _scenes(80, seed=2)
    call = {"num_inference_steps": 10, "guidance_scale": 4.0, "height": SIDE, "width": SIDE, "max_sequence_length": 8}
    drawn = t2i.generate_images(trained, captions, list(range(80)), seed=0, progress_bar=False, **call)
    accuracy = np.mean(_read_colour(drawn) == np.array(colours))
    embeds, negative, pooled, negative_pooled = trained.encode_prompt(captions, None, None, max_sequence_length=8)
    zeros = {
        "prompt_embeds": torch.zeros_like(embeds),
        "pooled_prompt_embeds": torch.zeros_like(pooled),
        "negative_prompt_embeds": torch.zeros_like(negative),
        "negative_pooled_prompt_embeds": torch.zeros_like(negative_pooled),
    }
    generators = [torch.Generator().manual_seed(t2i.image_seed(0, i)) for i in range(80)]
    cut = trained(**zeros, generator=generators, output_type="pil", **call).images
    cut_accuracy = np.mean(_read_colour(cut) == np.array(colours))
    print(
        f"colour accuracy {accuracy:.2f} with the prompt, {cut_accuracy:.2f} with its embeddings zeroed (chance 0.25)"
    )
    assert accuracy >= 0.6
    assert cut_accuracy <= 0.45


def test_the_captions_and_frozen_encoders_identify_a_text_conditioned_run():
    """A denoiser rerun into its folder on other captions or another CLIP resumed the old run and saved it
    again byte for byte: both are now in the run's identity (core.training.fit reads frozen_identity)."""
    from condeval.generators.text_to_image_training import _TextConditioned

    torch.manual_seed(0)
    clip, other_clip = torch.nn.Linear(3, 2), torch.nn.Linear(3, 2)

    def identity(captions, encoder):
        return _TextConditioned().attach(lambda prompts, device: None, captions, (encoder,)).frozen_identity()

    same = identity([["a red square"]], clip)
    assert identity([["a red square"]], clip) == same
    assert identity([["a blue square"]], clip) != same
    assert identity([["a red square"]], other_clip) != same
