"""Saved tiny models load back through from_pretrained, as the real checkpoints do on a cluster."""

import functools

import numpy as np
import pytest
import torch

from condeval.datasets.miniworld import SceneObject, render_scene, vocabulary
from condeval.encoders.tokenizer import SPECIAL_TOKENS, build_word_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return build_word_tokenizer(vocabulary())


@pytest.fixture(scope="module")
def images():
    rng = np.random.default_rng(0)
    return [render_scene([SceneObject(shape, "red", "large", 0.5, 0.5)], rng) for shape in ("star", "ring", "cross")]


def test_tokenizer_round_trips_with_offsets(tmp_path, tokenizer):
    from transformers import AutoTokenizer

    tokenizer.save_pretrained(tmp_path)
    loaded = AutoTokenizer.from_pretrained(tmp_path)
    text = "A small red Circle above two boxes"
    assert loaded(text).input_ids == tokenizer(text).input_ids
    encoded = loaded(text, return_offsets_mapping=True)
    words = [text[a:b].lower() for a, b in encoded["offset_mapping"] if b > a]
    assert words == text.lower().split()  # every token maps back to its word
    assert (
        loaded.convert_ids_to_tokens(encoded.input_ids)[0] == "[CLS]" and loaded.unk_token_id not in encoded.input_ids
    )
    assert loaded("a zebra").input_ids[2] == loaded.unk_token_id
    assert len(loaded) == len(SPECIAL_TOKENS) + len(vocabulary())


def test_tokenizer_refuses_a_word_that_is_a_special_token():
    with pytest.raises(ValueError, match="special tokens"):
        build_word_tokenizer(["circle", "[mask]"])


def test_clip_and_bert_round_trip(tmp_path, tokenizer, images):
    from transformers import BertForPreTraining, CLIPModel

    from condeval.encoders.bert import tiny_bert_config
    from condeval.encoders.clip import ClipSizes, clip_image_processor, tiny_clip_config
    from condeval.encoders.features import BertEncoder, ClipEncoder

    torch.manual_seed(0)
    clip = CLIPModel(
        tiny_clip_config(
            tokenizer, 64, ClipSizes(vision_width=32, vision_layers=1, text_width=32, text_layers=1, projection_dim=16)
        )
    ).eval()
    for save in (clip, tokenizer, clip_image_processor(64)):
        save.save_pretrained(tmp_path / "clip")
    encoder = ClipEncoder(tmp_path / "clip")
    pixels = clip_image_processor(64)(images, return_tensors="pt")["pixel_values"]
    with torch.no_grad():
        expected = torch.nn.functional.normalize(clip.get_image_features(pixel_values=pixels).pooler_output, dim=-1)
    np.testing.assert_allclose(encoder.image_features(images), expected.numpy(), atol=1e-5)
    texts = encoder.text_features(["a red star", "two blue rings"])
    np.testing.assert_allclose(np.linalg.norm(texts, axis=1), 1.0, atol=1e-6)

    bert = BertForPreTraining(tiny_bert_config(tokenizer, width=32, layers=1)).eval()
    bert.save_pretrained(tmp_path / "bert")
    tokenizer.save_pretrained(tmp_path / "bert")
    loaded = BertEncoder(tmp_path / "bert")
    tokens = tokenizer(["a red star"], return_tensors="pt")
    with torch.no_grad():
        cls = bert.bert(**tokens).last_hidden_state[:, 0]
    np.testing.assert_allclose(
        loaded.text_features(["a red star"]), torch.nn.functional.normalize(cls, dim=-1).numpy(), atol=1e-5
    )


def _saved_captioner(folder, architecture: str, tokenizer):
    """A random tiny captioner of ``architecture`` saved in ``folder`` as the hub lays one out; its model."""
    from condeval.generators.captioners import (
        CaptionerSizes,
        _model_class,
        captioner_image_processor,
        tiny_captioner_config,
    )

    sizes = CaptionerSizes(vision_width=32, vision_layers=1, text_width=32, text_layers=1)
    model = _model_class(architecture)(tiny_captioner_config(architecture, tokenizer, 64, sizes)).eval()
    for save in (model, tokenizer, captioner_image_processor(architecture, 64)):
        save.save_pretrained(folder)
    return model


