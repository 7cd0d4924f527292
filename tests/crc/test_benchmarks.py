"""Benchmark caption tables: subsets drawn by image, clear errors for missing images and pickles."""

import json

import numpy as np
import polars as pl
import pytest

from condeval.crc.benchmarks import foil_it_captions, image_subsets, judged_captions
from condeval.crc.miniature import write_mini_foil_it, write_mini_judgments
from condeval.datasets import DatasetFormatError, counting_dropped_rows
from condeval.datasets.miniworld import write_split


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("coco")
    write_split(root, "val", 80, seed=0)
    return root


def test_image_subsets_draw_whole_images():
    images = pl.Series(np.repeat(np.arange(50), 3))
    subset = image_subsets(images, 0.2, seed=0)
    per_image = pl.DataFrame({"image": images, "subset": subset}).group_by("image").agg(pl.col("subset").n_unique())
    assert (per_image["subset"] == 1).all()
    assert (subset == "calibration").sum() == 30  # 10 images of 50, 3 rows each
    assert not image_subsets(images, 0.2, seed=1).equals(subset)


def test_foil_it_pairs_never_straddle_the_subsets(world, tmp_path):
    paths = write_mini_foil_it(world, tmp_path, seed=0)
    table = foil_it_captions(paths["test"], world / "val2014", calibration_fraction=0.3, seed=0)
    assert table["key"].to_list() == list(range(len(table)))
    assert (table.group_by("pair_id").agg(pl.col("subset").n_unique())["subset"] == 1).all()
    assert 0.15 < (table["subset"] == "calibration").mean() < 0.45


def test_judged_captions_name_a_missing_image_and_refuse_pickles(world, tmp_path):
    paths = write_mini_judgments(world, tmp_path, n_images=10, seed=0)
    table = judged_captions("polaris", paths["polaris"], world, calibration_fraction=0.5, seed=0)
    assert set(table["subset"]) == {"calibration", "test"} and table["human_score"].is_between(0, 1).all()
    flickr = judged_captions("flickr8k", paths["flickr8k"], world)
    assert set(flickr["subset"]) == {"test"} and flickr["human_score"].is_between(1, 4).all()
    document = json.loads(paths["flickr8k"].read_text())
    first = next(iter(document.values()))
    first["image_path"] = "val2014/absent.jpg"
    for judgement in first["human_judgement"]:
        judgement["image_path"] = "val2014/absent.jpg"
    paths["flickr8k"].write_text(json.dumps(document))
    with pytest.raises(DatasetFormatError, match="absent.jpg is missing"):
        judged_captions("flickr8k", paths["flickr8k"], world)
    (tmp_path / "vicr.pkl").write_bytes(b"not even a pickle")
    with pytest.raises(DatasetFormatError, match="allow_pickle"):
        judged_captions("pickle", tmp_path / "vicr.pkl", world)


def test_foil_it_calibrates_on_the_train_file_and_tests_on_the_whole_test_file(world, tmp_path):
    paths = write_mini_foil_it(world, tmp_path, seed=0)
    whole_test = foil_it_captions(paths["test"], world / "val2014", calibration_fraction=0.3, seed=0)
    table = foil_it_captions(
        paths["test"],
        world / "val2014",
        calibration_fraction=1.0,
        seed=0,
        train_json=paths["train"],
        train_image_dir=world / "val2014",
    )
    test, calibration = table.filter(pl.col("subset") == "test"), table.filter(pl.col("subset") == "calibration")
    assert len(test) == len(whole_test) and set(test["path"]) == set(whole_test["path"])  # the whole test file
    train_images = set(
        json.loads(paths["train"].read_text())["images"][k]["file_name"]
        for k in range(len(json.loads(paths["train"].read_text())["images"]))
    )
    assert {p.rsplit("/", 1)[-1] for p in calibration["path"]} == train_images  # fraction 1: all of the train file
    assert not set(calibration["path"]) & set(test["path"])
    tenth = foil_it_captions(
        paths["test"], world / "val2014", calibration_fraction=0.25, seed=0, train_json=paths["train"]
    )
    assert tenth.filter(pl.col("subset") == "calibration")["path"].n_unique() == round(0.25 * len(train_images))
    assert (tenth.group_by("pair_id", "subset").len()["len"] == 2).all()  # an original and its foil together


def test_judged_captions_count_the_captions_left_without_words(world, tmp_path):
    paths = write_mini_judgments(world, tmp_path, n_images=10, seed=0)
    whole = judged_captions("flickr8k", paths["flickr8k"], world)
    document = json.loads(paths["flickr8k"].read_text())
    first = next(iter(document.values()))
    first["human_judgement"].append({"caption": "...!", "rating": 2.0})  # text, but no word once normalised
    paths["flickr8k"].write_text(json.dumps(document))
    with counting_dropped_rows() as dropped:
        table = judged_captions("flickr8k", paths["flickr8k"], world)
    assert len(table) == len(whole)
    assert dropped.as_dict()[str(paths["flickr8k"])] == {"no word left after normalisation": 1}


def test_a_pickled_release_splits_by_its_own_subsets_and_counts_the_rows_of_others(world, tmp_path):
    """VICR's Table 5 split is the release's own (val calibrates, test tests), not a draw of our own."""
    import pandas as pd

    images = sorted(p.relative_to(world).as_posix() for p in (world / "val2014").glob("*.jpg"))[:6]
    frame = pd.DataFrame(
        {
            "image_path": images,
            "candidates": [f"a red cube number {k}" for k in range(6)],
            "human_scores": [[1.0, 2.0]] * 6,
            "subset": ["val", "val", "test", "test", "test", "train"],
        }
    )
    frame.to_pickle(tmp_path / "VICR.pkl")
    with counting_dropped_rows() as dropped:
        table = judged_captions(
            "pickle",
            tmp_path / "VICR.pkl",
            world,
            allow_pickle=True,
            subsets={"calibration": "val", "test": "test"},
            calibration_fraction=0.9,
        )
    assert table["subset"].to_list() == ["calibration"] * 2 + ["test"] * 3  # the fraction is not used
    assert dropped.as_dict()[str(tmp_path / "VICR.pkl")] == {"in another subset": 1}
    with pytest.raises(
        DatasetFormatError, match=r"no row of subset 'validation' \(its subsets: \['test', 'train', 'val'\]\)"
    ):
        judged_captions(
            "pickle", tmp_path / "VICR.pkl", world, allow_pickle=True, subsets={"calibration": "validation"}
        )
    with pytest.raises(ValueError, match="only a pickle release has its own subsets"):
        judged_captions("flickr8k", tmp_path / "VICR.pkl", world, subsets={"test": "test"})
