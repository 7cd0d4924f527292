"""Attention-mask sampling through a saved tiny CLIPModel: unmasked rows equal the model's own
features, masks act only through attention, and the word scores follow Eqs. 1–3."""

import numpy as np
import pytest
import torch

from condeval.crc.pos import LexiconTagger
from condeval.crc.sampling import AttentionMaskSampler, PairSamples, clipscore, word_error_scores
from condeval.datasets.miniworld import SceneObject, render_scene, vocabulary

LEXICON = {
    "a": "DET",
    "red": "ADJ",
    "blue": "ADJ",
    "star": "NOUN",
    "ring": "NOUN",
    "above": "ADP",
    "two": "NUM",
    "rings": "NOUN",
}


@pytest.fixture(scope="module")
def encoder(tmp_path_factory):
    from transformers import CLIPModel

    from condeval.encoders.clip import ClipSizes, clip_image_processor, tiny_clip_config
    from condeval.encoders.features import ClipEncoder
    from condeval.encoders.tokenizer import build_word_tokenizer

    folder = tmp_path_factory.mktemp("clip")
    tokenizer = build_word_tokenizer(vocabulary())
    torch.manual_seed(0)
    model = CLIPModel(
        tiny_clip_config(
            tokenizer,
            64,
            ClipSizes(vision_width=32, vision_layers=2, patch_size=16, text_width=32, text_layers=2, projection_dim=16),
        )
    )
    for save in (model.eval(), tokenizer, clip_image_processor(64)):
        save.save_pretrained(folder)
    return ClipEncoder(folder)


@pytest.fixture(scope="module")
def image():
    return render_scene(
        [SceneObject("star", "red", "large", 0.3, 0.3), SceneObject("ring", "blue", "small", 0.7, 0.7)],
        np.random.default_rng(0),
    )


def _sampler(encoder, **kwargs):
    settings = dict(n_image=6, n_text=8, image_ratio=0.3, text_ratio=0.4) | kwargs
    return AttentionMaskSampler(encoder, LexiconTagger(LEXICON), **settings)


def test_unmasked_rows_are_the_models_features(encoder, image):
    sampler = _sampler(encoder)
    rng = np.random.default_rng(1)
    images = sampler.image_embeddings(image, rng)
    texts, masks = sampler.text_embeddings("a red star above two blue rings".split(), rng)
    expected_image = encoder.image_features([image])[0]
    expected_text = encoder.text_features(["a red star above two blue rings"])[0]
    np.testing.assert_allclose(torch.nn.functional.normalize(images[0], dim=-1).numpy(), expected_image, atol=1e-5)
    np.testing.assert_allclose(torch.nn.functional.normalize(texts[0], dim=-1).numpy(), expected_text, atol=1e-5)
    # Masked rows differ (the masks reach the encoders) and only valid words are ever masked.
    assert not torch.allclose(images[0], images[1])
    assert not torch.allclose(texts[0], texts[1])
    words = "a red star above two blue rings".split()
    valid = [i for i, w in enumerate(words) if LEXICON[w] in {"NOUN", "ADJ", "NUM"}]
    assert set(np.flatnonzero(masks.any(axis=0))) <= set(valid)
    assert (masks.sum(axis=1) == np.ceil(0.4 * len(valid))).all()


def test_a_text_mask_equals_leaving_the_tokens_out_of_attention(encoder):
    """Masking word j through the attention mask is what the model computes when its tokens get
    attention 0 (not deleted: positions of the other words stay)."""
    sampler = _sampler(encoder, n_text=1, text_ratio=0.01)  # one valid word per sample
    words = "a red star".split()
    texts, masks = sampler.text_embeddings(words, np.random.default_rng(2))
    j = int(np.flatnonzero(masks[0])[0])
    tokens = encoder.tokenizer(" ".join(words), return_tensors="pt")
    attention = tokens["attention_mask"].clone()
    attention[0, 1 + j] = 0  # [CLS] first, one token per word
    with torch.no_grad():
        expected = encoder.model.get_text_features(
            input_ids=tokens["input_ids"], attention_mask=attention
        ).pooler_output[0]
    torch.testing.assert_close(texts[1], expected)


