"""Turning COCO-format caption sets into the arrays the encoders and captioners train on."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from condeval.core.io import read_image

__all__ = ["pixel_values", "token_arrays", "captions_per_image", "trim_padding"]


def pixel_values(paths: Sequence[str], image_processor, batch_size: int = 256) -> np.ndarray:
    """``image_processor`` output for each image file, float32 (n, 3, H, W)."""
    chunks = []
    for start in range(0, len(paths), batch_size):
        images = [read_image(path).convert("RGB") for path in paths[start : start + batch_size]]
        chunks.append(np.asarray(image_processor(images, return_tensors="np")["pixel_values"], dtype=np.float32))
    return np.concatenate(chunks)


def token_arrays(tokenizer, captions: Sequence[str], max_length: int) -> tuple[np.ndarray, np.ndarray]:
    """Padded ``input_ids`` and ``attention_mask`` (int64, (n, max_length)), truncated at ``max_length``."""
    encoded = tokenizer(
        list(captions), padding="max_length", truncation=True, max_length=max_length, return_tensors="np"
    )
    return encoded["input_ids"].astype(np.int64), encoded["attention_mask"].astype(np.int64)


def trim_padding(mask, *token_tensors):
    """Cut the trailing columns that are padding in every row of ``mask``, from it and each tensor.

    The arrays the encoders and captioners train on are right-padded to ``max_length``. A model whose
    outputs at real tokens never see later positions (causal text) or that masks padding out of
    attention (encoders) computes the same loss on the cut batch, at a fraction of the cost.

    Parameters
    ----------
    mask : torch.Tensor
        Attention mask, (..., L), 1 at real tokens; the last axis is the token axis.
    *token_tensors : torch.Tensor
        Tensors with the same last axis (ids, token types, ...).

    Returns
    -------
    tuple of torch.Tensor
        ``mask`` and each of ``token_tensors`` cut to the longest row's length (at least 1).
    """
    length = max(int(mask.sum(dim=-1).max()), 1)
    return tuple(t[..., :length] for t in (mask, *token_tensors))


def captions_per_image(captions: pl.DataFrame, per_image: int) -> tuple[pl.DataFrame, list[list[str]]]:
    """One row per image (sorted by ``image_id``) and its first ``per_image`` captions by annotation id.

    Raises ``ValueError`` naming an image with fewer captions.
    """
    grouped = (
        captions.sort("image_id", "caption_id")
        .group_by("image_id", maintain_order=True)
        .agg(pl.col("caption"), pl.all().exclude("caption").first())
    )
    short = grouped.filter(pl.col("caption").list.len() < per_image)
    if short.height:
        raise ValueError(
            f"image {short['image_id'][0]} has {short['caption'].list.len()[0]} captions; {per_image} are needed"
        )
    return grouped.drop("caption"), [list(c[:per_image]) for c in grouped["caption"].to_list()]
