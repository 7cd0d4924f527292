"""The mini benchmarks are written in the real formats and read back by the real loaders."""

import json

import numpy as np
import pytest

from condeval.crc.miniature import write_mini_foil_it, write_mini_foil_nocaps, write_mini_judgments, write_mini_rich_hf
from condeval.datasets.foil import load_foil_it, load_foil_nocaps
from condeval.datasets.judgments import load_flickr8k_expert, load_polaris
from condeval.datasets.miniworld import SHAPES, corrupt_caption, images_with_shapes, plural, vocabulary, write_split
from condeval.datasets.rich_hf import pick_a_pic_prompts, read_rich_hf


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
    # Images are listed as the world lists them (id, file name, width, height).
    world_images = {i["id"]: i for i in json.loads((world / "annotations/captions_val2014.json").read_text())["images"]}
    for image in json.loads(paths["test"].read_text())["images"]:
        assert (image["width"], image["height"], image["file_name"]) == tuple(
            world_images[image["id"]][k] for k in ("width", "height", "file_name")
        )
    # Deterministic per seed, different across seeds.
    again = write_mini_foil_it(world, tmp_path / "again", seed=0)
    assert again["test"].read_bytes() == paths["test"].read_bytes()
    assert write_mini_foil_it(world, tmp_path / "other", seed=1)["test"].read_bytes() != paths["test"].read_bytes()


def test_mini_foil_it_takes_as_many_images_per_file_as_asked_and_refuses_more_than_there_are(world, tmp_path):
    paths = write_mini_foil_it(world, tmp_path, seed=0, images={"train": 30, "test": 12})
    images = {split: {i["id"] for i in json.loads(path.read_text())["images"]} for split, path in paths.items()}
    assert not images["train"] & images["test"]
    # An image whose caption names no shape has no foil and is left out; at most a few are.
    assert 27 <= len(images["train"]) <= 30 and 10 <= len(images["test"]) <= 12
    with pytest.raises(ValueError, match="45 train and 20 test images asked, 60 there"):
        write_mini_foil_it(world, tmp_path / "many", seed=0, images={"train": 45, "test": 20})


def _shape_nouns(shapes):
    return {n for shape in shapes for noun in SHAPES[shape] for n in (noun, plural(noun))}


def test_mini_foil_nocaps_domains_follow_the_novel_shapes(tmp_path):
    novel = ["arrow", "hourglass"]
    path = write_mini_foil_nocaps(tmp_path, {"in": 25, "near": 25, "out": 25}, novel, seed=0)
    frame = load_foil_nocaps(path, tmp_path)
    novel_nouns, seen_nouns = _shape_nouns(novel), _shape_nouns([s for s in SHAPES if s not in novel])
    for domain, count in frame.filter(~frame["foil"]).group_by("domain").len().iter_rows():
        assert count >= 22, domain  # a caption naming no shape is skipped, rarely
    named = {d: set() for d in ("in", "near", "out")}
    for domain, words, references in frame.filter(~frame["foil"]).select("domain", "words", "references").iter_rows():
        named[domain] |= {w for text in [" ".join(words), *references] for w in text.split()}
    assert not named["in"] & novel_nouns and named["in"] & seen_nouns
    assert not named["out"] & seen_nouns and named["out"] & novel_nouns
    assert named["near"] & novel_nouns and named["near"] & seen_nouns
    foils = frame.filter(frame["foil"])
    assert all(sum(labels) == 1 for labels in foils["labels"])
    with pytest.raises(ValueError, match="novel shapes"):
        write_mini_foil_nocaps(tmp_path / "none", {"in": 1}, [], seed=0)


def test_images_with_shapes_reads_the_scenes_sidecar(world):
    scenes = json.loads((world / "annotations/scenes_val2014.json").read_text())
    with_star = images_with_shapes(world, "val", ["star"])
    assert with_star == {int(i) for i, objects in scenes.items() if any(o["shape"] == "star" for o in objects)}
    assert 0 < len(with_star) < len(scenes)
    with pytest.raises(ValueError, match="unknown shapes"):
        images_with_shapes(world, "val", ["hexagon"])


def test_corrupt_caption_changes_only_object_words_and_marks_them():
    rng = np.random.default_rng(0)
    tokens = "there are two red circles and a small blue box on a noisy background".split()
    for n_errors in range(5):
        words, errors = corrupt_caption(tokens, n_errors, rng)
        changed = [k for k, (a, b) in enumerate(zip(tokens, words)) if a != b]
        assert changed == [k for k, e in enumerate(errors) if e]
        assert len(changed) == min(n_errors, 6)  # two, red, circles, small, blue, box
        assert set(words) <= set(vocabulary())
        assert all(tokens[k] not in ("there", "are", "and", "a", "on", "noisy", "background") for k in changed)
    assert corrupt_caption(["there", "is"], 2, rng) == (["there", "is"], [0, 0])


def test_mini_rich_hf_round_trips_through_the_tfrecord_reader(tmp_path):
    paths = write_mini_rich_hf(tmp_path, {"train": 12, "dev": 4, "test": 6}, seed=0)
    prompts = pick_a_pic_prompts([paths["prompts"]])
    frames = {split: read_rich_hf(paths[split], prompts, tmp_path / "images") for split in ("train", "dev", "test")}
    assert [len(f) for f in frames.values()] == [12, 4, 6]  # no record dropped: the split is the dataset's
    errors = [sum(labels) for f in frames.values() for labels in f["labels"].to_list()]
    assert min(errors) == 0 and max(errors) >= 2
    assert frames["test"]["misalignment_score"].to_list() == [
        float(sum(labels)) for labels in frames["test"]["labels"].to_list()
    ]


def test_mini_judgments_round_trip_and_ratings_follow_the_errors(world, tmp_path):
    paths = write_mini_judgments(world, tmp_path, n_images=20, seed=0)
    flickr, polaris = load_flickr8k_expert(paths["flickr8k"]), load_polaris(paths["polaris"])
    assert flickr["image"].n_unique() == 20 and polaris["image"].n_unique() == 20
    assert set(flickr["image"]).isdisjoint(polaris["image"])
    assert flickr["human_score"].min() >= 1 and flickr["human_score"].max() <= 4
    assert 0 <= polaris["human_score"].min() and polaris["human_score"].max() <= 1
    assert all(len(refs) == 4 for refs in polaris["references"].to_list())  # the image's other four captions
    # Rated from the true alignment: the error-free candidate scores highest on average.
    first = polaris.group_by("image", maintain_order=True).first()
    assert first["human_score"].mean() > polaris["human_score"].mean() + 0.2
