"""Training the tiny BLIP and GIT captioners of the mini-world (Lightning), exported with ``save_pretrained``.

Kept apart from :mod:`condeval.generators.captioners` so that sampling captions never imports Lightning.
"""

from __future__ import annotations

import os

import pytorch_lightning as pl
import torch

from condeval.core.training import ScheduledModule
from condeval.generators.captioners import _config_class, _model_class, captioner_image_processor, tiny_captioner_config

__all__ = ["CaptionerModule", "train_captioner"]


class CaptionerModule(ScheduledModule):
    """Lightning wrapper: captioning cross-entropy of a BLIP or GIT on ``(pixel_values, ids, mask)``.

    ``ids``/``mask`` hold all of an image's captions (B, C, L); each step trains on one of them at
    random, so an epoch is one pass over the images. Validation uses caption 0.
    """

    def __init__(
        self,
        architecture: str,
        config: dict,
        lr: float = 1e-3,
        warmup_steps: int = 50,
        total_steps: int = 1000,
        freeze_vision: bool = False,
        weight_decay: float = 0.05,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.model = _model_class(architecture)(_config_class(architecture)(**config))
        if freeze_vision:
            self.vision_tower().requires_grad_(False)

    def vision_tower(self) -> torch.nn.Module:
        """The image encoder (GIT: a CLIP vision transformer; BLIP: its own ViT)."""
        if self.hparams.architecture == "git":
            return self.model.git.image_encoder
        return self.model.vision_model

    def _loss(self, batch, training: bool) -> torch.Tensor:
        pixel_values, ids, mask = batch
        rows = torch.arange(ids.shape[0], device=ids.device)
        pick = torch.randint(0, ids.shape[1], rows.shape, device=ids.device) if training else torch.zeros_like(rows)
        ids, mask = ids[rows, pick], mask[rows, pick]
        labels = ids.masked_fill(mask == 0, -100)
        return self.model(pixel_values=pixel_values, input_ids=ids, attention_mask=mask, labels=labels).loss


def _vision_shape(vision_config) -> dict:
    """The CLIP vision tower's shape, which GIT's image encoder takes over with its weights."""
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "image_size", "patch_size")
    return {key: getattr(vision_config, key) for key in keys}


def train_captioner(
    world: str | os.PathLike,
    tokenizer_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    *,
    architecture: str,
    images: int,
    epochs: int,
    batch_size: int,
    lr: float,
    model: dict,
    image_size: int,
    val_images: int,
    seed: int,
    vision_from: str | os.PathLike | None = None,
    freeze_vision: bool = False,
    accelerator: str = "cpu",
    fingerprint: str | None = None,
) -> dict:
    """Train a tiny BLIP or GIT on the train split's captions and ``save_pretrained`` it into ``out_dir``.

    Parameters
    ----------
    world : path-like
        A COCO-format captions file of the train split.
    tokenizer_dir : path-like
        Saved word-level tokenizer folder.
    out_dir : path-like
        Folder that receives the model, tokenizer and image processor.
    architecture : {"blip", "git"}
        The captioner family.
    images, val_images : int
        Training images (the first ``val_images`` of them validate).
    epochs, batch_size : int
        Passes over the images and images per step.
    lr : float
        Peak learning rate.
    model : dict
        Keyword arguments of :func:`~condeval.generators.captioners.tiny_captioner_config`.
    image_size : int
        Side of the square input images.
    seed : int
        Seed of the weights, the order and the caption picked per image.
    vision_from : path-like, optional
        A saved CLIP folder whose vision transformer initialises GIT's image encoder, as the real
        GIT starts from a CLIP ViT (same architecture and parameter names). Its tower's shape then
        comes from the CLIP config, not from ``model``.
    freeze_vision : bool, default False
        Keep the image encoder fixed.
    accelerator : str, default "cpu"
        Lightning accelerator.
    fingerprint : str, optional
        Identifies the run's settings in its checkpoint folder (a changed setting starts afresh).

    Returns
    -------
    dict
        The training summary of :func:`condeval.encoders.train.train_and_export`.

    Raises
    ------
    ValueError
        If ``vision_from`` is given for BLIP, which has its own ViT.
    """
    from transformers import AutoTokenizer, CLIPModel

    from condeval.encoders.data import pixel_values
    from condeval.encoders.train import _steps, _token_cube, coco_split, train_and_export

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    processor = captioner_image_processor(architecture, image_size)
    frame, captions = coco_split(world, "train", images)
    arrays = (
        pixel_values(frame["path"].to_list(), processor),
        *_token_cube(tokenizer, captions, model.get("max_length", 32)),
    )
    pl.seed_everything(seed, workers=True, verbose=False)
    config = tiny_captioner_config(architecture, tokenizer, image_size, **model)
    clip = None
    if vision_from is not None:
        if architecture != "git":
            raise ValueError("vision_from initialises GIT's CLIP image encoder; BLIP has its own ViT")
        clip = CLIPModel.from_pretrained(str(vision_from))
        config.vision_config = type(config.vision_config)(**_vision_shape(clip.config.vision_config))
    steps = _steps(len(captions) - val_images, batch_size, epochs)
    module = CaptionerModule(
        architecture,
        config.to_dict(),
        lr=lr,
        warmup_steps=max(1, steps // 10),
        total_steps=steps,
        freeze_vision=freeze_vision,
    )
    if clip is not None:
        module.vision_tower().vision_model.load_state_dict(clip.vision_model.state_dict())

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
