"""The text-to-image pipelines: real diffusers classes at tiny sizes, called and reloaded as on a cluster."""

import numpy as np
import pytest
import torch

from condeval.generators import text_to_image as t2i

SIDE = 32  # pixels; the autoencoders halve it
PROMPTS = ["a red circle", "two blue stars above a green box"]
CALL = {"num_inference_steps": 2, "height": SIDE, "width": SIDE, "max_sequence_length": 16}


@pytest.fixture(scope="module")
def tokenizer():
    from condeval.datasets.miniworld import vocabulary
    from condeval.encoders.tokenizer import build_word_tokenizer

    return t2i.pipeline_tokenizer(build_word_tokenizer(vocabulary()), 16)


@pytest.fixture(scope="module")
def clip(tokenizer):
    from transformers import CLIPModel

    from condeval.encoders.clip import ClipSizes, tiny_clip_config

    torch.manual_seed(0)
    config = tiny_clip_config(
        tokenizer,
        SIDE,
        ClipSizes(vision_width=32, vision_layers=1, text_width=16, text_layers=1, projection_dim=24, max_length=16),
    )
    return CLIPModel(config).eval()


def _random_weights(*models):
    """Draw every parameter (zero-initialised output layers would make every prompt draw the same image)."""
    torch.manual_seed(1)
    with torch.no_grad():
        for model in models:
            for parameter in model.parameters():
                parameter.normal_(0.0, 0.2)
    return models


