"""The trust score's extractors: tiny DINOv3 and SigLIP vision towers round-trip through from_pretrained,
and the mean-patch feature averages exactly the patch tokens (not DINOv3's CLS or registers)."""

import pytest
import torch

from condeval.encoders.patch_features import mean_patch_features, patch_tokens, tiny_dinov3, tiny_siglip_vision


@pytest.mark.parametrize("build", [tiny_dinov3, tiny_siglip_vision])
def test_round_trip_and_patch_tokens(build, tmp_path):
    from transformers import AutoModel

    torch.manual_seed(0)
    model = build(32, width=32, layers=1, heads=2, patch_size=8).eval()
    model.save_pretrained(tmp_path)
    loaded = AutoModel.from_pretrained(tmp_path).eval()
    assert type(loaded) is type(model)
    pixels = torch.randn(3, 3, 32, 32)
    with torch.no_grad():
        tokens = patch_tokens(loaded, pixels)
        assert tokens.shape == (3, 16, 32)  # (32 / 8)^2 patches
        torch.testing.assert_close(mean_patch_features(model, pixels), tokens.mean(1))
        hidden = model(pixel_values=pixels).last_hidden_state
    extra = 1 + model.config.num_register_tokens if model.config.model_type == "dinov3_vit" else 0
    assert hidden.shape[1] == 16 + extra
    torch.testing.assert_close(tokens, hidden[:, extra:])


@pytest.mark.parametrize("kind", ["dinov3", "siglip"])
def test_the_contrastive_objective_prefers_matching_views_and_the_trained_tower_loads(kind, tmp_path):
    import numpy as np
    from transformers import AutoModel

    from condeval.encoders.patch_features import ContrastivePatchEncoder, augmented_views, train_patch_encoder

    images = np.random.default_rng(0).integers(0, 256, (48, 6, 16, 16), dtype=np.uint8)  # six channels, as RxRx1
    torch.manual_seed(0)
    config = (tiny_dinov3 if kind == "dinov3" else tiny_siglip_vision)(
        16, width=32, layers=1, heads=2, patch_size=4
    ).config
    config.num_channels = 6
    module = ContrastivePatchEncoder(kind, config.to_dict())
    views = augmented_views(images[:16], seed=1)
    assert views.shape == images[:16].shape and views.dtype == np.uint8 and (views != images[:16]).any()
    with torch.no_grad():  # identical views on the diagonal: the loss must prefer them to a shuffled pairing
        matched = module._loss((images[:16], images[:16]), training=False)
        mismatched = module._loss((images[:16], images[:16][::-1].copy()), training=False)
    assert matched < mismatched
    summary = train_patch_encoder(images, tmp_path / kind, kind=kind, model=dict(width=32, layers=1, heads=2, patch_size=4),
                                  epochs=1, batch_size=16, lr=1e-3, val_images=16, seed=0)  # fmt: skip
    loaded = AutoModel.from_pretrained(tmp_path / kind)
    assert loaded.config.num_channels == 6 and summary["epochs_run"] == 1
