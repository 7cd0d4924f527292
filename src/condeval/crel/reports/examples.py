"""Fig. 4 of CReL (Sec. 4.2): per example image, each captioner's caption and its worst case in words.

A model's worst case is a point of feature space (``Dec(z_worst)``), not a sentence; it is shown
as the real evaluation caption nearest to it (:func:`condeval.crel.image_to_text.nearest_captions`).
Everything arrives by name (model, metric, image id), never by the order of a file list.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import polars as pl

from condeval.crel.image_to_text import nearest_captions
from condeval.crel.reports.image_to_text import example_images

__all__ = ["rank_models", "fig4_examples", "fig12_examples"]

_SHOWN = ("rho", "rank_rho", "crel_rho", "rank_crel")


def rank_models(scores: pl.DataFrame) -> pl.DataFrame:
    """``scores`` with each model's rank on its image by ρ and by CReL-ρ (1 = best; ties share the best rank).

    Parameters
    ----------
    scores : polars.DataFrame
        Per (metric, model, image_id): ``rho`` and ``crel_rho``.

    Returns
    -------
    polars.DataFrame
        With ``rank_rho`` and ``rank_crel`` (Int64) added.
    """
    return scores.with_columns(
        pl.col("rho").rank("min", descending=True).over("metric", "image_id").cast(pl.Int64).alias("rank_rho"),
        pl.col("crel_rho").rank("min", descending=True).over("metric", "image_id").cast(pl.Int64).alias("rank_crel"),
    )


def fig4_examples(
    scores: pl.DataFrame,
    crels: Mapping[tuple[str, str], object],
    generated: pl.DataFrame,
    references: pl.DataFrame,
    galleries: Mapping[str, tuple[np.ndarray, np.ndarray]],
    n_examples: int,
) -> list[dict]:
    """The examples that :func:`condeval.crel.reports.image_to_text.plot_examples` draws.

    Parameters
    ----------
    scores : polars.DataFrame
        Per (metric, model, image_id): ``rho``, ``crel_rho`` and the latent worst case ``z_worst``.
    crels : mapping
        The calibrated CReL of each (model, metric).
    generated : polars.DataFrame
        ``model``, ``image_id``, ``caption``: each model's sampled caption per image.
    references : polars.DataFrame
        ``image_id``, ``caption`` (the evaluation caption) and ``path`` (the image file).
    galleries : mapping
        Per metric: (image ids, unit features) of the evaluation captions in that metric's space.
    n_examples : int
        Images per metric, those whose model rankings by ρ and CReL-ρ disagree most
        (:func:`condeval.crel.reports.image_to_text.example_images`).

    Returns
    -------
    list of dict
        Per example: ``metric``, ``image_path``, ``reference`` and ``models``, a list (in the
        order of ``crels``) of dicts with ``model``, ``caption``, ``worst_caption`` and the
        ρ / CReL-ρ values and ranks.

    Raises
    ------
    KeyError
        Naming the (model, metric, image) whose score or caption is missing.
    """
    caption_of = dict(zip(references["image_id"].to_list(), references["caption"].to_list()))
    path_of = dict(zip(references["image_id"].to_list(), references["path"].to_list()))
    sampled = {(m, i): c for m, i, c in generated.select("model", "image_id", "caption").iter_rows()}
    labelled = {
        metric: (ids, features, [caption_of[k] for k in ids.tolist()]) for metric, (ids, features) in galleries.items()
    }
    return _examples(scores, crels, sampled, labelled, caption_of, path_of, n_examples, "caption", "worst_caption")


def fig12_examples(
    scores: pl.DataFrame,
    crels: Mapping[tuple[str, str], object],
    generated: Mapping[tuple[str, int], str],
    references: pl.DataFrame,
    galleries: Mapping[str, tuple[np.ndarray, np.ndarray]],
    n_examples: int,
) -> list[dict]:
    """Fig. 12's examples (text-to-image): per test caption, each model's image and the real image nearest
    its worst case.

    As :func:`fig4_examples`, with ``generated`` mapping (model, image id) to the generated image's
    file and ``galleries`` holding, per metric, the real val images' (ids, unit features) in that
    metric's space (CLIP-SIM: CLIP image features; DINO-SIM: DINO features). Per model the dicts hold
    ``image`` and ``worst_image`` (a real image's file) beside the ρ / CReL-ρ values and ranks.
    """
    caption_of = dict(zip(references["image_id"].to_list(), references["caption"].to_list()))
    path_of = dict(zip(references["image_id"].to_list(), references["path"].to_list()))
    labelled = {
        metric: (ids, features, [path_of[k] for k in ids.tolist()]) for metric, (ids, features) in galleries.items()
    }
    return _examples(scores, crels, dict(generated), labelled, caption_of, path_of, n_examples, "image", "worst_image")


def _examples(scores, crels, sampled, galleries, caption_of, path_of, n_examples, shown, worst) -> list[dict]:
    """The examples per metric: the items whose rankings by ρ and CReL-ρ disagree most, each model's
    output (``sampled[model, id]``) and the gallery label nearest its decoded worst case."""
    ranked = rank_models(scores)
    examples = []
    for metric, (_, gallery, labels) in galleries.items():
        for image_id in example_images(scores, metric, n_examples):
            models = [
                _model_example(
                    ranked, crels[model, metric], model, metric, image_id, sampled, gallery, labels, shown, worst
                )
                for model, crel_metric in crels
                if crel_metric == metric
            ]
            examples.append(
                {"metric": metric, "image_path": path_of[image_id], "reference": caption_of[image_id], "models": models}
            )
    return examples


def _model_example(ranked, crel, model, metric, image_id, sampled, gallery, labels, shown, worst) -> dict:
    row = ranked.filter((pl.col("metric") == metric) & (pl.col("model") == model) & (pl.col("image_id") == image_id))
    if row.height != 1 or (model, image_id) not in sampled:
        raise KeyError(f"no score or {shown} of model {model!r}, metric {metric!r}, image {image_id}")
    row = row.row(0, named=True)
    nearest = nearest_captions(crel, np.array([row["z_worst"]]), gallery, labels)[0]
    return {**{key: row[key] for key in _SHOWN}, "model": model, shown: sampled[model, image_id], worst: nearest}
