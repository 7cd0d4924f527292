"""A tiny ``CLIPModel`` trained on rendered faces and their attribute prompts.

The offline stand-in for the CLIP that Appendix J's alignment scorer reads (``openai/clip-vit-large-patch14``
on a cluster). Like the DINOv3 and SigLIP extractors it learns from renders of the face world
(:mod:`condeval.datasets.faceworld`) with every attribute drawn at random, so it has seen every joint
condition, as a web-scale CLIP has. Objective: CLIP's symmetric contrastive loss over batches that hold
each face with its four counterfactual twins, so the image tower must read every attribute (without
them, 1,200 faces x 8 epochs read Smiling at 0.48 and Eyeglasses at 0.56 on fresh renders; with them,
300 x 30 epochs read 0.92 and 0.91), and each image's prompt against its four one-attribute foils
(:class:`condeval.encoders.clip.ContrastiveCLIP`'s hard negatives), so the text tower must read every
attribute word.
"""

from __future__ import annotations

import os

import numpy as np

from condeval.core.training import TrainRecipe, cosine_schedule
from condeval.encoders.clip import ContrastiveCLIP

__all__ = ["render_prompted_faces", "train_face_clip", "TwinContrastiveCLIP"]


class TwinContrastiveCLIP(ContrastiveCLIP):
    """:class:`~condeval.encoders.clip.ContrastiveCLIP` on rows of a face and its counterfactual twins: a
    batch of B rows is B x 5 image-prompt pairs, so each face meets, as in-batch negatives, the twins
    that differ from it by the mouth or the rims alone (without them those were never read)."""

    def _loss(self, batch, training: bool):
        return super()._loss(tuple(t.flatten(0, 1) for t in batch), training)


def render_prompted_faces(n: int, side: int, seed: int, twins: bool = False):
    """``n`` rendered faces (PIL, ``side`` pixels, through the JPEG round trip of the world's files) and
    their (n, 4) attributes; deterministic per seed.

    With ``twins``, each face comes with its four counterfactual twins
    (:func:`~condeval.encoders.patch_features.counterfactual_face`: one attribute flipped, the same
    nuisance): images (n, 5) as nested lists, attributes (n, 5, 4).
    """
    from PIL import Image

    from condeval.datasets.faceworld import render_face, sample_face
    from condeval.encoders.patch_features import _as_written, counterfactual_face

    rng = np.random.default_rng(seed)
    images, attributes = [], []
    for _ in range(n):
        face = sample_face(rng)
        group = (face, *(counterfactual_face(face, k, rng) for k in range(4))) if twins else (face,)
        images.append([Image.fromarray(_as_written(render_face(f, rng, side)).transpose(1, 2, 0)) for f in group])
        attributes.append([f.attributes for f in group])
    attributes = np.array(attributes, dtype=np.int64)
    return (images, attributes) if twins else ([g[0] for g in images], attributes[:, 0])


def train_face_clip(
    out_dir: str | os.PathLike,
    recipe: TrainRecipe,
    *,
    instances: int,
    model: dict,
    hard_weight: float = 1.0,
) -> dict:
    """Train the face CLIP and ``save_pretrained`` it with its tokenizer and image processor into ``out_dir``.

    Parameters
    ----------
    out_dir : path-like
        ``ClipEncoder(out_dir)`` / ``CLIPModel.from_pretrained(out_dir)`` loads the result.
    recipe : TrainRecipe
        Epochs, batch size, learning rate, seed, accelerator and fingerprint; its ``held_out`` first
        instances validate.
    instances : int
        Faces rendered, each with its four twins.
    model : dict
        :func:`condeval.encoders.clip.tiny_clip_config` keyword arguments, ``image_size`` included.
    hard_weight : float
        Weight of each prompt against its one-attribute foils.

    Returns
    -------
    dict
        The training summary (also ``out_dir/training.json``).
    """
    import pytorch_lightning as pl

    from condeval.core.resources import optimizer_steps
    from condeval.datasets.celeba_prompts import condition_prompts, foil_prompts, prompt_vocabulary
    from condeval.encoders.clip import ClipSizes, clip_image_processor, tiny_clip_config
    from condeval.encoders.data import token_arrays
    from condeval.encoders.tokenizer import build_word_tokenizer
    from condeval.encoders.train import train_and_export

    model = dict(model)
    image_size = model.pop("image_size")
    max_length = model.get("max_length", 16)
    tokenizer = build_word_tokenizer(prompt_vocabulary(), model_max_length=max_length)
    processor = clip_image_processor(image_size)
    groups, attributes = render_prompted_faces(instances, image_size, recipe.seed, twins=True)
    flat = attributes.reshape(-1, attributes.shape[-1])
    ids, mask = token_arrays(tokenizer, condition_prompts(flat), max_length)
    hard_ids, hard_mask = token_arrays(tokenizer, [foil for row in flat for foil in foil_prompts(row)], max_length)
    pixels = processor([image for group in groups for image in group], return_tensors="np")["pixel_values"]
    rows = (instances, attributes.shape[1])  # a face and its twins stay in one batch
    arrays = (
        np.asarray(pixels, dtype=np.float32).reshape(*rows, *pixels.shape[1:]),
        ids.reshape(*rows, 1, max_length),
        mask.reshape(*rows, 1, max_length),
        hard_ids.reshape(*rows, 1, flat.shape[1], max_length),
        hard_mask.reshape(*rows, 1, flat.shape[1], max_length),
    )
    pl.seed_everything(recipe.seed, workers=True, verbose=False)
    config = tiny_clip_config(tokenizer, image_size, ClipSizes(**{"max_length": max_length, **model}))
    steps = optimizer_steps(instances - recipe.held_out, recipe.batch_size, recipe.epochs)
    module = TwinContrastiveCLIP(
        config.to_dict(), schedule=cosine_schedule(recipe.lr, steps, max(1, steps // 10)), hard_weight=hard_weight
    )
    return train_and_export(module, arrays, out_dir, recipe, (tokenizer, processor))
