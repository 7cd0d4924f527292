"""The encoder-signal measures on encoders whose answers are known: one that reads shapes, one blind."""

import numpy as np
import pytest

from condeval.datasets.miniworld import SHAPES, plural
from condeval.encoders.signal import clip_signal, shape_naming

NOUN_SHAPE = {n: shape for shape, nouns in SHAPES.items() for noun in nouns for n in (noun, plural(noun))}


class ShapeReader:
    """Image i's feature is the one-hot of its shape (all zeros when blind), a text's the one-hot of its first shape noun."""

    def __init__(self, shape_of_path: dict[str, str], blind: bool = False):
        self.shape_of_path, self.blind = shape_of_path, blind

    @staticmethod
    def _one_hot(shape: str) -> np.ndarray:
        return np.eye(len(SHAPES), dtype=np.float32)[list(SHAPES).index(shape)]

    def image_features(self, paths):
        if self.blind:
            return np.zeros((len(paths), len(SHAPES)), np.float32)
        return np.stack([self._one_hot(self.shape_of_path[p]) for p in paths])

    def text_features(self, texts):
        return np.stack([self._one_hot(next(NOUN_SHAPE[w] for w in t.split() if w in NOUN_SHAPE)) for t in texts])


def _lone(shape: str, colour: str = "red") -> list[dict]:
    return [{"shape": shape, "colour": colour}]


def test_shape_naming_counts_lone_objects_and_a_tie_is_a_miss():
    shapes = ["circle", "star", "ring", "cross"]
    paths = [f"{k}.jpg" for k in range(6)]
    scenes = [_lone("circle"), _lone("star"), _lone("ring"), _lone("cross"), _lone("star") * 2, _lone("arrow")]
    reader = ShapeReader(dict(zip(paths, ["circle", "star", "ring", "cross", "star", "arrow"])))
    named = shape_naming(reader, paths, scenes, shapes)
    assert named == {
        "naming_images": 4,
        "naming_shapes": 4,
        "naming_accuracy": 1.0,
        "naming_accuracy_low": 1.0,
        "naming_accuracy_high": 1.0,
        "naming_chance": 0.25,
    }
    # a blind encoder scores every shape alike: an arg-max would still name the first shape's images
    assert shape_naming(ShapeReader({}, blind=True), paths, scenes, shapes)["naming_accuracy"] == 0.0
    assert shape_naming(reader, paths, scenes)["naming_shapes"] == len(SHAPES)


def test_shape_naming_needs_a_lone_object():
    with pytest.raises(ValueError, match="single object"):
        shape_naming(ShapeReader({}), ["a.jpg"], [_lone("star") * 2], ["star"])


def test_clip_signal_reports_the_share_of_true_pairs_clipped_at_zero():
    paths = [f"{k}.jpg" for k in range(4)]
    captions = ["a red circle", "a blue star", "a big ring", "a cross"]
    reader = ShapeReader(dict(zip(paths, ["circle", "star", "ring", "star"])))
    signal = clip_signal(reader, paths, captions)
    assert signal["matching_cos_le_0"] == 0.25 and signal["matching_cos_mean"] == 0.75
    assert signal["foil_true_wins"] == 0.75 and signal["R@1"] == 0.75


def test_each_share_comes_with_its_interval_over_the_items():
    """R@k, the foil wins and BERT's AUC carry 95% intervals over images that hold them; AUC's draws an
    image's same-image and other-image pairs together."""
    from condeval.core.conformal import mean_interval
    from condeval.encoders.signal import bert_signal, retrieval_at_k

    rng = np.random.default_rng(0)
    images = rng.normal(size=(60, 8))
    texts = images + rng.normal(0, 1.2, size=images.shape)
    unit = lambda rows: rows / np.linalg.norm(rows, axis=1, keepdims=True)  # noqa: E731
    recall = retrieval_at_k(unit(images), unit(texts))
    assert recall["R@5_low"] < recall["R@5"] < recall["R@5_high"]
    scores = unit(images) @ unit(texts).T
    rank = (scores >= np.diag(scores)[:, None]).sum(axis=1) - 1
    assert (recall["R@1_low"], recall["R@1_high"]) == pytest.approx(mean_interval(rank < 1))

    class Words:
        def text_features(self, texts):
            return unit(np.stack([np.r_[float(t.split()[0]), 1.0, rng.normal(0, 0.3)] for t in texts]))

    captions = [[f"{k % 7} a", f"{k % 7} b"] for k in range(40)]
    bert = bert_signal(Words(), captions)
    assert bert["auc_low"] < bert["auc"] < bert["auc_high"]


def test_dino_sims_means_and_auc_come_with_intervals_over_the_images(monkeypatch):
    """An image is drawn with its positive pair (its second view) and its negative pair (a scene sharing an
    object): each mean's interval is the weighted mean's over images, and the AUC's is no narrower than a point."""
    from condeval.core.conformal import mean_interval
    from condeval.encoders import dino

    rng = np.random.default_rng(1)
    views = {f"{k}.png": rng.normal(size=6) for k in range(40)}
    views |= {f"view-{k}": views[f"{k}.png"] + rng.normal(0, 1.5, size=6) for k in range(40)}

    class Encoder:
        model = type("M", (), {"config": type("C", (), {"image_size": 8})})()

        def image_features(self, images):
            rows = np.stack([views[image] for image in images])
            return rows / np.linalg.norm(rows, axis=1, keepdims=True)

    monkeypatch.setattr(dino, "second_views", lambda scenes, ids, seed, side: [f"view-{k}" for k in ids])
    scenes = [[{"colour": "red", "shape": ("star", "ring")[k % 2]}] for k in range(40)]
    signal = dino.dino_signal(Encoder(), list(views)[:40], scenes, list(range(40)))
    assert signal["pairs"] == {"same_scene": 40, "shared_element": 40}
    for name in ("same_scene_mean", "shared_element_mean", "auc"):
        assert signal[f"{name}_low"] < signal[name] < signal[f"{name}_high"], name
    first = Encoder().image_features(list(views)[:40])
    same = np.sum(first * Encoder().image_features([f"view-{k}" for k in range(40)]), axis=1)
    assert signal["same_scene_mean"] == pytest.approx(same.mean())
    assert (signal["same_scene_mean_low"], signal["same_scene_mean_high"]) == pytest.approx(mean_interval(same))
