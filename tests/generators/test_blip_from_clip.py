"""BLIP's ViT starts from the tiny CLIP's vision tower, as the real BLIP starts from a pre-trained ViT."""

import logging
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from condeval.core.training import TrainRecipe
from condeval.generators.captioner_training import VisionInit, _vision_shape, blip_vision_from_clip, train_captioner

WIDTH, LAYERS = 32, 2


@pytest.fixture(scope="module")
def tokenizer():
    from condeval.datasets.miniworld import vocabulary
    from condeval.encoders.tokenizer import build_word_tokenizer

    return build_word_tokenizer(vocabulary())


@pytest.fixture(scope="module")
def clip(tokenizer):
    """A tiny CLIP with every parameter drawn at random (no zero bias hides a wrong q/k/v order)."""
    from transformers import CLIPModel

    from condeval.encoders.clip import ClipSizes, tiny_clip_config

    torch.manual_seed(0)
    config = tiny_clip_config(
        tokenizer, 32, ClipSizes(vision_width=WIDTH, vision_layers=LAYERS, text_width=16, text_layers=1)
    )
    model = CLIPModel(config).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 0.3)
    return model


def _blip_vision(clip, token_scale=None):
    from transformers import BlipVisionConfig, BlipVisionModel

    blip = BlipVisionModel(BlipVisionConfig(**_vision_shape(clip.config.vision_config))).eval()
    blip.load_state_dict(blip_vision_from_clip(clip.vision_model.state_dict(), token_scale), strict=True)
    return blip


def _clip_counterpart(clip_vision, blip_name: str) -> torch.Tensor:
    """The CLIP tensor a BLIP vision parameter must equal, written out name by name."""
    clip = dict(clip_vision.named_parameters())
    if blip_name.endswith(("qkv.weight", "qkv.bias")):
        prefix, kind = blip_name.rsplit(".qkv.", 1)
        return torch.cat([clip[f"{prefix}.{part}_proj.{kind}"] for part in "qkv"])
    if ".projection." in blip_name:
        return clip[blip_name.replace(".projection.", ".out_proj.")]
    if blip_name == "embeddings.position_embedding":
        return clip["embeddings.position_embedding.weight"][None]
    if blip_name == "embeddings.class_embedding":
        return clip["embeddings.class_embedding"][None, None]
    if blip_name == "embeddings.patch_embedding.bias":  # CLIP's patch convolution has no bias
        return torch.zeros(WIDTH)
    return clip[blip_name]


def test_every_blip_vision_parameter_equals_its_clip_counterpart(clip):
    blip = _blip_vision(clip)
    names = [name for name, _ in blip.named_parameters()]
    assert len(names) == 4 + LAYERS * 12 + 2  # embeddings; per layer qkv, projection, 2 norms, MLP; post norm
    for name, parameter in blip.named_parameters():
        torch.testing.assert_close(parameter, _clip_counterpart(clip.vision_model, name), rtol=0, atol=0, msg=name)


def test_converted_layer_computes_clips_layer(clip):
    blip = _blip_vision(clip)
    hidden = torch.randn(3, 17, WIDTH, generator=torch.Generator().manual_seed(1))
    clip_layer, blip_layer = clip.vision_model.encoder.layers[1], blip.encoder.layers[1]
    with torch.no_grad():
        torch.testing.assert_close(
            blip_layer.self_attn(hidden)[0], clip_layer.self_attn(hidden, attention_mask=None)[0], rtol=0, atol=1e-5
        )
        torch.testing.assert_close(blip_layer(hidden), clip_layer(hidden, attention_mask=None), rtol=0, atol=1e-5)


def _pixels(n: int = 4) -> torch.Tensor:
    return torch.randn(n, 3, 32, 32, generator=torch.Generator().manual_seed(2))


def test_without_a_scale_the_tower_is_clips_without_its_pre_layer_norm(clip):
    blip, vision = _blip_vision(clip), clip.vision_model
    with torch.no_grad():
        expected = vision.post_layernorm(vision.encoder(inputs_embeds=vision.embeddings(_pixels())).last_hidden_state)
        torch.testing.assert_close(blip(pixel_values=_pixels()).last_hidden_state, expected, rtol=0, atol=1e-4)


def test_folded_pre_layer_norm_is_clips_up_to_each_tokens_scale(clip):
    vision = clip.vision_model
    with torch.no_grad():
        tokens = vision.embeddings(_pixels())
        expected = vision.pre_layrnorm(tokens)
        # the class token is the same for every image: fold at its scale and it must come out exact
        scale = (tokens[0, 0].var(unbiased=False) + vision.pre_layrnorm.eps).sqrt().item()
        folded = _blip_vision(clip, token_scale=scale).embeddings(_pixels())
    torch.testing.assert_close(folded[:, 0], expected[:, 0], rtol=0, atol=1e-5)
    shift, weight = vision.pre_layrnorm.bias, vision.pre_layrnorm.weight
    cosines = torch.nn.functional.cosine_similarity((folded - shift) / weight, (expected - shift) / weight, dim=-1)
    torch.testing.assert_close(cosines, torch.ones_like(cosines), rtol=0, atol=1e-5)  # patch tokens: same direction


