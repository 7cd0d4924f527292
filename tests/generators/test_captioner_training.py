"""The captioner's optimizer: the image encoder learns at ``vision_lr_scale`` times the text side's rate."""

import pytest

from condeval.core.training import cosine_schedule
from condeval.generators.captioner_training import CaptionerModule
from condeval.generators.captioners import CaptionerSizes, tiny_captioner_config

LR = 2e-3


@pytest.fixture(scope="module")
def tokenizer():
    from condeval.datasets.miniworld import vocabulary
    from condeval.encoders.tokenizer import build_word_tokenizer

    return build_word_tokenizer(vocabulary())


def _learning_rates(module) -> dict[int, float]:
    """Parameter id -> the peak learning rate of the one optimizer group that holds it."""
    optimizer = module.configure_optimizers()["optimizer"]
    rates = {}
    for group in optimizer.param_groups:
        for parameter in group["params"]:
            assert id(parameter) not in rates, "a parameter sits in two optimizer groups"
            rates[id(parameter)] = group["initial_lr"]  # the peak; the warm-up schedule starts at 0
    return rates


@pytest.mark.parametrize("architecture", ["blip", "git"])
@pytest.mark.parametrize("scale", [1.0, 0.1])
def test_the_image_encoder_learns_at_its_scale_and_everything_else_at_lr(tokenizer, architecture, scale):
    config = tiny_captioner_config(
        architecture, tokenizer, 32, CaptionerSizes(vision_width=16, vision_layers=1, text_width=16, text_layers=1)
    )
    module = CaptionerModule(architecture, config.to_dict(), cosine_schedule(LR, 1000, 50), vision_lr_scale=scale)
    rates = _learning_rates(module)
    vision = {id(p) for p in module.vision_tower().parameters()}
    trainable = {id(p) for p in module.parameters() if p.requires_grad}
    assert set(rates) == trainable and vision < trainable
    assert [rates[i] for i in vision] == pytest.approx([LR * scale] * len(vision))
    assert [rates[i] for i in trainable - vision] == pytest.approx([LR] * len(trainable - vision))


def test_a_frozen_image_encoder_has_no_optimizer_group(tokenizer):
    config = tiny_captioner_config(
        "git", tokenizer, 32, CaptionerSizes(vision_width=16, vision_layers=1, text_width=16, text_layers=1)
    )
    module = CaptionerModule(
        "git", config.to_dict(), cosine_schedule(LR, 1000, 50), freeze_vision=True, vision_lr_scale=0.1
    )
    rates = _learning_rates(module)
    assert not {id(p) for p in module.vision_tower().parameters()} & set(rates)
    assert list(rates.values()) == pytest.approx([LR] * len(rates))


def _padded_batch(tokenizer, captions, length, image_size=32, seed=0):
    import torch

    from condeval.encoders.data import token_arrays

    ids, mask = token_arrays(tokenizer, captions, length)
    pixels = torch.randn(len(captions), 3, image_size, image_size, generator=torch.Generator().manual_seed(seed))
    return pixels, torch.as_tensor(ids)[:, None], torch.as_tensor(mask)[:, None]  # one caption per image


@pytest.mark.parametrize("architecture", ["blip", "git"])
def test_the_loss_on_padding_cut_batches_is_the_loss_on_full_length_ones(tokenizer, architecture):
    """Training cuts the columns that are padding in every caption; the captioning loss must not move."""
    import torch

    config = tiny_captioner_config(
        architecture,
        tokenizer,
        32,
        CaptionerSizes(vision_width=16, vision_layers=1, text_width=16, text_layers=1, dropout=0.0),
    )
    module = CaptionerModule(architecture, config.to_dict()).eval()
    pixels, ids, mask = _padded_batch(tokenizer, ["a red star", "there is a small blue box next to a ring"], 32)
    assert mask[:, 0].sum(dim=1).max() < 32  # there is padding to cut
    labels = ids[:, 0].masked_fill(mask[:, 0] == 0, -100)
    with torch.no_grad():
        full = module.model(pixel_values=pixels, input_ids=ids[:, 0], attention_mask=mask[:, 0], labels=labels).loss
        cut = module._loss((pixels, ids, mask), training=False)
    assert float(cut) == pytest.approx(float(full), rel=1e-5)


@pytest.mark.parametrize("architecture", ["blip", "git"])
def test_a_frozen_encoder_trains_on_its_precomputed_tokens_at_the_same_loss(tokenizer, architecture):
    """Training a frozen encoder's captioner on tokens computed once must give the loss and gradients of pixels."""
    import torch

    config = tiny_captioner_config(
        architecture,
        tokenizer,
        32,
        CaptionerSizes(vision_width=16, vision_layers=1, text_width=16, text_layers=1, dropout=0.0),
    )
    module = CaptionerModule(architecture, config.to_dict(), freeze_vision=True).train()
    pixels, ids, mask = _padded_batch(tokenizer, ["a red star", "there is a small blue box next to a ring"], 32)
    tokens = module.image_tokens(pixels)
    assert module.vision_tower().training  # image_tokens restores the mode it found
    losses, grads = [], []
    for images in (pixels, tokens):
        module.zero_grad()
        loss = module._loss((images, ids, mask), training=False)
        loss.backward()
        losses.append(float(loss))
        grads.append(torch.cat([p.grad.flatten() for p in module.parameters() if p.requires_grad]))
    assert losses[1] == pytest.approx(losses[0], rel=1e-5)
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-6)
    assert sum(p.numel() for p in module.vision_tower().parameters()) > 0  # the real encoder is back in place


def test_precomputed_tokens_are_refused_for_an_encoder_that_trains(tokenizer):
    import torch

    config = tiny_captioner_config(
        "git", tokenizer, 32, CaptionerSizes(vision_width=16, vision_layers=1, text_width=16, text_layers=1)
    )
    module = CaptionerModule("git", config.to_dict())
    pixels, ids, mask = _padded_batch(tokenizer, ["a red star"], 32)
    with pytest.raises(ValueError, match="freeze_vision"):
        module._loss((module.image_tokens(pixels), ids, mask), training=False)
    assert isinstance(module._loss((pixels, ids, mask), training=False), torch.Tensor)
