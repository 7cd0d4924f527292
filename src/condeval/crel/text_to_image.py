"""CReL on text-to-image (Sec. 4.3, App. F.2): the items, the two metrics and Table 3.

Every val image is one item: its evaluation caption (the smallest annotation id,
:func:`condeval.datasets.coco.evaluation_pairs`) is the prompt, and each model draws one image for
it. All features are unit rows. The condition X is the caption's CLIP text feature. Per metric:

========  ==========================================  ==============================================
metric    Y (what the VAE models)                     ground truth GT in ρ(Ŷ, GT) = cos(Ŷ, GT)
========  ==========================================  ==============================================
``clip``  CLIP image feature of the generated image   CLIP text feature of the caption (CLIP-SIM)
``dino``  DINOv2 feature of the generated image       DINOv2 feature of the real image (DINO-SIM)
========  ==========================================  ==============================================

Folds, calibration, the worst-case search and the table are those of image-to-text
(:mod:`condeval.crel.image_to_text`): the same code for both experiments.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from condeval.crel.image_to_text import aligned_features, assign_folds, assign_unit_folds, feature_sources, table2

__all__ = ["METRICS", "FEATURE_SOURCES", "SOURCE_ENCODERS", "metric_arrays", "item_arrays", "table3"]

METRICS = ("clip", "dino")
#: The feature shard lists a model's CReL jobs read, and the encoder that makes each. The generated
#: images (the first) are the items; the val-wide sources may hold more images.
SOURCE_ENCODERS = {"generated_clip": "clip", "caption_clip": "clip", "real_dino": "dino", "generated_dino": "dino"}
FEATURE_SOURCES = tuple(SOURCE_ENCODERS)
# Sources a metric compares with each other: one encoder must have made each group.
ONE_ENCODER_SOURCES = (("caption_clip", "generated_clip"), ("real_dino", "generated_dino"))


def metric_arrays(
    metric: str, caption_clip: np.ndarray, generated_clip: np.ndarray, real_dino: np.ndarray, generated_dino: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(condition X, output Y, ground truth GT) of one metric, row-aligned per item.

    Every source must be a numeric (n, width) array of the same n; the two CLIP sources share a width,
    and so do the two DINO ones (a source of the other encoder, or rows of other items, is refused).
    """
    if metric not in METRICS:
        raise ValueError(f"unknown text-to-image metric {metric!r}; expected one of {METRICS}")
    arrays = feature_sources(
        {
            "caption_clip": caption_clip,
            "generated_clip": generated_clip,
            "real_dino": real_dino,
            "generated_dino": generated_dino,
        },
        ONE_ENCODER_SOURCES,
    )
    if metric == "clip":
        return arrays["caption_clip"], arrays["generated_clip"], arrays["caption_clip"]
    return arrays["caption_clip"], arrays["generated_dino"], arrays["real_dino"]


def item_arrays(shards: dict[str, list], metric: str, seed: int, encoders: dict | None = None, units=None):
    """(image ids, X, Y, GT, folds) of one metric from the :data:`FEATURE_SOURCES` shard lists.

    ``encoders`` maps ``clip`` and ``dino`` to the encoder (folder or manifest) every shard of a
    source must come from; image ids must agree across sources. ``units`` maps each item's image id
    to its exchangeable unit when items share one (several images drawn for one caption): the folds
    are then drawn by unit (:func:`~condeval.crel.image_to_text.assign_unit_folds`), so no caption
    lies in two folds. Default: each item its own unit.
    """
    absent = [name for name in FEATURE_SOURCES if name not in shards]
    if absent:
        raise ValueError(f"shards lack the source(s) {absent} (need {list(FEATURE_SOURCES)})")
    ids, arrays = aligned_features(
        {name: shards[name] for name in FEATURE_SOURCES},
        encoders,
        source_encoders=SOURCE_ENCODERS,
        groups=ONE_ENCODER_SOURCES,
        subset=True,
    )
    X, Y, GT = metric_arrays(metric, **arrays)
    if units is None:
        return ids, X, Y, GT, assign_folds(ids, seed)
    if not isinstance(units, Mapping):
        raise TypeError(
            f"units must map each image id to its unit ({{image_id: caption_id}}); got {type(units).__name__}"
        )
    missing = [int(i) for i in ids if units.get(int(i)) is None]
    if missing:
        raise ValueError(f"units names no unit for {len(missing)} item(s), e.g. image id {missing[0]}")
    return ids, X, Y, GT, assign_unit_folds([units[int(i)] for i in ids], seed)


def table3(scores):
    """Table 3 from per-item scores (``model``, ``metric``, ``rho``, ``crel_rho``): Table 2's summary
    (:func:`condeval.crel.image_to_text.table2`) over the text-to-image metrics (:data:`METRICS`).

    Examples
    --------
    >>> import polars as pl
    >>> from condeval.crel.text_to_image import table3
    >>> scores = pl.DataFrame({"model": ["a", "a", "b", "b"], "metric": "dino", "image_id": [0, 1, 0, 1],
    ...                        "rho": [0.8, 0.7, 0.6, 0.5], "crel_rho": [0.2, 0.3, 0.4, 0.5]})
    >>> table3(scores).select("metric", "model", "rank_mean", "rank_crel").rows()   # DINO-SIM ranks swap
    [('dino', 'a', 1, 2), ('dino', 'b', 2, 1)]
    >>> table3(scores.with_columns(metric=pl.lit("bert")))      # an image-to-text metric is refused
    Traceback (most recent call last):
    ...
    ValueError: scores hold metric(s) ['bert']; this table's are ['clip', 'dino']
    """
    return table2(scores, METRICS)
