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
from pathlib import Path

import numpy as np
import pytorch_lightning as pl

from condeval.core.io import atomic_directory, write_json
from condeval.core.resources import optimizer_steps
from condeval.core.training import TrainSettings, fit, model_record, training_summary
from condeval.datasets.coco import load_captions
from condeval.datasets.miniworld import SHAPES, images_with_shapes, swap_shape_noun
from condeval.encoders.data import captions_per_image, pixel_values, token_arrays

log = logging.getLogger(__name__)

__all__ = ["coco_split", "train_clip", "train_bert", "train_and_export"]

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


def _token_cube(
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


def _split_rows(arrays: tuple[np.ndarray, ...], n_val: int) -> tuple[tuple, tuple]:
    if not 0 < n_val < arrays[0].shape[0]:
        raise ValueError(f"cannot hold out {n_val} of {arrays[0].shape[0]} training images for validation")
    return tuple(a[n_val:] for a in arrays), tuple(a[:n_val] for a in arrays)


def train_and_export(
    module: pl.LightningModule,
    arrays: tuple[np.ndarray, ...],
    out_dir: str | os.PathLike,
    parts: Sequence = (),
    *,
    val_rows: int,
    epochs: int,
    batch_size: int,
    seed: int,
    accelerator: str = "cpu",
    fingerprint: str | None = None,
    patience: int | None = None,
) -> dict:
    """Fit ``module`` on ``arrays`` (first ``val_rows`` rows held out), save the best into ``out_dir``.

    The run folder is ``<out_dir>_run`` (checkpoints, CSV logs). The saved folder is the best
    module's ``model`` and every one of ``parts`` (tokenizer, image processor), each written with
    ``save_pretrained``, so ``from_pretrained(out_dir)`` loads it like a hub checkpoint. Returns the
    training summary, also written to ``out_dir/training.json``. ``patience`` stops the run after that
    many epochs without a lower ``val_loss`` (default: it runs all ``epochs``); the best epoch is
    saved either way, and the learning-rate schedule does not depend on it.
    """
    out_dir = Path(out_dir)
    run_dir = out_dir.with_name(out_dir.name + "_run")
    train, val = _split_rows(arrays, val_rows)
    settings = TrainSettings(epochs, batch_size, patience or max(2, epochs), accelerator=accelerator)
    best = fit(module, train, val, run_dir, settings, seed=seed, fingerprint=fingerprint)
    trained = type(module).load_from_checkpoint(best, map_location="cpu", weights_only=True).eval()
    summary = training_summary(run_dir)
    with atomic_directory(out_dir) as folder:
        for part in (trained.model, *parts):
            part.save_pretrained(folder)
        write_json(model_record(summary), folder / "training.json")
    return summary


def train_clip(
    world: str | os.PathLike,
    tokenizer_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    images: int,
    epochs: int,
    batch_size: int,
    lr: float,
    hard_weight: float,
    model: dict,
    image_size: int,
    val_images: int,
    seed: int,
    exclude_shapes: Sequence[str] = (),
    foils: int = 1,
    max_logit_scale: float = 100.0,
    accelerator: str = "cpu",
    fingerprint: str | None = None,
) -> dict:
    """Train the tiny CLIP contrastively (with shape-swap hard negatives) and ``save_pretrained`` it.

    ``exclude_shapes`` are never seen, in images or as hard-negative words (FOIL-nocaps' novel classes).
    Every caption meets ``foils`` shape-swapped copies of itself as its image's hard negatives;
    ``max_logit_scale`` caps the inverse temperature (:class:`condeval.encoders.clip.ContrastiveCLIP`).
    """
    from transformers import AutoTokenizer

    from condeval.encoders.clip import ContrastiveCLIP, clip_image_processor, tiny_clip_config

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    processor = clip_image_processor(image_size)
    frame, captions = coco_split(world, "train", images, exclude_shapes)
    rng = np.random.default_rng(seed)
    seen = [shape for shape in SHAPES if shape not in set(exclude_shapes)]
    length = model.get("max_length", 32)
    hard = _token_cube(tokenizer, _foils(captions, rng, seen, foils), length, foils)
    tokens = _token_cube(tokenizer, captions, length)
    _warn_unknown_words(tokenizer, captions, tokens)
    arrays = (pixel_values(frame["path"].to_list(), processor), *tokens, *hard)
    pl.seed_everything(seed, workers=True, verbose=False)
    config = tiny_clip_config(tokenizer, image_size, **model)
    steps = optimizer_steps(len(captions) - val_images, batch_size, epochs)
    module = ContrastiveCLIP(
        config.to_dict(),
        lr=lr,
        warmup_steps=max(1, steps // 10),
        total_steps=steps,
        hard_weight=hard_weight,
        max_logit_scale=max_logit_scale,
    )

    return train_and_export(
        module,
        arrays,
        out_dir,
        (tokenizer, processor),
        val_rows=val_images,
        epochs=epochs,
        batch_size=batch_size,
        seed=seed,
        accelerator=accelerator,
        fingerprint=fingerprint,
    )


def train_bert(
    world: str | os.PathLike,
    tokenizer_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    images: int,
    epochs: int,
    batch_size: int,
    lr: float,
    model: dict,
    val_images: int,
    seed: int,
    accelerator: str = "cpu",
    fingerprint: str | None = None,
) -> dict:
    """Pre-train the tiny BERT (MLM + next-sentence prediction on caption pairs); ``save_pretrained`` it.

    Every image gives ``CAPTIONS_PER_IMAGE`` pairs, each drawn as in :func:`condeval.encoders.bert.caption_pairs`.
    """
    from transformers import AutoTokenizer

    from condeval.encoders.bert import PretrainingBert, caption_pairs, tiny_bert_config

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    _, captions = coco_split(world, "train", images)
    rng = np.random.default_rng(seed)
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
    pl.seed_everything(seed, workers=True, verbose=False)
    config = tiny_bert_config(tokenizer, **model)
    steps = optimizer_steps(len(firsts) - val_images * CAPTIONS_PER_IMAGE, batch_size, epochs)
    module = PretrainingBert(
        config.to_dict(), str(tokenizer_dir), lr=lr, warmup_steps=max(1, steps // 10), total_steps=steps
    )

    # The model saved is BertForPreTraining; BertModel.from_pretrained reads its encoder.
    return train_and_export(
        module,
        arrays,
        out_dir,
        (tokenizer,),
        val_rows=val_images * CAPTIONS_PER_IMAGE,
        epochs=epochs,
        batch_size=batch_size,
        seed=seed,
        accelerator=accelerator,
        fingerprint=fingerprint,
    )
