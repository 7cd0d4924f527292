"""Caption grounding: colour and shape mentions against the scene, and against shuffled scenes."""

import json
import math

import pytest

from condeval.datasets import DatasetFormatError
from condeval.datasets.scene_mentions import caption_mentions, grounding, mention_scores, read_scenes

RED_BOX = [{"colour": "red", "shape": "square"}]
TWO = [{"colour": "blue", "shape": "star"}, {"colour": "gray", "shape": "ring"}]


def test_mentions_fold_synonyms_and_plurals_onto_shapes():
    assert caption_mentions("two red boxes above a Gray donut") == {
        "colour": ["red", "gray"],
        "shape": ["square", "ring"],
    }
    assert caption_mentions("there is nothing here") == {"colour": [], "shape": []}


def test_precision_counts_mentions_and_recall_counts_the_scene():
    captions = ["a red box", "a blue star and a red star", "a gray ring"]
    scores = mention_scores(captions, [RED_BOX, TWO, TWO])
    # colours: red ok; blue ok, red wrong; gray ok -> 3 of 4; scene colours named: 1/1 + 1/2 + 1/2
    assert scores["colour"] == {"mentions": 4, "precision": 0.75, "recall": 3 / 5}
    # shapes: square ok; star ok, star ok; ring ok -> 4 of 4; scene shapes named: 1 + 1 + 1 of 5
    assert scores["shape"] == {"mentions": 4, "precision": 1.0, "recall": 3 / 5}
    assert math.isnan(mention_scores(["there is"], [RED_BOX])["colour"]["precision"])


def test_a_captioner_that_ignores_the_image_scores_as_well_on_shuffled_scenes():
    scenes = [
        [{"colour": c, "shape": s}]
        for c, s in [("red", "circle"), ("blue", "star"), ("green", "ring"), ("black", "cross")]
    ]
    looking = grounding(["a red circle", "a blue star", "a green ring", "a black cross"], scenes)
    assert looking["colour"]["precision"] == 1.0 and looking["colour"]["precision_shuffled"] == 0.0
    assert looking["shape"]["recall"] == 1.0 and looking["shape"]["recall_shuffled"] == 0.0
    blind = grounding(["a red circle"] * 4, scenes)
    assert blind["colour"]["precision"] == blind["colour"]["precision_shuffled"] == 0.25


def test_mention_scores_refuse_mismatched_lengths():
    with pytest.raises(ValueError, match="2 captions but 1 scenes"):
        mention_scores(["a", "b"], [RED_BOX])


def test_read_scenes_reads_the_sidecar_and_names_a_bad_record(tmp_path):
    from condeval.datasets.miniworld import write_split

    write_split(tmp_path, "val", 3, seed=0)
    scenes = read_scenes(tmp_path, "val")
    assert sorted(scenes) == [1, 2, 3] and {"colour", "shape"} <= set(scenes[1][0])
    (tmp_path / "annotations/scenes_val2014.json").write_text(json.dumps({"7": [{"colour": "red"}]}))
    with pytest.raises(DatasetFormatError, match="image 7"):
        read_scenes(tmp_path, "val")
