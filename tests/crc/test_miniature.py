"""The mini benchmarks are written in the real formats and read back by the real loaders."""
import numpy as np
import pytest

from condeval.crc.miniature import write_mini_foil_it
from condeval.datasets.foil import load_foil_it
from condeval.datasets.miniworld import SHAPES, plural, write_split


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("coco")
    write_split(root, "val", 60, seed=0)
    return root


def test_mini_foil_it_round_trips_through_the_foil_it_loader(world, tmp_path):
    paths = write_mini_foil_it(world, tmp_path, seed=0)
    frames = {split: load_foil_it(path, world / "val2014") for split, path in paths.items()}
    assert set(frames["train"]["image_id"]).isdisjoint(frames["test"]["image_id"])
    pairs = sum(len(f) for f in frames.values()) // 2
    assert pairs >= 55  # nearly every evaluation caption names a shape
    nouns = {n for names in SHAPES.values() for noun in names for n in (noun, plural(noun))}
    for frame in frames.values():
        foils = frame.filter(frame["foil"])
        for words, labels, target, foil_word in foils.select("words", "labels", "target_word", "foil_word").iter_rows():
            k = int(np.argmax(labels))
            assert sum(labels) == 1 and words[k] == foil_word and target in nouns and foil_word in nouns
    # Deterministic per seed, different across seeds.
    again = write_mini_foil_it(world, tmp_path / "again", seed=0)
    assert again["test"].read_bytes() == paths["test"].read_bytes()
    assert write_mini_foil_it(world, tmp_path / "other", seed=1)["test"].read_bytes() != paths["test"].read_bytes()
