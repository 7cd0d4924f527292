"""The tiny CLIP's loss with several shape-swap foils per caption, its temperature cap, and a short run."""

import json
import math

import pytest
import torch
import torch.nn.functional as F

from condeval.encoders.clip import contrastive_loss


def _unit(*shape, seed=0):
    return F.normalize(torch.randn(*shape, generator=torch.Generator().manual_seed(seed)), dim=-1)


def test_one_foil_per_caption_reads_the_same_as_a_foil_axis_of_one():
    image, text, hard = _unit(6, 8), _unit(6, 8, seed=1), _unit(6, 8, seed=2)
    scale = torch.tensor(math.log(20.0))
    assert torch.allclose(
        contrastive_loss(image, text, hard, scale, 2.0), contrastive_loss(image, text, hard[:, None], scale, 2.0)
    )


def test_every_foil_counts_against_its_own_caption():
    image, text = _unit(4, 8), _unit(4, 8, seed=1)
    scale = torch.tensor(0.0)
    far = -image[:, None].expand(4, 3, 8)  # cosine -1: foils that never win
    near = far.clone()
    near[:, 2] = image  # one foil per image now matches the image exactly

    def pairwise(hard):  # the hard-negative term alone: the loss at weight 1 less the loss at weight 0
        return contrastive_loss(image, text, hard, scale, 1.0) - contrastive_loss(image, text, hard, scale, 0.0)

    assert pairwise(near) > pairwise(far) + 0.1


def test_the_temperature_cap_bounds_the_scale_the_loss_uses():
    image, text, hard = _unit(5, 8), _unit(5, 8, seed=1), _unit(5, 2, 8, seed=2)
    capped = contrastive_loss(image, text, hard, torch.tensor(math.log(1000.0)), 1.0, max_scale=10.0)
    assert torch.isclose(capped, contrastive_loss(image, text, hard, torch.tensor(math.log(10.0)), 1.0))


def test_train_clip_runs_with_several_foils_and_exports_a_loadable_clip(tmp_path):
    from condeval.core.training import TrainRecipe
    from condeval.datasets.miniworld import vocabulary, write_split
    from condeval.encoders.features import ClipEncoder
    from condeval.encoders.tokenizer import save_word_tokenizer
    from condeval.encoders.train import ClipObjective, train_clip

    write_split(tmp_path / "world", "train", 48, seed=0)
    save_word_tokenizer(vocabulary(), tmp_path / "tokenizer")
    model = dict(
        vision_width=32, vision_layers=1, patch_size=16, text_width=32, text_layers=1, projection_dim=16, image_size=64
    )
    train_clip(
        tmp_path / "world",
        tmp_path / "tokenizer",
        tmp_path / "clip",
        TrainRecipe(epochs=1, batch_size=16, lr=1e-3, held_out=8, seed=0),
        images=48,
        model=model,
        objective=ClipObjective(hard_weight=1.0, foils=3, max_logit_scale=20.0),
        exclude_shapes=["arrow"],
    )
    assert json.loads((tmp_path / "clip" / "training.json").read_text())
    assert ClipEncoder(tmp_path / "clip").text_features(["a red circle"]).shape == (1, 16)


def test_the_contrastive_loss_on_padding_cut_batches_is_the_loss_on_full_length_ones():
    """Training cuts the columns that are padding in every caption (and every foil); the loss must not move."""
    from condeval.datasets.miniworld import vocabulary
    from condeval.encoders.clip import ClipSizes, ContrastiveCLIP, tiny_clip_config
    from condeval.encoders.data import token_arrays
    from condeval.encoders.tokenizer import build_word_tokenizer

    tokenizer = build_word_tokenizer(vocabulary())
    config = tiny_clip_config(tokenizer, 32, ClipSizes(vision_width=16, vision_layers=1, text_width=16, text_layers=1))
    module = ContrastiveCLIP(config.to_dict(), hard_weight=2.0).eval()
    texts = [
        token_arrays(tokenizer, c, 32)
        for c in (
            ["a red star", "there is a blue box next to a ring"],
            ["a red box", "there is a blue star next to a ring"],
        )
    ]
    (ids, mask), (hard_ids, hard_mask) = ([torch.as_tensor(a)[:, None] for a in t] for t in texts)
    pixels = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    assert mask.sum(dim=-1).max() < 32
    with torch.no_grad():
        cut = module._loss((pixels, ids, mask, hard_ids, hard_mask), training=False)
        image = module.embed(pixel_values=pixels)
        text, hard = (module.embed(ids=i[:, 0], mask=m[:, 0]) for i, m in ((ids, mask), (hard_ids, hard_mask)))
        full = contrastive_loss(image, text, hard, module.model.logit_scale, 2.0, module.hparams.max_logit_scale)
    assert float(cut) == pytest.approx(float(full), rel=1e-5)


def test_caption_words_the_tokenizer_does_not_know_are_counted_in_a_warning(caplog):
    """A lab's own captions became "a [UNK] [UNK]" each, and train_clip trained on them without a word."""
    import logging

    from condeval.datasets.miniworld import vocabulary
    from condeval.encoders.data import token_arrays
    from condeval.encoders.tokenizer import build_word_tokenizer
    from condeval.encoders.train import _warn_unknown_words

    tokenizer = build_word_tokenizer(vocabulary())
    captions = [["a crimson zebra"], ["a red star"]]
    ids, mask = token_arrays(tokenizer, [c for per_image in captions for c in per_image], 8)
    with caplog.at_level(logging.WARNING, logger="condeval.encoders.train"):
        _warn_unknown_words(tokenizer, captions, (ids, mask))
    assert "2 of " in caplog.text and "['crimson', 'zebra']" in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="condeval.encoders.train"):
        _warn_unknown_words(tokenizer, captions[1:], token_arrays(tokenizer, captions[1], 8))
    assert not caplog.text
