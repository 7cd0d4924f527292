"""The miniature face world: written as CelebA and read back by the real loader, the same bytes per
seed, every condition present, and each attribute visible in the pixels (a pixel classifier reads it)."""

import hashlib

import numpy as np
import pytest

from condeval.datasets.celeba import ATTRIBUTES, all_conditions, load_celeba
from condeval.datasets.faceworld import render_face, sample_face, write_face_world


def _digest(root):
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file())).hexdigest()


def test_the_world_reads_back_as_celeba_and_is_deterministic(tmp_path):
    a, b = write_face_world(tmp_path / "a", 120, seed=3), write_face_world(tmp_path / "b", 120, seed=3)
    assert _digest(a) == _digest(b)
    frame = load_celeba(a)
    assert frame.height == 120 and frame["partition"].to_list()[:96] == ["train"] * 96
    assert set(frame["partition"]) == {"train", "val", "test"}
    present = frame.select(ATTRIBUTES).mean().row(0)
    assert all(0.3 < share < 0.6 for share in present), present


@pytest.mark.slow
def test_each_attribute_is_visible_in_the_pixels():
    """A logistic regression on 16x16 pixels, trained on 600 faces, reads every attribute of 300 others."""
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    faces = [sample_face(rng) for _ in range(900)]
    pixels = np.stack([np.asarray(render_face(f, rng, 32).resize((16, 16))) for f in faces]).reshape(900, -1) / 255.0
    labels = np.array([f.attributes for f in faces])
    for k, name in enumerate(ATTRIBUTES):
        model = LogisticRegression(max_iter=3000, C=0.5).fit(pixels[:600], labels[:600, k])
        assert model.score(pixels[600:], labels[600:, k]) > 0.8, name


def test_every_condition_can_be_drawn():
    rng = np.random.default_rng(1)
    for condition in all_conditions():
        face = sample_face(rng, tuple(int(v) for v in condition))
        assert face.attributes == tuple(int(v) for v in condition)
        assert render_face(face, rng, 32).size == (32, 32)