@pytest.mark.parametrize("architecture", ["blip", "git"])
def test_captioner_generates_and_round_trips(tmp_path, tokenizer, images, architecture, capsys):
    from condeval.generators.captioners import Captioner

    torch.manual_seed(0)
    model = _saved_captioner(tmp_path, architecture, tokenizer)
    captioner = Captioner(tmp_path)
    assert type(captioner.model) is type(model)
    first = captioner.generate(images, seed=3, do_sample=True, max_new_tokens=6)
    assert len(first) == 3 and all(isinstance(c, str) for c in first)
    assert first == captioner.generate(images, seed=3, do_sample=True, max_new_tokens=6)  # seeded
    greedy = captioner.generate(images[:1], seed=0, do_sample=False, max_new_tokens=1)[0]
    assert len(greedy.split()) <= 1 and "[" not in greedy  # one step; no special token is sampled
    assert "captions: 100%" in capsys.readouterr().err  # progress reaches a non-terminal stderr (a job's log)


def _recording(processor, seen, batch, **kwargs):
    """The processor's answer, recording the sizes of the images it was handed."""
    seen.append([image.size for image in batch])
    return processor(batch, **kwargs)


def test_a_captioner_image_size_resizes_every_image_before_the_models_processor(tmp_path, tokenizer, images):
    """CReL runs every captioner "at image size 224 x 224": the images are made that square first."""
    from condeval.generators.captioners import Captioner

    _saved_captioner(tmp_path, "blip", tokenizer)
    seen = []
    for image_size in (None, 20):
        captioner = Captioner(tmp_path, image_size=image_size)
        captioner.image_processor = functools.partial(_recording, captioner.image_processor, seen)
        captioner.generate(images[:2], seed=0, do_sample=False, max_new_tokens=1)
    assert seen[0] == [image.size for image in images[:2]] and seen[1] == [(20, 20), (20, 20)]
    with pytest.raises(ValueError, match="image_size must be an integer >= 1"):
        Captioner(tmp_path, image_size=0)


def test_captioner_refuses_a_folder_of_another_model(tmp_path, tokenizer):
    from transformers import BertConfig, BertModel

    from condeval.generators.captioners import Captioner

    BertModel(
        BertConfig(vocab_size=10, hidden_size=8, num_hidden_layers=1, num_attention_heads=2, intermediate_size=8)
    ).save_pretrained(tmp_path)
    with pytest.raises(ValueError, match="not a BLIP or GIT"):
        Captioner(tmp_path)


@pytest.mark.parametrize(
    ("call", "error", "message"),
    [
        ({"num_return_sequences": 3}, ValueError, r"one caption per image; \['num_return_sequences'\]"),
        ({"batch_size": -1}, ValueError, "batch_size must be an integer >= 1; got -1"),
        ({"batch_size": 0}, ValueError, "batch_size must be an integer >= 1; got 0"),
        ({"seed": None}, TypeError, "seed must be an integer"),
        ({"images": "/"}, TypeError, "got one path '/'"),
    ],
)
def test_captioner_arguments_are_refused_by_name(tmp_path, tokenizer, images, call, error, message):
    """num_return_sequences=3 returned 3·N captions in one list (zipped with the ids: other images'
    captions); batch_size=-1 returned no caption at all; one path was read character by character."""
    from condeval.generators.captioners import Captioner

    _saved_captioner(tmp_path, "git", tokenizer)
    arguments = {"images": images, "seed": 0, "max_new_tokens": 2} | call
    with pytest.raises(error, match=message):
        Captioner(tmp_path).generate(arguments.pop("images"), **arguments)


def test_a_bert_with_fewer_positions_than_max_length_truncates_at_its_own(tmp_path, tokenizer):
    """A lab's BERT of 16 positions crashed inside transformers on a 30-token caption."""
    from transformers import BertForPreTraining

    from condeval.encoders.bert import tiny_bert_config
    from condeval.encoders.features import BertEncoder

    bert = BertForPreTraining(tiny_bert_config(tokenizer, width=32, layers=1, max_length=16)).eval()
    bert.save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    encoder = BertEncoder(tmp_path)
    assert encoder.max_length == 16
    assert encoder.text_features([" ".join(["red"] * 30)]).shape == (1, 32)
