"""Training the mini-world's encoders (and any ``save_pretrained`` model) from a COCO-format split.

Each function trains a Lightning module with :func:`condeval.core.training.fit` (seeded, resumable
from ``last.ckpt``, early stopping on a held-out slice of the *train* split; the val split is the
evaluation set and no model sees it) and exports the best weights with ``save_pretrained`` into a
folder that also holds the tokenizer and image processor, written atomically.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytorch_lightning as pl

from condeval.core.io import atomic_directory, write_json
from condeval.core.resources import optimizer_steps
from condeval.core.training import TrainRecipe, cosine_schedule, fit, hold_out, model_record, training_summary
from condeval.datasets.coco import load_captions
from condeval.datasets.miniworld import SHAPES, images_with_shapes, swap_shape_noun
from condeval.encoders.data import captions_per_image, pixel_values, token_arrays

log = logging.getLogger(__name__)

__all__ = ["coco_split", "ClipObjective", "token_cube", "train_clip", "train_bert", "train_and_export"]

CAPTIONS_PER_IMAGE = 5


def coco_split(
    root: str | os.PathLike,
    split: str,
    n_images: int | None = None,
    exclude_shapes: Sequence[str] = (),
    image_ids: Sequence[int] | None = None,
):
    """(images frame with ``path``, their five captions) of ``{root}/annotations/captions_{split}2014.json``.

    ``exclude_shapes`` drops the mini-world images holding any of those shapes (before taking the
    first ``n_images``), so the model never sees them: FOIL-nocaps' novel classes. ``image_ids``
    keeps only those images (in the split's order, before ``n_images``); an id the split lacks is an
    error.
    """
    root = Path(root)
    frame = load_captions(root / "annotations" / f"captions_{split}2014.json", root / f"{split}2014")
    images, captions = captions_per_image(frame, CAPTIONS_PER_IMAGE)
    if exclude_shapes:
        keep = ~images["image_id"].is_in(list(images_with_shapes(root, split, exclude_shapes))).to_numpy()
        images, captions = _keep_rows(images, captions, keep)
    if image_ids is not None:
        images, captions = _only_ids(images, captions, image_ids, root / "annotations" / f"captions_{split}2014.json")
    if n_images is not None:
        images, captions = images.head(n_images), captions[:n_images]
    return images, captions


def _only_ids(images, captions: list, image_ids: Sequence[int], source: Path):
    """The rows of ``images`` (and their captions) whose id is in ``image_ids``."""
    wanted = {int(i) for i in image_ids}
    missing = wanted - set(images["image_id"].to_list())
    if missing:
        raise ValueError(f"{source}: {len(missing)} requested image ids are not in the split, e.g. {min(missing)}")
    return _keep_rows(images, captions, images["image_id"].is_in(list(wanted)).to_numpy())


def _keep_rows(images, captions: list, keep):
    """The rows of ``images`` and the captions where the boolean mask ``keep`` is true."""
    return images.filter(keep), [c for c, k in zip(captions, keep) if k]


def token_cube(
    tokenizer, captions: list[list[str]], max_length: int, per_caption: int = 1
) -> tuple[np.ndarray, np.ndarray]:
    """Token ids and masks, (images, captions, max_length), or (images, captions, per_caption, max_length)
    when each caption has ``per_caption`` texts in a row (its foils)."""
    ids, mask = token_arrays(tokenizer, [c for per_image in captions for c in per_image], max_length)
    inner = (per_caption,) if per_caption > 1 else ()
    shape = (len(captions), len(captions[0]) // per_caption, *inner, max_length)
    return ids.reshape(shape), mask.reshape(shape)


def _warn_unknown_words(tokenizer, captions: list[list[str]], tokens: tuple[np.ndarray, np.ndarray]) -> None:
    """Log how many caption tokens the tokenizer reads as its unknown token, with a few of their words (a
    lab's captions against the mini-world's word vocabulary: every unknown word becomes one [UNK])."""
    ids, mask = tokens
    unknown = int(((ids == tokenizer.unk_token_id) & (mask > 0)).sum()) if tokenizer.unk_token_id is not None else 0
    if unknown:
        vocabulary = tokenizer.get_vocab()
        words = sorted(
            {w for per_image in captions for c in per_image for w in c.lower().split() if w not in vocabulary}
        )
        log.warning(
            "%d of %d caption tokens are %s (words the tokenizer does not know, e.g. %s)",
            unknown,
            int((mask > 0).sum()),
            tokenizer.unk_token,
            words[:10],
        )


def _foils(captions: list[list[str]], rng: np.random.Generator, shapes: list[str], per_caption: int) -> list[list[str]]:
    """``per_caption`` one-noun foils of every caption, in a row (the caption itself if it names no shape)."""

    def foil(caption: str) -> str:
        return " ".join((swap_shape_noun(caption.split(), rng, shapes) or (caption.split(), 0))[0])

    return [[foil(c) for c in per_image for _ in range(per_caption)] for per_image in captions]


def train_and_export(
    module: pl.LightningModule,
    arrays: tuple[np.ndarray, ...],
    out_dir: str | os.PathLike,
    recipe: TrainRecipe,
    parts: Sequence = (),
    *,
    rows_per_item: int = 1,
) -> dict:
    """Fit ``module`` on ``arrays`` under ``recipe``, save the best into ``out_dir``.

    The first ``recipe.held_out * rows_per_item`` rows validate (``rows_per_item``: rows of one held-out
    item, e.g. a BERT image's caption pairs, so that an item's rows are held out together). The run folder
    is ``<out_dir>_run`` (checkpoints, CSV logs). The saved folder is the best module's ``model`` and every
    one of ``parts`` (tokenizer, image processor), each written with ``save_pretrained``, so
    ``from_pretrained(out_dir)`` loads it like a hub checkpoint. Returns the training summary, also written
    to ``out_dir/training.json``.
    """
    out_dir = Path(out_dir)
    run_dir = out_dir.with_name(out_dir.name + "_run")
    train, val = hold_out(arrays, recipe.held_out * rows_per_item)
    best = fit(module, train, val, run_dir, recipe.settings(), seed=recipe.seed, fingerprint=recipe.fingerprint)
    trained = type(module).load_from_checkpoint(best, map_location="cpu", weights_only=True).eval()
    summary = training_summary(run_dir)
    with atomic_directory(out_dir) as folder:
        for part in (trained.model, *parts):
            part.save_pretrained(folder)
        write_json(model_record(summary), folder / "training.json")
    return summary


@dataclass(frozen=True)
class ClipObjective:
    """The tiny CLIP's contrastive objective beyond InfoNCE (:class:`condeval.encoders.clip.ContrastiveCLIP`).

    Parameters
    ----------
    hard_weight : float >= 0, default 1.0
        Weight of the shape-swap hard negatives' term.
    foils : int >= 1, default 1
        Shape-swapped copies of every caption met as its image's hard negatives.
    max_logit_scale : float, default 100.0
        Cap of the inverse temperature.
    """

    hard_weight: float = 1.0
    foils: int = 1
    max_logit_scale: float = 100.0


def train_clip(
    world: str | os.PathLike,
    tokenizer_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    recipe: TrainRecipe,
    *,
    images: int,
    model: dict,
    objective: ClipObjective = ClipObjective(),
    exclude_shapes: Sequence[str] = (),
) -> dict:
    """Train the tiny CLIP contrastively (with shape-swap hard negatives) and ``save_pretrained`` it.

    ``model`` holds :func:`condeval.encoders.clip.tiny_clip_config`'s keywords, ``image_size`` included;
    ``images`` are the first training images of ``world``'s train split. ``exclude_shapes`` are never
    seen, in images or as hard-negative words (FOIL-nocaps' novel classes).
    """
    from transformers import AutoTokenizer

    from condeval.encoders.clip import ClipSizes, ContrastiveCLIP, clip_image_processor, tiny_clip_config

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    model = dict(model)
    image_size = model.pop("image_size")
    processor = clip_image_processor(image_size)
    frame, captions = coco_split(world, "train", images, exclude_shapes)
    rng = np.random.default_rng(recipe.seed)
    seen = [shape for shape in SHAPES if shape not in set(exclude_shapes)]
    length = model.get("max_length", 32)
    hard = token_cube(tokenizer, _foils(captions, rng, seen, objective.foils), length, objective.foils)
    tokens = token_cube(tokenizer, captions, length)
    _warn_unknown_words(tokenizer, captions, tokens)
    arrays = (pixel_values(frame["path"].to_list(), processor), *tokens, *hard)
    pl.seed_everything(recipe.seed, workers=True, verbose=False)
    config = tiny_clip_config(tokenizer, image_size, ClipSizes(**model))
    steps = optimizer_steps(len(captions) - recipe.held_out, recipe.batch_size, recipe.epochs)
    module = ContrastiveCLIP(
        config.to_dict(),
        schedule=cosine_schedule(recipe.lr, steps, max(1, steps // 10)),
        hard_weight=objective.hard_weight,
        max_logit_scale=objective.max_logit_scale,
    )
    return train_and_export(module, arrays, out_dir, recipe, (tokenizer, processor))


def train_bert(
    world: str | os.PathLike,
    tokenizer_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    recipe: TrainRecipe,
    *,
    images: int,
    model: dict,
) -> dict:
    """Pre-train the tiny BERT (MLM + next-sentence prediction on caption pairs); ``save_pretrained`` it.

    Every image gives ``CAPTIONS_PER_IMAGE`` pairs, each drawn as in :func:`condeval.encoders.bert.caption_pairs`.
    """
    from transformers import AutoTokenizer

    from condeval.encoders.bert import PretrainingBert, caption_pairs, tiny_bert_config

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    _, captions = coco_split(world, "train", images)
    rng = np.random.default_rng(recipe.seed)
    pairs = [caption_pairs(captions, rng) for _ in range(CAPTIONS_PER_IMAGE)]  # pair round k: rows k*n ... (k+1)*n - 1
    firsts, seconds = [a for p in pairs for a in p[0]], [b for p in pairs for b in p[1]]
    encoded = tokenizer(
        firsts,
        seconds,
        padding="max_length",
        truncation=True,
        max_length=model.get("max_length", 50),
        return_token_type_ids=True,
        return_tensors="np",
    )
    arrays = tuple(encoded[key].astype(np.int64) for key in ("input_ids", "attention_mask", "token_type_ids")) + (
        np.concatenate([p[2] for p in pairs]),
    )
    image_major = (
        np.arange(len(firsts)).reshape(CAPTIONS_PER_IMAGE, len(captions)).T.ravel()
    )  # held-out rows = whole images
    arrays = tuple(a[image_major] for a in arrays)
    pl.seed_everything(recipe.seed, workers=True, verbose=False)
    config = tiny_bert_config(tokenizer, **model)
    steps = optimizer_steps(len(firsts) - recipe.held_out * CAPTIONS_PER_IMAGE, recipe.batch_size, recipe.epochs)
    module = PretrainingBert(
        config.to_dict(), str(tokenizer_dir), schedule=cosine_schedule(recipe.lr, steps, max(1, steps // 10))
    )

    # The model saved is BertForPreTraining; BertModel.from_pretrained reads its encoder.
    return train_and_export(module, arrays, out_dir, recipe, (tokenizer,), rows_per_item=CAPTIONS_PER_IMAGE)