def test_scores_come_from_one_batch_per_tower_and_are_seeded(encoder, image):
    sampler = _sampler(encoder)
    calls = {"vision": 0, "text": 0}
    hooks = [
        encoder.model.vision_model.encoder.register_forward_hook(
            lambda *a: calls.__setitem__("vision", calls["vision"] + 1)
        ),
        encoder.model.text_model.register_forward_hook(lambda *a: calls.__setitem__("text", calls["text"] + 1)),
    ]
    samples = sampler.sample(image, "a red star above two blue rings".split(), seed=3)
    for hook in hooks:
        hook.remove()
    assert calls == {"vision": 1, "text": 1}  # I + T rows in two forward passes, not I×T
    assert samples.scores.shape == (7, 9) and samples.distribution.shape == (48,)
    assert samples.has_valid_words
    # No maskable word (determiners and adpositions only): the caption is never masked, every f_v is 0.
    bare = sampler.sample(image, "a above a".split(), seed=3)
    assert not bare.has_valid_words and (bare.word_scores == 0).all()
    np.testing.assert_allclose(bare.scores[:, 1:], bare.scores[:, :1].repeat(8, axis=1), rtol=1e-5)
    assert (samples.scores >= 0).all() and (samples.scores <= 2.5).all()
    again = sampler.sample(image, "a red star above two blue rings".split(), seed=3)
    np.testing.assert_array_equal(samples.scores, again.scores)
    assert not np.array_equal(
        samples.scores, sampler.sample(image, "a red star above two blue rings".split(), seed=4).scores
    )


def test_attention_entry_masking_and_logit_scale_weight(encoder, image):
    sampler = _sampler(encoder, image_masking="attention_entries", weight="logit_scale")
    assert sampler.weight == pytest.approx(float(encoder.model.logit_scale.detach()))
    images = sampler.image_embeddings(image, np.random.default_rng(5))
    assert not torch.allclose(images[0], images[1])
    with pytest.raises(ValueError, match="image_masking"):
        _sampler(encoder, image_masking="pixels")
    with pytest.raises(ValueError, match="text_ratio"):
        _sampler(encoder, text_ratio=1.0)


def test_clipscore_is_w_times_clipped_cosine():
    texts = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [1.0, 1.0]])
    images = torch.tensor([[2.0, 0.0]])
    np.testing.assert_allclose(clipscore(texts, images, 2.5).numpy(), [[2.5, 0.0, 2.5 / np.sqrt(2)]], rtol=1e-6)


def _pair(scores) -> PairSamples:
    scores = np.asarray(scores, dtype=float)
    return PairSamples(scores=scores, text_masks=np.ones((scores.shape[1] - 1, 1), dtype=bool), words=["star"])


def test_clipped_share_counts_the_masked_scores_at_exactly_zero():
    """Row 0 and column 0 (the unmasked image and caption) are not masked samples: they never count."""
    assert _pair([[1.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]]).clipped_share == 1.0
    assert _pair([[0.0, 0.2, 0.1], [0.0, 1e-9, 0.3], [0.0, 0.4, 2.5]]).clipped_share == 0.0
    assert _pair([[0.7, 0.0, 0.1], [0.0, 0.2, 0.3], [0.5, 0.4, 0.0]]).clipped_share == 0.25


def test_word_error_scores_follow_equations_1_to_3():
    # 2 masked images, 3 text samples over 4 words; word 3 never masked.
    scores = np.array([[1.0, 0.9, 1.2, 1.0], [0.8, 0.6, 1.0, 0.9], [0.6, 0.7, 0.9, 0.5]])
    masks = np.array([[1, 0, 0, 0], [0, 1, 1, 0], [1, 1, 0, 0]], dtype=bool)
    v = np.array([((0.6 - 0.8) + (0.7 - 0.6)) / 2, ((1.0 - 0.8) + (0.9 - 0.6)) / 2, ((0.9 - 0.8) + (0.5 - 0.6)) / 2])
    V = np.array([(v[0] + v[2]) / 2, (v[1] + v[2]) / 2, v[1]])
    np.testing.assert_allclose(word_error_scores(scores, masks), np.append(1 / (1 + np.exp(-V)), 0.0))


def test_sample_captions_seeds_each_pair_by_its_key(encoder, image, tmp_path):
    """A pair's samples depend on (seed, key) only: any sharding or order gives the same rows."""
    from condeval.crc.sampling import sample_captions

    path = tmp_path / "scene.png"
    image.save(path)
    captions = ["a red star above two blue rings".split(), "a blue ring".split(), "above a".split()]
    sampler = _sampler(encoder)
    whole = sample_captions(sampler, [path] * 3, captions, [10, 11, 12], seed=0, keep_distribution=True, progress=False)
    parts = [
        sample_captions(sampler, [path], [captions[k]], [10 + k], seed=0, keep_distribution=True, progress=False)
        for k in (2, 0, 1)
    ]
    import polars as pl

    assert pl.concat(parts).sort("key").equals(whole)
    assert whole["has_valid_words"].to_list() == [True, True, False]  # "above a": no maskable word
    assert whole["word_scores"][2].to_list() == [0.0, 0.0]
    assert len(whole["samples"][0]) == 6 * 8
    clipped = [float(np.mean(np.asarray(samples) == 0.0)) for samples in whole["samples"]]
    assert whole["clipped_share"].to_list() == clipped
    assert sample_captions(sampler, [path], [captions[0]], [10], seed=1, progress=False)["mean"][0] != whole["mean"][0]
    twins = sample_captions(sampler, [path] * 2, [captions[0]] * 2, [10, 20], seed=0, progress=False)
    assert twins["mean"][0] == whole["mean"][0] and twins["mean"][1] != twins["mean"][0]  # each pair its own masks


