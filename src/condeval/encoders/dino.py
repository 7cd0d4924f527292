"""A tiny DINOv2 (``Dinov2Model``) for DINO-SIM on the mini-world, trained self-supervised here.

**Objective.** Contrastive view-invariance (InfoNCE, as SimCLR; DINOv2 itself self-distils between
augmented crops): the two views of a training image are its JPEG and a fresh render of the same
scene, with another background field and other pixel noise
(:func:`condeval.datasets.miniworld.render_scene`). The mini-world's nuisance is its augmentation,
so the feature must keep what the scene is (objects, colours, shapes, places) and drop the rest.

**The feature** is :data:`FEATURE`: the pooled output, DINOv2's final-layer-normed CLS token, as
``facebook/dinov2-base``'s image feature is read (DINO-SIM compares it by cosine, paper F.2).
:class:`DinoEncoder` loads a saved folder with ``Dinov2Model.from_pretrained`` like the hub model.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from condeval.core.conformal import unit_bootstrap_interval
from condeval.core.training import ScheduledModule, TrainRecipe, cosine_schedule
from condeval.encoders.inputs import ArrayImages, batches, image_list, rgb_images, unit_feature_rows

__all__ = [
    "FEATURE",
    "tiny_dinov2_config",
    "dino_image_processor",
    "ContrastiveDino",
    "train_dino",
    "DinoEncoder",
    "second_views",
    "dino_signal",
]

#: The DINOv2 output used as the image feature: ``pooler_output`` (the layer-normed CLS token).
FEATURE = "pooler_output"


def tiny_dinov2_config(image_size: int, *, width: int = 96, layers: int = 3, heads: int = 4, patch_size: int = 8):
    """A ``Dinov2Config`` of the real architecture at a CPU-trainable size."""
    from transformers import Dinov2Config

    return Dinov2Config(
        hidden_size=width,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        mlp_ratio=2,
        image_size=image_size,
        patch_size=patch_size,
    )


def dino_image_processor(image_size: int):
    """DINOv2's preprocessing (``BitImageProcessor``: resize, centre crop, ImageNet mean and std) at ``image_size``."""
    from transformers import BitImageProcessor

    return BitImageProcessor(
        size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}, do_convert_rgb=True
    )


