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