def test_an_images_masked_embeddings_are_computed_once_for_all_its_captions(encoder, image, tmp_path, monkeypatch):
    """Two images, five captions in interleaved order: two image forwards; rows come back in the order given."""
    from condeval.crc.sampling import sample_captions

    paths = [tmp_path / "a.png", tmp_path / "b.png"]
    image.save(paths[0])
    image.transpose(0).save(paths[1])  # a mirrored scene: another image
    sampler = _sampler(encoder)
    calls = []
    forward = sampler.image_embeddings
    monkeypatch.setattr(sampler, "image_embeddings", lambda im, rng: calls.append(1) or forward(im, rng))
    order = [0, 1, 0, 1, 0]
    captions = [
        "a red star".split(),
        "two blue rings".split(),
        "a blue ring".split(),
        "a red star".split(),
        "two red stars".split(),
    ]
    rows = sample_captions(sampler, [paths[i] for i in order], captions, [5, 4, 3, 2, 1], seed=0, progress=False)
    assert len(calls) == 2 and rows["key"].to_list() == [5, 4, 3, 2, 1]
    alone = [
        sample_captions(sampler, [paths[i]], [c], [k], seed=0, progress=False)
        for i, c, k in zip(order, captions, [5, 4, 3, 2, 1])
    ]
    import polars as pl

    assert pl.concat(alone).equals(rows)  # sharing changes no pair's samples
    assert rows["mean"][0] != rows["mean"][3]  # one caption, two images


def test_words_past_the_tokenizers_max_length_are_counted(encoder, image, tmp_path):
    """The tiny CLIP reads 32 tokens: a 42-word caption loses its last 12 words, 28 words fit."""
    from condeval.crc.sampling import sample_captions

    path = tmp_path / "scene.png"
    image.save(path)
    block = "a red star above two blue rings".split()  # red, star, two, blue, rings are valid
    assert encoder.max_length == 32
    rows = sample_captions(_sampler(encoder), [path] * 2, [block * 6, block * 4], [0, 1], seed=0, progress=False)
    # 30 word tokens fit beside the start and end tokens: words 30–41 are cut, 9 of them valid.
    assert rows["truncated_words"].to_list() == [9, 0]
    assert np.all(np.asarray(rows["word_scores"][0])[30:] == 0.0)


def test_a_labs_mistakes_are_refused_before_sampling(encoder, image, tmp_path):
    """A caption as one str was scored letter by letter (12 'words', all 0), and pairs beyond the shortest
    of paths, captions and keys were dropped without a word (a lab's trial)."""
    from condeval.crc.sampling import sample_captions

    path = tmp_path / "scene.png"
    image.save(path)
    sampler = _sampler(encoder)
    caption = "a red star".split()
    for arguments, error, message in [
        (
            ([path], ["a red star"], [0]),
            TypeError,
            r"pair 0 \(key 0\): a caption's words must be a sequence of str; got one str",
        ),
        (([path], [caption, caption, caption], [0, 1, 2]), ValueError, "1 paths, 3 captions and 3 keys"),
        (([path, path], [caption], [0, 1]), ValueError, "2 paths, 1 captions and 2 keys"),
        (([image], [caption], [0]), TypeError, r"paths\[0\] must be an image file's path"),
    ]:
        with pytest.raises(error, match=message):
            sample_captions(sampler, *arguments, seed=0, progress=False)
    with pytest.raises(TypeError, match="got one str 'a red star' \\(split it: \\['a', 'red', 'star'\\]\\)"):
        sampler.sample(image, "a red star", seed=0)
    # a path and the PIL image it holds give the same samples
    np.testing.assert_array_equal(
        sampler.sample(path, caption, seed=0).scores, sampler.sample(image, caption, 0).scores
    )
    for settings, error, message in [
        ({"n_image": 2.5}, TypeError, "n_image must be an integer >= 1; got float"),
        ({"weight": -1.0}, ValueError, "weight must be positive"),
    ]:
        with pytest.raises(error, match=message):
            _sampler(encoder, **settings)
