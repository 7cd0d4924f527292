"""The encoders' training split: novel shapes are held out of it entirely."""

import json

import pytest

from condeval.datasets.miniworld import SHAPES, plural, write_split
from condeval.encoders.train import coco_split


def test_coco_split_drops_every_image_holding_an_excluded_shape(tmp_path):
    write_split(tmp_path, "train", 80, seed=0)
    scenes = json.loads((tmp_path / "annotations/scenes_train2014.json").read_text())
    images, captions = coco_split(tmp_path, "train", exclude_shapes=["arrow", "hourglass"])
    kept = set(images["image_id"].to_list())
    holding = {int(i) for i, objects in scenes.items() if {o["shape"] for o in objects} & {"arrow", "hourglass"}}
    assert kept == {int(i) for i in scenes} - holding and holding
    novel_words = {n for shape in ("arrow", "hourglass") for noun in SHAPES[shape] for n in (noun, plural(noun))}
    assert not any(set(c.split()) & novel_words for per_image in captions for c in per_image)
    assert len(captions) == len(images)
    first, _ = coco_split(tmp_path, "train", 10, exclude_shapes=["arrow", "hourglass"])
    assert first["image_id"].to_list() == images["image_id"].to_list()[:10]


def test_coco_split_keeps_only_the_requested_images_in_the_split_order(tmp_path):
    write_split(tmp_path, "train", 30, seed=0)
    everything, captions = coco_split(tmp_path, "train")
    wanted = everything["image_id"].to_list()[::3]
    images, kept_captions = coco_split(tmp_path, "train", 4, image_ids=list(reversed(wanted)))
    assert images["image_id"].to_list() == wanted[:4]
    assert kept_captions == captions[:12:3]
    with pytest.raises(ValueError, match="captions_train2014.json: 1 requested image ids"):
        coco_split(tmp_path, "train", image_ids=[wanted[0], 10**9])