def _sd3(clip, tokenizer, qk_norm=None):
    from condeval.generators.autoencoders import tiny_autoencoder_kl

    t5 = t2i.tiny_t5_encoder(tokenizer, 32, layers=1)
    transformer = t2i.tiny_sd3_transformer(
        (4, SIDE // 2, SIDE // 2), layers=1, heads=2, joint_attention_dim=32, pooled_projection_dim=48, qk_norm=qk_norm
    )
    _random_weights(transformer, t5)
    return t2i.build_sd3_pipeline(transformer, tiny_autoencoder_kl(SIDE, channels=(8, 16)), clip, tokenizer, t5)


def _flux(clip, tokenizer):
    from condeval.generators.autoencoders import tiny_autoencoder_kl

    t5 = t2i.tiny_t5_encoder(tokenizer, 32, layers=1)
    transformer = t2i.tiny_flux_transformer(
        4, layers=1, single_layers=1, heads=2, joint_attention_dim=32, pooled_projection_dim=16
    )
    _random_weights(transformer, t5)
    return t2i.build_flux_pipeline(transformer, tiny_autoencoder_kl(SIDE, channels=(8, 16)), clip, tokenizer, t5)


def _kandinsky(clip, tokenizer):
    from condeval.encoders.clip import clip_image_processor
    from condeval.generators.autoencoders import tiny_movq

    basis = torch.linalg.qr(torch.randn(24, 16))[0].T
    text, image = t2i.kandinsky_clip(clip, basis)
    prior = t2i.tiny_kandinsky_prior(16, 16, layers=1, heads=2)
    unet = t2i.tiny_kandinsky_unet(SIDE // 2, 4, 16, channels=(32, 32))
    _random_weights(prior, unet)
    prior.clip_std.data.fill_(1.0)
    return t2i.build_kandinsky_pipelines(
        prior, unet, tiny_movq(SIDE, channels=(32, 32)), text, image, tokenizer, clip_image_processor(SIDE)
    )


@pytest.fixture(scope="module")
def saved(clip, tokenizer, tmp_path_factory):
    """Each family saved with ``save_pretrained`` as the hub lays it out (Kandinsky: prior/ and decoder/)."""
    folders = {}
    for name, build in (("sd3", _sd3), ("sd35", lambda c, t: _sd3(c, t, "rms_norm")), ("flux", _flux)):
        folders[name] = tmp_path_factory.mktemp(name)
        build(clip, tokenizer).save_pretrained(folders[name])
    folders["kandinsky"] = tmp_path_factory.mktemp("kandinsky")
    prior, decoder = _kandinsky(clip, tokenizer)
    prior.save_pretrained(folders["kandinsky"] / t2i.PRIOR_FOLDER)
    decoder.save_pretrained(folders["kandinsky"] / t2i.DECODER_FOLDER)
    return folders


def _draw(pipe, prompts=PROMPTS, ids=None, seed=0, **extra):
    """uint8 images (n, SIDE, SIDE, 3) of ``prompts``, image ids 0, 1, ... unless given."""
    call = {**CALL, **extra}
    if type(pipe).__name__.startswith("Kandinsky"):  # no T5; the prior has its own step count
        call = {**{k: v for k, v in call.items() if k != "max_sequence_length"}, "prior_num_inference_steps": 2}
    ids = list(range(len(prompts))) if ids is None else ids
    images = t2i.generate_images(pipe, prompts, ids, seed=seed, progress_bar=False, **call)
    return np.stack([np.asarray(image) for image in images]).astype(int)


def test_clip_text_encoder_is_the_clips_text_tower(clip, tokenizer):
    ids = tokenizer(PROMPTS, padding="max_length", max_length=16, return_tensors="pt").input_ids
    with torch.no_grad():
        expected = clip.get_text_features(input_ids=ids).pooler_output
        assert torch.allclose(t2i.clip_text_encoder(clip)(ids).text_embeds, expected, atol=1e-6)
        assert torch.allclose(
            t2i.clip_text_encoder(clip, projection=False)(ids).pooler_output,
            clip.text_model(input_ids=ids).pooler_output,
            atol=1e-6,
        )


@pytest.mark.parametrize("family", ["sd3", "sd35", "flux", "kandinsky"])
def test_two_step_call_of_each_pipeline_reloads_to_the_same_images(saved, family):
    """``from_pretrained`` of the saved folder gives the pipeline class of the hub checkpoint, whose
    two-step ``__call__`` draws images that depend on the prompt, and draws them again identically."""
    expected_class = {
        "sd3": "StableDiffusion3Pipeline",
        "sd35": "StableDiffusion3Pipeline",
        "flux": "FluxPipeline",
        "kandinsky": "KandinskyV22CombinedPipeline",
    }[family]
    pipe = t2i.load_text_to_image(saved[family])
    assert type(pipe).__name__ == expected_class
    images = _draw(pipe, ids=[0, 0])  # the same noise for both prompts
    assert images.shape == (2, SIDE, SIDE, 3)
    assert np.abs(images[0] - images[1]).max() > 10
    np.testing.assert_array_equal(images, _draw(t2i.load_text_to_image(saved[family]), ids=[0, 0]))


def test_images_do_not_depend_on_batching(saved):
    """Sharded generation: an image is a function of (seed, image id), whatever batch draws it."""
    pipe = t2i.load_text_to_image(saved["sd3"])
    prompts = [*PROMPTS, "a yellow ring"]
    together = _draw(pipe, prompts, batch_size=3)
    alone = np.concatenate([_draw(pipe, [p], ids=[i], batch_size=1) for i, p in enumerate(prompts)])
    assert np.abs(together - alone).max() <= 1
    assert np.abs(together - _draw(pipe, prompts, seed=1, batch_size=3)).max() > 10


def test_flux_guidance_reaches_the_guidance_embedding(saved):
    """FLUX is guidance-distilled: ``guidance_scale`` is an input of the one forward, not CFG."""
    pipe = t2i.load_text_to_image(saved["flux"])
    assert pipe.transformer.config.guidance_embeds
    low, high = _draw(pipe, guidance_scale=1.0), _draw(pipe, guidance_scale=7.0)
    assert np.abs(low - high).max() > 10


def test_kandinsky_clip_shares_the_clips_towers(clip):
    basis = torch.linalg.qr(torch.randn(24, 16))[0].T
    text, image = t2i.kandinsky_clip(clip, basis)
    pixels = torch.randn(2, 3, SIDE, SIDE)
    with torch.no_grad():
        expected = clip.get_image_features(pixel_values=pixels).pooler_output @ basis.T
        assert torch.allclose(image(pixel_values=pixels).image_embeds, expected, atol=1e-5)
    with pytest.raises(ValueError, match="text width"):
        t2i.kandinsky_clip(clip, torch.linalg.qr(torch.randn(24, 8))[0].T)


def test_a_missing_folder_or_component_is_named(saved, tmp_path):
    """diffusers reports a missing component as a file missing from the pipeline's root; an explicit
    prior= that does not exist used to fall back silently to the decoder alone."""
    import shutil

    with pytest.raises(FileNotFoundError, match="prior='.*typo'.*no such folder"):
        t2i.load_text_to_image(saved["kandinsky"], prior=saved["kandinsky"] / "typo")
    with pytest.raises(FileNotFoundError, match="no saved pipeline folder at"):
        t2i.load_text_to_image(tmp_path / "nothing")
    no_prior = shutil.copytree(saved["kandinsky"] / t2i.DECODER_FOLDER, tmp_path / "k" / t2i.DECODER_FOLDER).parent
    with pytest.raises(FileNotFoundError, match="holds decoder/ but no prior/"):
        t2i.load_text_to_image(no_prior)
    no_vae = shutil.copytree(saved["sd3"], tmp_path / "sd3")
    shutil.rmtree(no_vae / "vae")
    with pytest.raises(FileNotFoundError, match=r"component folder\(s\) \['vae'\]"):
        t2i.load_text_to_image(no_vae)
    prior_only = shutil.copytree(saved["kandinsky"] / t2i.PRIOR_FOLDER, tmp_path / "p" / t2i.PRIOR_FOLDER).parent
    with pytest.raises(FileNotFoundError, match="holds Kandinsky's prior but no decoder/"):
        t2i.load_text_to_image(prior_only)
    from diffusers import KandinskyV22Pipeline

    decoder = KandinskyV22Pipeline.from_pretrained(saved["kandinsky"] / t2i.DECODER_FOLDER)
    with pytest.raises(TypeError, match="a Kandinsky decoder alone draws from image embeddings"):
        t2i.generate_images(decoder, PROMPTS, [0, 1], seed=0, progress_bar=False)
    with pytest.raises(ValueError, match="holds a StableDiffusion3Pipeline, not the KandinskyV22Pipeline"):
        t2i.load_text_to_image(saved["sd3"], prior=saved["kandinsky"] / t2i.PRIOR_FOLDER)
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="device='cuda', but torch sees no CUDA device"):
            t2i.load_text_to_image(saved["sd3"], "cuda")


@pytest.mark.parametrize(
    ("prompts", "ids", "extra", "error", "message"),
    [
        ("a red circle", [1], {}, TypeError, "prompts must be a sequence of str, one per image; got one str"),
        (["a red circle", 3], [1, 2], {}, TypeError, r"prompts\[1\] must be a str"),
        (PROMPTS, ["img_a", "img_b"], {}, TypeError, r"image_ids\[0\] must be an integer >= 0; got str"),
        (PROMPTS, [0, 1.5], {}, TypeError, r"image_ids\[1\] must be an integer >= 0; got float"),
        (PROMPTS, [0, -1], {}, ValueError, r"image_ids\[1\] must be an integer >= 0"),
        (PROMPTS, [0, 1], {"batch_size": 0}, ValueError, "batch_size must be an integer >= 1"),
        (PROMPTS, [0, 1], {"output_type": "np"}, TypeError, r"sets \['output_type'\] itself"),
        (PROMPTS, [0, 1], {"prior_num_inference_steps": 1}, ValueError, "prior_num_inference_steps must be at least 2"),
        (PROMPTS, [0, 1], {"num_inference_steps": 0}, ValueError, "num_inference_steps must be at least 1; got 0"),
        (PROMPTS, [0, 1], {"num_images_per_prompt": 2}, TypeError, r"sets \['num_images_per_prompt'\] itself"),
    ],
)
def test_generation_arguments_are_refused_by_name_before_drawing(prompts, ids, extra, error, message):
    """Checked before the pipeline is called (it is not touched here): a str would have been one prompt
    per character, a float id truncated onto another image's noise."""
    with pytest.raises(error, match=message):
        t2i.generate_images(None, prompts, ids, seed=0, progress_bar=False, **extra)
    with pytest.raises(ValueError, match="seed must be an integer >= 0"):
        t2i.image_seed(-1, 0)