class ContrastiveDino(ScheduledModule):
    """Lightning wrapper: symmetric InfoNCE between the two views' features, rows ``(view_a, view_b)``."""

    decay_matrices_only = True

    default_weight_decay = 0.05

    def __init__(
        self,
        config: dict,
        schedule: dict | None = None,
        temperature: float = 0.1,
    ):
        super().__init__()
        self.save_hyperparameters()
        from transformers import Dinov2Config, Dinov2Model

        self.model = Dinov2Model(Dinov2Config(**config))

    def _loss(self, batch, training: bool) -> torch.Tensor:
        a, b = (F.normalize(getattr(self.model(pixel_values=view), FEATURE), dim=-1) for view in batch)
        logits = a @ b.T / self.hparams.temperature
        labels = torch.arange(len(a), device=a.device)
        return (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2


def second_views(scenes: list[list[dict]], image_ids, seed: int, side: int):
    """Each scene rendered afresh (new background and noise, same objects), seeded by ``(seed, image id)``."""
    from PIL import Image

    from condeval.datasets.miniworld import SceneObject, render_scene

    views = []
    for objects, image_id in zip(scenes, image_ids, strict=True):
        rng = np.random.default_rng([seed, int(image_id), 1])
        image = render_scene([SceneObject(**o) for o in objects], rng, side)
        views.append(image.convert("RGB") if isinstance(image, Image.Image) else image)
    return views


def _pixels(images, processor) -> np.ndarray:
    return np.asarray(processor(images, return_tensors="np")["pixel_values"], dtype=np.float32)


def train_dino(
    world: str | os.PathLike,
    out_dir: str | os.PathLike,
    recipe: TrainRecipe,
    *,
    images: int,
    model: dict,
    temperature: float = 0.1,
) -> dict:
    """Train the tiny DINOv2 on the train split's images and their second views; ``save_pretrained`` it.

    Parameters
    ----------
    world : path-like
        The mini-world's COCO root (``annotations/`` with the scenes sidecar, ``train2014/``).
    out_dir : path-like
        Receives the model and its image processor.
    recipe : TrainRecipe
        Epochs, batch size, learning rate, held-out images (the first of ``images``), seed, accelerator
        and fingerprint.
    images : int
        The first training images of ``world``'s train split.
    model : dict
        Keyword arguments of :func:`tiny_dinov2_config`, ``image_size`` included.
    temperature : float
        InfoNCE's temperature.

    Returns
    -------
    dict
        The training summary.
    """
    import pytorch_lightning as pl

    from condeval.core.io import read_image, read_json
    from condeval.core.resources import optimizer_steps
    from condeval.encoders.train import coco_split, train_and_export

    model = dict(model)
    image_size = model.pop("image_size")
    frame, _ = coco_split(world, "train", images)
    ids = frame["image_id"].to_list()
    scenes = read_json(Path(world) / "annotations" / "scenes_train2014.json")
    processor = dino_image_processor(image_size)
    first = _pixels([read_image(p).convert("RGB") for p in frame["path"].to_list()], processor)
    second = _pixels(second_views([scenes[str(i)] for i in ids], ids, recipe.seed, image_size), processor)
    pl.seed_everything(recipe.seed, workers=True, verbose=False)
    config = tiny_dinov2_config(image_size, **model)
    steps = optimizer_steps(len(ids) - recipe.held_out, recipe.batch_size, recipe.epochs)
    module = ContrastiveDino(
        config.to_dict(), schedule=cosine_schedule(recipe.lr, steps, max(1, steps // 10)), temperature=temperature
    )
    return train_and_export(module, (first, second), out_dir, recipe, (processor,))


class DinoEncoder(ArrayImages):
    """A saved ``Dinov2Model`` and its image processor; features are unit rows of :data:`FEATURE`.

    The interface of :class:`~condeval.encoders.features.ClipEncoder`'s image side: ``image_features``
    (PIL images or paths), ``encode`` (uint8 (N, 3, H, W)), ``width``, ``feature``.
    """

    #: What :meth:`encode` returns, as feature shards record it.
    feature = f"{FEATURE} (the final-layer-normed CLS token)"

    def __init__(self, path: str | os.PathLike, device: str | None = None, dtype: str | None = None):
        from transformers import AutoImageProcessor, Dinov2Model

        from condeval.core.devices import check_device, log_precision, torch_dtype

        self.path = Path(path)
        self.device = check_device(device or "cpu")
        self.dtype = torch_dtype(dtype, self.device)
        self.model = Dinov2Model.from_pretrained(str(path), dtype=self.dtype).eval().to(self.device)
        log_precision(self.model, self.path)
        self.image_processor = AutoImageProcessor.from_pretrained(str(path))

    @property
    def identity(self) -> dict:
        from condeval.encoders.shards import model_identity

        return model_identity(self.path)

    @property
    def preprocessing(self) -> dict:
        return {"image_processor": self.image_processor.to_dict(), "feature": FEATURE, "normalisation": "L2"}

    @property
    def width(self) -> int:
        return int(self.model.config.hidden_size)

    @torch.no_grad()
    def image_features(self, images, batch_size: int = 128) -> np.ndarray:
        """Unit-norm features (n, hidden_size); ``images`` are PIL images or file paths."""

        chunks = []
        for batch in batches(image_list(images), batch_size, "DINO images"):
            pixels = self.image_processor(rgb_images(batch), return_tensors="pt")["pixel_values"]
            chunks.append(
                unit_feature_rows(getattr(self.model(pixel_values=pixels.to(self.device, self.dtype)), FEATURE))
            )
        return np.concatenate(chunks) if chunks else np.zeros((0, self.model.config.hidden_size), np.float32)


def dino_signal(encoder: DinoEncoder, paths: list[str], scenes: list[list[dict]], image_ids, seed: int = 0) -> dict:
    """DINO-SIM of two renders of one scene against two scenes sharing a caption element (AUC).

    Positive pairs: each image and its second view (:func:`second_views`, a seed the training never
    used). Negative pairs: each image and another image holding an object of the same colour and
    shape. The AUC is the chance that a positive pair scores above a negative one (scikit-learn). The
    two means and the AUC come with their 95% intervals over the images (``*_low``, ``*_high``), an
    image drawn with its positive and its negative pair.
    """
    from sklearn.metrics import roc_auc_score

    side = encoder.model.config.image_size
    first = encoder.image_features(paths)
    second = encoder.image_features(second_views(scenes, image_ids, seed + 10_000, side))
    positives = np.sum(first * second, axis=1)
    rng = np.random.default_rng(seed)
    keys = [{(o["colour"], o["shape"]) for o in objects} for objects in scenes]
    negatives, with_negative = [], []
    for i, mine in enumerate(keys):
        sharing = [j for j, theirs in enumerate(keys) if j != i and mine & theirs]
        if sharing:
            negatives.append(float(first[i] @ first[rng.choice(sharing)]))
            with_negative.append(i)
    negatives, labels = np.asarray(negatives), np.r_[np.ones(len(positives)), np.zeros(len(negatives))]
    statistics = {
        "same_scene_mean": lambda counts: np.average(positives, weights=counts),
        "shared_element_mean": lambda counts: np.average(negatives, weights=counts[with_negative]),
        "auc": lambda counts: roc_auc_score(
            labels, np.r_[positives, negatives], sample_weight=np.r_[counts, counts[with_negative]]
        ),
    }
    out = {"pairs": {"same_scene": len(positives), "shared_element": len(negatives)}}
    for name, statistic in statistics.items():
        low, high = unit_bootstrap_interval(statistic, len(positives), seed)
        out |= {name: float(statistic(np.ones(len(positives)))), f"{name}_low": low, f"{name}_high": high}
    return out
