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

import numpy as np

from condeval.crel.image_to_text import aligned_features, assign_folds, table2

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
    """(condition X, output Y, ground truth GT) of one metric, row-aligned per item."""
    if metric == "clip":
        return caption_clip, generated_clip, caption_clip
    if metric == "dino":
        return caption_clip, generated_dino, real_dino
    raise ValueError(f"unknown text-to-image metric {metric!r}; expected one of {METRICS}")


def item_arrays(shards: dict[str, list], metric: str, seed: int, encoders: dict | None = None):
    """(image ids, X, Y, GT, folds) of one metric from the :data:`FEATURE_SOURCES` shard lists.

    ``encoders`` maps ``clip`` and ``dino`` to the encoder (folder or manifest) every shard of a
    source must come from; image ids must agree across sources.
    """
    ids, arrays = aligned_features({name: shards[name] for name in FEATURE_SOURCES}, encoders,
                                   source_encoders=SOURCE_ENCODERS, groups=ONE_ENCODER_SOURCES, subset=True)  # fmt: skip
    X, Y, GT = metric_arrays(metric, **arrays)
    return ids, X, Y, GT, assign_folds(ids, seed)


def table3(scores):
    """Table 3 from per-item scores (``model``, ``metric``, ``rho``, ``crel_rho``): Table 2's summary
    (:func:`condeval.crel.image_to_text.table2`) over the text-to-image metrics."""
    return table2(scores)
