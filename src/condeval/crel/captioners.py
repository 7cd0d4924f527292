"""Image captioners judged by the image-to-text track: BLIP and GIT of the real transformers classes.

On a cluster these are ``Salesforce/blip-image-captioning-{base,large}`` and
``microsoft/git-{base,large}-coco`` loaded from local folders. Offline they are tiny configurations
of ``BlipForConditionalGeneration`` and ``GitForCausalLM`` trained here on the mini-world's train
captions (:class:`CaptionerModule`, Lightning), then ``save_pretrained`` into a folder with the
word-level tokenizer and the model's own image processor, so one loader serves both worlds.

Captions are sampled (``generate(do_sample=True, ...)``): the paper's captioners are stochastic,
and CReL measures the worst of what a model may say. The sampling settings come from the config.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Sequence

import numpy as np
import pytorch_lightning as pl
import torch
from PIL import Image

from condeval.encoders.clip import warmup_cosine

__all__ = ["ARCHITECTURES", "tiny_captioner_config", "captioner_image_processor", "CaptionerModule", "Captioner", "train_captioner"]

ARCHITECTURES = ("blip", "git")


def _tower(width: int, layers: int, heads: int) -> dict:
    return dict(hidden_size=width, intermediate_size=4 * width, num_hidden_layers=layers, num_attention_heads=heads)


def tiny_captioner_config(architecture: str, tokenizer, image_size: int, *, vision_width: int, vision_layers: int, text_width: int, text_layers: int, heads: int = 4, patch_size: int = 8, max_length: int = 32):
    """A ``BlipConfig`` or ``GitConfig`` of the real architecture at a CPU-trainable size.

    Both start a caption at ``[CLS]`` and stop at ``[SEP]``, the ids of ``tokenizer``.
    """
    from transformers import BlipConfig, GitConfig

    vision = dict(_tower(vision_width, vision_layers, heads), image_size=image_size, patch_size=patch_size)
    ids = dict(pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.cls_token_id)
    if architecture == "blip":
        text = dict(
            _tower(text_width, text_layers, heads), vocab_size=len(tokenizer), max_position_embeddings=max_length,
            sep_token_id=tokenizer.sep_token_id, eos_token_id=tokenizer.sep_token_id, **ids,
        )  # fmt: skip
        return BlipConfig(text_config=text, vision_config=vision)
    if architecture == "git":
        return GitConfig(
            vision_config=vision, vocab_size=len(tokenizer), max_position_embeddings=max_length,
            eos_token_id=tokenizer.sep_token_id, **_tower(text_width, text_layers, heads), **ids,
        )  # fmt: skip
    raise ValueError(f"unknown captioner architecture {architecture!r}; expected one of {ARCHITECTURES}")


def captioner_image_processor(architecture: str, image_size: int):
    """The image processor each family ships with (BLIP: resize; GIT: CLIP's), at ``image_size``."""
    from transformers import BlipImageProcessor, CLIPImageProcessor

    if architecture == "blip":
        return BlipImageProcessor(size={"height": image_size, "width": image_size})
    if architecture == "git":
        return CLIPImageProcessor(size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size})
    raise ValueError(f"unknown captioner architecture {architecture!r}; expected one of {ARCHITECTURES}")


def _model_class(architecture: str):
    from transformers import BlipForConditionalGeneration, GitForCausalLM

    return {"blip": BlipForConditionalGeneration, "git": GitForCausalLM}[architecture]


def _config_class(architecture: str):
    from transformers import BlipConfig, GitConfig

    return {"blip": BlipConfig, "git": GitConfig}[architecture]


class CaptionerModule(pl.LightningModule):
    """Lightning wrapper: captioning cross-entropy of a BLIP or GIT on ``(pixel_values, ids, mask)``.

    ``ids``/``mask`` hold all of an image's captions (B, C, L); each step trains on one of them at
    random, so an epoch is one pass over the images. Validation uses caption 0.
    """

    def __init__(self, architecture: str, config: dict, lr: float = 1e-3, warmup_steps: int = 50, total_steps: int = 1000, freeze_vision: bool = False):
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

    def _loss(self, batch, random_caption: bool) -> torch.Tensor:
        pixel_values, ids, mask = batch
        rows = torch.arange(ids.shape[0], device=ids.device)
        pick = torch.randint(0, ids.shape[1], rows.shape, device=ids.device) if random_caption else torch.zeros_like(rows)
        ids, mask = ids[rows, pick], mask[rows, pick]
        labels = ids.masked_fill(mask == 0, -100)
        return self.model(pixel_values=pixel_values, input_ids=ids, attention_mask=mask, labels=labels).loss

    def training_step(self, batch, batch_idx):
        loss = self._loss(batch, random_caption=True)
        self.log("train_loss", loss, prog_bar=True, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        self.log("val_loss", self._loss(batch, random_caption=False), prog_bar=True)

    def configure_optimizers(self):
        optimizer = torch.optim.AdamW([p for p in self.parameters() if p.requires_grad], lr=self.hparams.lr, weight_decay=0.05)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimizer, warmup_cosine(self.hparams.warmup_steps, self.hparams.total_steps))
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": schedule, "interval": "step"}}


