"""A file PIL cannot read (not an image, truncated) is refused naming it wherever images are read: the trust
track's release and samples, the encoders' feature and training batches, CLIPScore's attention-mask
sampling (it escaped as PIL's own OSError)."""

import numpy as np
import pytest
from PIL import Image

from condeval.core.io import DataFileError
from condeval.crc.sampling import sample_captions
from condeval.datasets import DatasetFormatError
from condeval.encoders.data import pixel_values
from condeval.encoders.inputs import ResizedImage, rgb_images
from condeval.trust.data import read_images
from condeval.trust.samples import read_samples, write_samples


def _broken(tmp_path, kind):
    path = tmp_path / f"{kind}.png"
    if kind == "not-an-image":
        path.write_text("a caption, not pixels")
    else:
        Image.fromarray(np.full((32, 32, 3), 200, np.uint8)).save(path)
        path.write_bytes(path.read_bytes()[:60])
    return path


@pytest.mark.parametrize("kind", ["not-an-image", "truncated"])
def test_an_unreadable_image_is_named_by_every_reader(tmp_path, kind):
    path = _broken(tmp_path, kind)
    named = rf"{path.name}: not a readable image"
    with pytest.raises(DataFileError, match=named):
        rgb_images([path])
    with pytest.raises(DataFileError, match=named):
        rgb_images([ResizedImage(path, 8)])
    with pytest.raises(DatasetFormatError, match=named):
        read_images("celeba", tmp_path, [{"path": str(path)}], 16)
    with pytest.raises(DataFileError, match=named):
        pixel_values([str(path)], image_processor=None)  # the file is read before the processor is used
    with pytest.raises(DataFileError, match=named):
        sample_captions(None, [path], [["a", "red", "star"]], [7], seed=0)  # likewise before the sampler


def test_a_truncated_sample_is_named_by_its_file(tmp_path):
    images = np.random.default_rng(0).integers(0, 256, (2, 3, 8, 8), dtype=np.uint8)
    write_samples(images, [[0], [1]], ["a"], [0, 1], [5, 6], tmp_path / "shard", tmp_path / "shard.parquet")
    victim = sorted((tmp_path / "shard").rglob("*.png"))[1]
    victim.write_bytes(victim.read_bytes()[:40])
    with pytest.raises(DataFileError, match=rf"{victim.name}: not a readable image"):
        read_samples(tmp_path / "shard.parquet", ["a"])


def test_a_missing_image_is_named_as_missing(tmp_path):
    with pytest.raises(DataFileError, match=r"gone\.png: file not found"):
        rgb_images([tmp_path / "gone.png"])
