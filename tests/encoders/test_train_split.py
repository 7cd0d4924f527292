"""The encoders' training split: novel shapes are held out of it entirely."""

import json

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
