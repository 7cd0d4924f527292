"""The grounding report of the image-to-text captioners: mentions against the scene and shuffled scenes."""

import re

import polars as pl
import pytest

from condeval.crel.reports.grounding import VALUES, grounding_markdown, grounding_table
from condeval.datasets.miniworld import COLOURS, SHAPES

# 24 one-object scenes: every colour and every shape twice, colour and shape paired differently each time
SCENE_OBJECTS = [(list(COLOURS)[i % 12], list(SHAPES)[(5 * i + i // 12) % 12]) for i in range(24)]
SCENES = {100 + i: [{"colour": colour, "shape": shape}] for i, (colour, shape) in enumerate(SCENE_OBJECTS)}


def _captions(texts: list[str]) -> pl.DataFrame:
    return pl.DataFrame({"image_id": list(SCENES), "caption": texts})


COPIES = _captions([f"a {colour} {shape}" for colour, shape in SCENE_OBJECTS])
FIXED = _captions(["a large red circle"] * len(SCENES))


def _row(table: pl.DataFrame, model: str, kind: str) -> dict:
    return table.filter((pl.col("model") == model) & (pl.col("kind") == kind)).row(0, named=True)


@pytest.fixture(scope="module")
def table():
    return grounding_table({"copier": COPIES, "fixed": FIXED}, references=COPIES, scenes=SCENES, seed=3)


def test_the_table_has_a_row_per_model_and_kind_reference_first(table):
    assert table.columns == ["model", "kind", *VALUES]
    assert {"precision_low", "precision_high", "recall_low", "recall_high", "recall_shuffled"} <= set(VALUES)
    assert table.select("model", "kind").rows() == [
        (model, kind) for model in ("reference", "copier", "fixed") for kind in ("colour", "shape")
    ]


def test_a_captioner_that_copies_the_scene_is_right_and_beats_its_shuffled_score(table):
    for kind in ("colour", "shape"):
        row = _row(table, "copier", kind)
        assert row["mentions"] == 24 and row["precision"] == 1.0 and row["recall"] == 1.0
        assert row["precision_shuffled"] < 0.5 and row["recall_shuffled"] < 0.5
        assert _row(table, "reference", kind) == {**row, "model": "reference"}


def test_a_captioner_naming_one_colour_scores_its_base_rate_with_or_without_the_image(table):
    row = _row(table, "fixed", "colour")
    assert row["precision"] == row["precision_shuffled"] == 2 / 24  # red is in 2 of the 24 scenes
    assert row["recall"] == row["recall_shuffled"] == 2 / 24


def test_caption_order_does_not_change_the_scores():
    """Captions are aligned by image id, so every captioner meets the same shuffled scenes."""
    neighbours = [
        f"a {c} {s} and a {c2} {s2}" for (c, s), (c2, s2) in zip(SCENE_OBJECTS, SCENE_OBJECTS[1:] + SCENE_OBJECTS[:1])
    ]
    captions = _captions(neighbours)
    in_order = grounding_table({"a": captions, "b": captions}, references=COPIES, scenes=SCENES, seed=3)
    reordered = grounding_table({"a": captions, "b": captions.reverse()}, references=COPIES, scenes=SCENES, seed=3)
    assert in_order.equals(reordered)
    rows_of = {model: in_order.filter(pl.col("model") == model).drop("model") for model in ("a", "b")}
    assert rows_of["a"].equals(rows_of["b"])


def test_the_intervals_draw_an_images_captions_together():
    """Two identical captions per image are one piece of evidence, not two: with the image as the unit
    the interval is wider than with every caption its own, and it holds the estimate."""
    from condeval.datasets.scene_mentions import grounding

    half_right = [f"a {c} circle" if i % 2 else "a red star" for i, (c, _) in enumerate(SCENE_OBJECTS)]
    scenes = [SCENES[image] for image in SCENES]
    doubled = dict(captions=half_right * 2, scenes=scenes * 2, seed=0)
    by_image = grounding(**doubled, units=list(SCENES) * 2)["colour"]
    by_caption = grounding(**doubled)["colour"]
    assert by_image["precision_low"] < by_image["precision"] < by_image["precision_high"]
    width = by_image["precision_high"] - by_image["precision_low"]
    assert width > 1.2 * (by_caption["precision_high"] - by_caption["precision_low"])


def test_the_markdown_says_what_the_columns_mean_and_shows_every_row(table):
    markdown = grounding_markdown(table)
    assert "Precision" in markdown and "Recall" in markdown and "huffled" in markdown
    assert f"1/{len(COLOURS)} for a colour" in markdown and f"1/{len(SHAPES)} for a shape" in markdown
    assert markdown.count("| reference ") == 2 and markdown.count("| fixed ") == 2
    assert "| 1.000 " in markdown and "| 0.083 " in markdown


def test_a_kind_no_caption_names_shows_a_dash():
    no_shapes = _captions(["something red"] * len(SCENES))
    markdown = grounding_markdown(grounding_table({"vague": no_shapes}, references=COPIES, scenes=SCENES))
    assert re.search(r"\| vague\s+\| shape\s+\| 0\s+\| –\s+\|", markdown), markdown


@pytest.mark.parametrize(
    "generated, message",
    [
        ({"reference": COPIES}, "'reference' is taken"),
        ({"blip": COPIES.rename({"caption": "text"})}, "captions of 'blip' lack the columns \\['caption'\\]"),
        ({"blip": COPIES.head(1)}, "captions of 'blip': 1 captions"),
        ({"blip": COPIES.with_columns(image_id=pl.col("image_id") + 1000)}, "captions of 'blip': images \\[1100"),
    ],
)
def test_bad_captions_are_refused_naming_the_captioner(generated, message):
    with pytest.raises(ValueError, match=message):
        grounding_table(generated, references=COPIES, scenes=SCENES)