class Captioner:
    """A saved captioner folder (BLIP or GIT, tiny or real) that samples captions for images.

    Parameters
    ----------
    path : path-like
        Folder with ``config.json`` (its ``model_type`` picks the class), weights, tokenizer and
        ``preprocessor_config.json``.
    device : str, optional
        Torch device (default CPU).
    """

    def __init__(self, path: str | os.PathLike, device: str | None = None):
        import json

        from transformers import AutoImageProcessor, AutoTokenizer

        self.path = Path(path)
        model_type = json.loads((self.path / "config.json").read_text()).get("model_type")
        architecture = {"blip": "blip", "git": "git"}.get(model_type)
        if architecture is None:
            raise ValueError(f"{self.path / 'config.json'}: model_type {model_type!r} is not a BLIP or GIT captioner")
        self.device = torch.device(device or "cpu")
        self.model = _model_class(architecture).from_pretrained(str(path)).eval().to(self.device)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.image_processor = AutoImageProcessor.from_pretrained(str(path))

    @torch.no_grad()
    def generate(self, images: Sequence[Image.Image | str], *, seed: int, batch_size: int = 64, **sampling) -> list[str]:
        """One sampled caption per image; ``sampling`` goes to ``model.generate`` (e.g. temperature).

        Each batch seeds torch from ``(seed, batch offset)``: the same images, seed and batch size
        give the same captions. Special tokens other than the end token are never sampled.
        """
        unwanted = [self.tokenizer.convert_tokens_to_ids(t) for t in (self.tokenizer.pad_token, self.tokenizer.unk_token, self.tokenizer.mask_token, self.tokenizer.cls_token) if t is not None]
        sampling = {"suppress_tokens": sorted(set(unwanted)), **sampling}
        captions: list[str] = []
        for start in range(0, len(images), batch_size):
            batch = [Image.open(i).convert("RGB") if isinstance(i, (str, os.PathLike)) else i for i in images[start : start + batch_size]]
            pixels = self.image_processor(batch, return_tensors="pt")["pixel_values"].to(self.device)
            torch.manual_seed(int(np.random.SeedSequence([seed, start]).generate_state(1)[0]))
            out = self.model.generate(pixel_values=pixels, **sampling)
            captions.extend(text.strip() for text in self.tokenizer.batch_decode(out, skip_special_tokens=True))
        return captions


def _vision_shape(vision_config) -> dict:
    """The CLIP vision tower's shape, which GIT's image encoder takes over with its weights."""
    keys = ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads", "image_size", "patch_size")
    return {key: getattr(vision_config, key) for key in keys}


def train_captioner(world: str | os.PathLike, tokenizer_dir: str | os.PathLike, out_dir: str | os.PathLike, *, architecture: str, images: int, epochs: int, batch_size: int, lr: float, model: dict, image_size: int, val_images: int, seed: int, vision_from: str | os.PathLike | None = None, freeze_vision: bool = False, accelerator: str = "cpu", fingerprint: str | None = None) -> dict:
    """Train a tiny BLIP or GIT on the train split's captions and ``save_pretrained`` it into ``out_dir``.

    ``vision_from``: a saved CLIP folder whose vision transformer initialises GIT's image encoder,
    as the real GIT starts from a CLIP ViT (same architecture and parameter names).
    Its tower's shape then comes from the CLIP config, not from ``model``. ``freeze_vision``
    keeps that encoder fixed.
    """
    from transformers import AutoTokenizer, CLIPModel

    from condeval.encoders.data import pixel_values
    from condeval.encoders.train import _steps, _token_cube, coco_split, train_and_export

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    processor = captioner_image_processor(architecture, image_size)
    frame, captions = coco_split(world, "train", images)
    arrays = (pixel_values(frame["path"].to_list(), processor), *_token_cube(tokenizer, captions, model.get("max_length", 32)))
    pl.seed_everything(seed, workers=True, verbose=False)
    config = tiny_captioner_config(architecture, tokenizer, image_size, **model)
    clip = None
    if vision_from is not None:
        if architecture != "git":
            raise ValueError("vision_from initialises GIT's CLIP image encoder; BLIP has its own ViT")
        clip = CLIPModel.from_pretrained(str(vision_from))
        config.vision_config = type(config.vision_config)(**_vision_shape(clip.config.vision_config))
    steps = _steps(len(captions) - val_images, batch_size, epochs)
    module = CaptionerModule(architecture, config.to_dict(), lr=lr, warmup_steps=max(1, steps // 10), total_steps=steps, freeze_vision=freeze_vision)
    if clip is not None:
        module.vision_tower().vision_model.load_state_dict(clip.vision_model.state_dict())

    def export(trained, folder):
        trained.model.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        processor.save_pretrained(folder)

    return train_and_export(module, arrays, out_dir, export, val_rows=val_images, epochs=epochs, batch_size=batch_size, seed=seed, accelerator=accelerator, fingerprint=fingerprint)