@pytest.mark.parametrize("scale", [0.0, -1.0, float("nan")])
def test_fold_refuses_a_scale_that_is_not_positive(clip, scale):
    with pytest.raises(ValueError, match="token_scale must be positive"):
        blip_vision_from_clip(clip.vision_model.state_dict(), token_scale=scale)


@pytest.fixture(scope="module")
def world(tmp_path_factory, tokenizer, clip):
    from condeval.datasets.miniworld import write_split

    root = tmp_path_factory.mktemp("world")
    write_split(root, "train", 40, seed=0, side=32)
    tokenizer.save_pretrained(root / "tokenizer")
    clip.save_pretrained(root / "clip")
    return root


def _train(world, out, image_size=32, freeze_vision=False):
    return train_captioner(
        world,
        world / "tokenizer",
        out,
        TrainRecipe(epochs=1, batch_size=16, lr=1e-3, held_out=8, seed=0),
        architecture="blip",
        images=40,
        model={"vision_width": 16, "vision_layers": 1, "text_width": 16, "text_layers": 1, "image_size": image_size},
        vision=VisionInit(from_clip=world / "clip", freeze=freeze_vision),
    )


def test_train_captioner_starts_blip_from_the_clip(world, clip, tmp_path, caplog):
    from transformers import BlipForConditionalGeneration

    with caplog.at_level(logging.INFO, logger="condeval"):
        _train(world, tmp_path / "blip", freeze_vision=True)
    assert "'hidden_size': 32" in caplog.text and "vision_width and vision_layers ignored" in caplog.text
    saved = BlipForConditionalGeneration.from_pretrained(tmp_path / "blip")
    assert saved.config.vision_config.hidden_size == WIDTH  # the CLIP's shape, not model's vision_width
    assert saved.config.text_config.encoder_hidden_size == WIDTH  # the decoder cross-attends to it
    assert saved.config.vision_config.hidden_act == clip.config.vision_config.hidden_act
    frozen = dict(saved.vision_model.named_parameters())
    for name in frozen:
        if not name.startswith("embeddings."):  # the embeddings hold the folded pre-layer norm
            np.testing.assert_array_equal(frozen[name].detach(), _clip_counterpart(clip.vision_model, name).detach())


def test_train_captioner_refuses_a_clip_of_another_image_size(world, tmp_path):
    with pytest.raises(ValueError, match="reads 32-pixel images, the captioner is trained on 64"):
        _train(world, tmp_path / "blip", image_size=64)


def test_conversion_refuses_a_layer_without_its_value_projection(clip):
    state = {k: v for k, v in clip.vision_model.state_dict().items() if k != "encoder.layers.1.self_attn.v_proj.bias"}
    with pytest.raises(ValueError, match=r"CLIP layer 1 has bias of \['k', 'q'\] only"):
        blip_vision_from_clip(state)


@pytest.mark.slow
def test_the_default_configs_captioners_all_read_the_clips_vit_frozen(tmp_path):
    """Every captioner starts its image encoder from the CLIP's and keeps it frozen, so each trains on tokens
    computed once; the BLIPs' training jobs wait for the CLIP."""
    repo = Path(__file__).resolve().parents[2]
    models = yaml.safe_load((repo / "config/config.yaml").read_text())["crel"]["image_to_text"]["models"]
    trains = {name: model["train"] for name, model in models.items() if "train" in model}
    assert len(trains) == 4 and all(t.get("vision_from_clip") and t.get("freeze_vision") for t in trains.values())
    blips = [name for name, train in trains.items() if train["architecture"] == "blip"]
    targets = [f"results/crel_i2t/captioners/{name}" for name in blips]
    command = [
        sys.executable,
        "-m",
        "snakemake",
        "-s",
        str(repo / "workflow/Snakefile"),
        "-d",
        str(tmp_path),
        "--configfile",
        str(repo / "config/config.yaml"),
        "-n",
        *targets,
    ]
    # a dry run takes ~10 s on an idle machine; the limit only guards against a hang
    dry = subprocess.run(command, capture_output=True, text=True, timeout=600, check=True).stdout
    jobs = [job for job in dry.split("\nrule ") if job.startswith("train_captioner:")]
    trained = {re.search(r"wildcards: model=(\S+)", job).group(1): job for job in jobs}
    assert sorted(trained) == sorted(blips)
    for name, job in trained.items():
        assert "results/encoders/clip.sha256" in re.search(r"input: (.*)", job).group(1), name
