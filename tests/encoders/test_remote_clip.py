"""The converted multilingual LAION CLIPs of the CLIPScore paper (their own modelling code, an XLM-R text tower)
load once, read images through their CLIP vision tower and captions up to XLM-R's 512 tokens."""

import numpy as np
import pytest
from PIL import Image

B32 = "calpt/CLIP-ViT-B-32-xlm-roberta-base-laion5B-s13B-b90k"


@pytest.fixture(scope="module")
def remote_clip(tmp_path_factory):
    """The rehearsal's repositories: the checkpoint in the VisionTextDualEncoder layout with its own code, its
    XLM-R tokenizer and LAION image processor (condeval.rehearsal.models)."""
    from condeval.rehearsal.models import write_hub_repo

    root = tmp_path_factory.mktemp("hub")
    names = {
        "model": B32,
        "tokenizer": "FacebookAI/xlm-roberta-base",
        "processor": "laion/CLIP-ViT-B-32-laion2B-s34B-b79K",
    }
    return {key: write_hub_repo(repo, root / repo) for key, repo in names.items()}


def test_the_checkpoint_is_read_once(remote_clip, monkeypatch):
    import transformers.modeling_utils as modeling

    from condeval.encoders.features import ClipEncoder

    opened, safe_open = [], modeling.safe_open

    def counting(path, *args, **kwargs):
        opened.append(str(path))
        return safe_open(path, *args, **kwargs)

    monkeypatch.setattr(modeling, "safe_open", counting)
    encoder = ClipEncoder(
        remote_clip["model"],
        tokenizer=remote_clip["tokenizer"],
        image_processor=remote_clip["processor"],
        trust_remote_code=True,
    )
    weights = [path for path in opened if path.endswith(".safetensors")]
    assert len(weights) == len(set(weights)) >= 1, f"the checkpoint's weights were opened {len(weights)} times"
    assert encoder.model.__class__.__module__.startswith("transformers_modules")  # the folder's own code
    assert encoder.max_length == 512  # XLM-R: 514 positions, offset by the padding id


def test_its_image_and_caption_features_come_from_its_two_towers(remote_clip):
    import torch

    from condeval.encoders.features import ClipEncoder

    encoder = ClipEncoder(
        remote_clip["model"],
        tokenizer=remote_clip["tokenizer"],
        image_processor=remote_clip["processor"],
        trust_remote_code=True,
    )
    image = Image.fromarray(np.random.default_rng(0).integers(0, 256, (300, 400, 3), dtype=np.uint8))
    pixels = encoder.image_processor([image], return_tensors="pt")["pixel_values"]
    expected = encoder.model.get_image_features(pixel_values=pixels)
    expected = torch.nn.functional.normalize(expected if torch.is_tensor(expected) else expected.pooler_output, dim=-1)
    np.testing.assert_allclose(encoder.image_features([image]), expected.detach().numpy(), atol=1e-5)
    texts = encoder.text_features(["a red star", " ".join(["word"] * 700)])  # the long one is truncated, not an error
    assert texts.shape == (2, encoder.width) and np.isfinite(texts).all()
