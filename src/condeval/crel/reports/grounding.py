"""Do the captioners look at the image? Colour and shape mentions of their captions against the scenes.

Issue 17's check on the image-to-text captioners: Table 2 ranks captioners, which means something only
if their captions describe the image rather than follow a caption prior. Each captioner's sampled
captions are scored by :func:`condeval.datasets.scene_mentions.grounding` against the mini-world's
scene truth and against shuffled scenes (the score a captioner reaches by ignoring the image). The
evaluation captions, written from the scenes, are scored the same way as a sanity row (precision 1).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import polars as pl

from condeval.core.tables import markdown_table, with_bounds
from condeval.datasets.miniworld import COLOURS, SHAPES
from condeval.datasets.scene_mentions import KINDS, grounding

__all__ = ["REFERENCE", "grounding_table", "grounding_markdown"]

#: The model name of the evaluation captions' rows.
REFERENCE = "reference"
VALUES = (
    "mentions",
    "precision",
    "precision_low",
    "precision_high",
    "precision_shuffled",
    "recall",
    "recall_low",
    "recall_high",
    "recall_shuffled",
)
CHOICES = {"colour": len(COLOURS), "shape": len(SHAPES)}


def grounding_table(
    generated: Mapping[str, pl.DataFrame],
    references: pl.DataFrame,
    scenes: Mapping[int, Sequence[dict]],
    seed: int = 0,
) -> pl.DataFrame:
    """Precision and recall of colour and shape mentions per captioner, beside the shuffled-scene baseline.

    Parameters
    ----------
    generated : mapping of str to polars.DataFrame
        Captioner name -> its sampled captions, columns ``image_id`` and ``caption``.
    references : polars.DataFrame
        The evaluation captions (one per image), columns ``image_id`` and ``caption``: the sanity row
        ``reference``, whose precision is 1 wherever captions are written from the scenes.
    scenes : mapping of int to sequence of dict
        Image id -> its objects (dicts with ``colour`` and ``shape``), as
        :func:`condeval.datasets.scene_mentions.read_scenes` returns them.
    seed : int
        Seed of the scene derangement. Every captioner's captions are sorted by image id, so captioners
        that caption the same images are scored against the same shuffled scenes.

    Returns
    -------
    polars.DataFrame
        One row per captioner (``reference`` first) and kind (``colour``, ``shape``): ``model``,
        ``kind``, ``mentions``, ``precision``, ``precision_shuffled``, ``recall``, ``recall_shuffled``,
        and the 95% intervals over images of precision and recall (``precision_low``, ``_high``,
        ``recall_low``, ``_high``). Precision is NaN where no caption names that kind.

    Raises
    ------
    ValueError
        Naming the captioner: a captioner called ``reference``, a missing column, fewer than two
        captions, or image ids that have no scene.
    """
    if REFERENCE in generated:
        raise ValueError(f"captioner name {REFERENCE!r} is taken by the evaluation captions' rows")
    rows = []
    for model, captions in {REFERENCE: references, **generated}.items():
        texts, image_scenes, image_ids = _aligned(model, captions, scenes)
        scores = grounding(texts, image_scenes, seed=seed, units=image_ids)
        rows += [{"model": model, "kind": kind, **{name: scores[kind][name] for name in VALUES}} for kind in KINDS]
    schema = {"model": pl.String, "kind": pl.String, "mentions": pl.Int64, **dict.fromkeys(VALUES[1:], pl.Float64)}
    return pl.DataFrame(rows, schema=schema)


def _aligned(model: str, captions: pl.DataFrame, scenes: Mapping[int, Sequence[dict]]) -> tuple[list, list, list]:
    """``model``'s captions sorted by image id, their images' scenes and ids, checked."""
    missing_columns = {"image_id", "caption"} - set(captions.columns)
    if missing_columns:
        raise ValueError(f"captions of {model!r} lack the columns {sorted(missing_columns)}")
    if captions.height < 2:
        raise ValueError(f"captions of {model!r}: {captions.height} captions, the shuffled baseline needs two")
    captions = captions.sort("image_id")
    image_ids = captions["image_id"].to_list()
    unknown = sorted({image_id for image_id in image_ids if image_id not in scenes})
    if unknown:
        raise ValueError(f"captions of {model!r}: images {unknown[:5]} ({len(unknown)} in all) have no scene")
    return captions["caption"].to_list(), [scenes[image_id] for image_id in image_ids], image_ids


def grounding_markdown(table: pl.DataFrame) -> str:
    """:func:`grounding_table` as Markdown: a short header saying what the columns mean, then the table."""
    header = (
        "Colour and shape mentions of each captioner's sampled captions, checked against the image's scene. "
        "Precision: the share of mentions that name a colour (shape) the image holds. Recall: the share of "
        "the image's colours (shapes) that its caption names. *Shuffled*: the same captions checked against "
        "other images' scenes, the score of a captioner that ignores the image; a captioner looks at the image "
        "only as far as it beats its shuffled score. Intervals: 95% over images, each drawn with its captions. "
        "`reference` is the evaluation captions, written from the "
        f"scenes (precision 1). Chance for a one-object scene: 1/{CHOICES['colour']} for a colour, "
        f"1/{CHOICES['shape']} for a shape."
    )
    rows = [
        {
            "model": r["model"],
            "kind": r["kind"],
            "mentions": r["mentions"],
            "precision [95% CI]": with_bounds(r, "precision"),
            "precision shuffled": with_bounds(r, "precision_shuffled"),
            "recall [95% CI]": with_bounds(r, "recall"),
            "recall shuffled": with_bounds(r, "recall_shuffled"),
        }
        for r in table.iter_rows(named=True)
    ]
    return f"{header}\n\n{markdown_table(pl.DataFrame(rows))}"
