"""Image captioners, the image-to-text generators that tracks judge: BLIP and GIT of the real transformers classes.

On a cluster these are ``Salesforce/blip-image-captioning-{base,large}`` and
``microsoft/git-{base,large}-coco`` loaded from local folders. Offline they are tiny configurations
of ``BlipForConditionalGeneration`` and ``GitForCausalLM`` trained here on the mini-world's train
captions (:mod:`condeval.generators.captioner_training`, Lightning), then ``save_pretrained`` into a folder with the
word-level tokenizer and the model's own image processor, so one loader serves both worlds.

Captions are sampled (``generate(do_sample=True, ...)``): the paper's captioners are stochastic,
and CReL measures the worst of what a model may say. The sampling settings come from the config.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from condeval.core.logs import progress

__all__ = [
    "ARCHITECTURES",
    "RESERVED_SAMPLING",
    "CaptionerSizes",
    "tiny_captioner_config",
    "captioner_image_processor",
    "Captioner",
]

log = logging.getLogger(__name__)

#: ``model.generate`` arguments :meth:`Captioner.generate` refuses: they return several sequences per image
#: in one flat list, which would pair images with other images' captions.
RESERVED_SAMPLING = ("num_return_sequences",)

ARCHITECTURES = ("blip", "git")


def _tower(width: int, layers: int, heads: int) -> dict:
    return dict(hidden_size=width, intermediate_size=4 * width, num_hidden_layers=layers, num_attention_heads=heads)


@dataclass(frozen=True)
class CaptionerSizes:
    """The sizes of a tiny captioner (:func:`tiny_captioner_config`); a config's captioner ``model`` keys are
    its fields.

    Parameters
    ----------
    vision_width, vision_layers, text_width, text_layers : int
        Hidden size and depth of the vision and text towers.
    heads : int, default 4
        Attention heads of both towers.
    patch_size : int, default 8
        Side of a vision patch, in pixels.
    max_length : int, default 32
        Longest caption, in tokens (the text position embeddings).
    dropout : float, optional
        Dropout of the text tower's hidden states and attention probabilities; by default each
        family's transformers default (BLIP's text tower 0.0, GIT 0.1). The vision tower has none.

    Examples
    --------
    >>> CaptionerSizes(vision_width=16, vision_layers=1, text_width=16, text_layers=1).heads
    4
    """

    vision_width: int
    vision_layers: int
    text_width: int
    text_layers: int
    heads: int = 4
    patch_size: int = 8
    max_length: int = 32
    dropout: float | None = None


def tiny_captioner_config(architecture: str, tokenizer, image_size: int, sizes: CaptionerSizes):
    """A ``BlipConfig`` or ``GitConfig`` of the real architecture at a CPU-trainable size.

    Both start a caption at ``[CLS]`` and stop at ``[SEP]``, the ids of ``tokenizer``.

    Parameters
    ----------
    architecture : {"blip", "git"}
        The captioner family.
    tokenizer : PreTrainedTokenizerBase
        The word-level tokenizer; its vocabulary size and special-token ids go into the config.
    image_size : int
        Side of the square input images, in pixels.
    sizes : CaptionerSizes
        The towers' sizes.

    Returns
    -------
    transformers.BlipConfig or transformers.GitConfig

    Raises
    ------
    ValueError
        If ``architecture`` is neither BLIP nor GIT.
    """
    from transformers import BlipConfig, GitConfig

    heads, max_length, dropout = sizes.heads, sizes.max_length, sizes.dropout
    vision = dict(
        _tower(sizes.vision_width, sizes.vision_layers, heads), image_size=image_size, patch_size=sizes.patch_size
    )
    ids = dict(pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.cls_token_id)
    drop = {} if dropout is None else dict(hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)
    if architecture == "blip":
        text = dict(
            _tower(sizes.text_width, sizes.text_layers, heads),
            vocab_size=len(tokenizer),
            max_position_embeddings=max_length,
            sep_token_id=tokenizer.sep_token_id,
            eos_token_id=tokenizer.sep_token_id,
            **ids,
            **drop,
        )
        return BlipConfig(text_config=text, vision_config=vision)
    if architecture == "git":
        return GitConfig(
            vision_config=vision,
            vocab_size=len(tokenizer),
            max_position_embeddings=max_length,
            eos_token_id=tokenizer.sep_token_id,
            **_tower(sizes.text_width, sizes.text_layers, heads),
            **ids,
            **drop,
        )
    raise ValueError(f"unknown captioner architecture {architecture!r}; expected one of {ARCHITECTURES}")


def captioner_image_processor(architecture: str, image_size: int):
    """The image processor each family ships with (BLIP: resize; GIT: CLIP's), at ``image_size``.

    Parameters
    ----------
    architecture : {"blip", "git"}
        The captioner family.
    image_size : int
        Side of the square images the processor returns.

    Returns
    -------
    transformers.BlipImageProcessor or transformers.CLIPImageProcessor
    """
    from transformers import BlipImageProcessor, CLIPImageProcessor

    if architecture == "blip":
        return BlipImageProcessor(size={"height": image_size, "width": image_size})
    if architecture == "git":
        return CLIPImageProcessor(
            size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size}
        )
    raise ValueError(f"unknown captioner architecture {architecture!r}; expected one of {ARCHITECTURES}")


def _model_class(architecture: str):
    """The transformers model class of a captioner family."""
    from transformers import BlipForConditionalGeneration, GitForCausalLM

    return {"blip": BlipForConditionalGeneration, "git": GitForCausalLM}[architecture]


def _config_class(architecture: str):
    """The transformers config class of a captioner family."""
    from transformers import BlipConfig, GitConfig

    return {"blip": BlipConfig, "git": GitConfig}[architecture]


class Captioner:
    """A saved captioner folder (BLIP or GIT, tiny or real) that samples captions for images.

    Parameters
    ----------
    path : path-like
        Folder with ``config.json`` (its ``model_type`` picks the class), weights, tokenizer and
        ``preprocessor_config.json``.
    device : str, optional
        Torch device (default CPU).
    dtype : {"auto", "bfloat16", "float16", "float32"}, optional
        The model's precision (:func:`condeval.core.devices.torch_dtype`: bfloat16 on a GPU by default).
    image_size : int, optional
        Resize each image to this square (bicubic) before the model's own processor: CReL's "all at image
        size 224 × 224" for every captioner. Default: the images as they are.
    """

    def __init__(
        self,
        path: str | os.PathLike,
        device: str | None = None,
        dtype: str | None = None,
        image_size: int | None = None,
    ):
        import json

        from transformers import AutoImageProcessor, AutoTokenizer

        from condeval.core.devices import check_device, log_precision, torch_dtype

        self.path = Path(path)
        model_type = json.loads((self.path / "config.json").read_text()).get("model_type")
        architecture = {"blip": "blip", "git": "git"}.get(model_type)
        if architecture is None:
            raise ValueError(f"{self.path / 'config.json'}: model_type {model_type!r} is not a BLIP or GIT captioner")
        self.device = check_device(device or "cpu")
        self.dtype = torch_dtype(dtype, self.device)
        self.model = _model_class(architecture).from_pretrained(str(path), dtype=self.dtype).eval().to(self.device)
        log_precision(self.model, self.path)
        self.tokenizer = AutoTokenizer.from_pretrained(str(path))
        self.image_processor = AutoImageProcessor.from_pretrained(str(path))
        if image_size is not None:
            from condeval.core.io import check_integer

            check_integer(image_size, "image_size", least=1)
        self.image_size = image_size

    @torch.no_grad()
    def generate(
        self,
        images: Sequence[Image.Image | str],
        *,
        seed: int,
        batch_size: int = 64,
        progress_bar: bool = True,
        offset: int = 0,
        **sampling,
    ) -> list[str]:
        """One sampled caption per image.

        Each batch seeds torch from ``(seed, its first image's position)``: the same images, seed and
        batch size give the same captions. Special tokens other than the end token are never sampled.

        Parameters
        ----------
        images : sequence of PIL.Image.Image or path-like
            The images, or paths of image files (opened as RGB).
        seed : int
            Seed of the sampling.
        batch_size : int, default 64
            Images per ``model.generate`` call.
        progress_bar : bool, default True
            Report progress over batches (:func:`condeval.core.logs.progress`: a line per 30 s in a
            job's log, a bar on a terminal).
        offset : int, default 0
            The position of ``images[0]`` in a longer list drawn in pieces: the pieces of a list, each
            drawn with its offset, give the captions of the whole list drawn at once (batches aligned).
        **sampling
            Keyword arguments of ``model.generate`` (e.g. ``do_sample``, ``temperature``, ``top_k``).

        Returns
        -------
        list of str
            One caption per image, in order (an empty caption, which a captioner may sample, is kept
            and counted in a warning).

        Raises
        ------
        TypeError, ValueError
            Naming the argument: one image or path instead of a sequence, an item that is neither,
            a ``seed`` or ``batch_size`` that is not an integer (``batch_size`` at least 1), or a
            ``sampling`` key that returns other than one caption per image
            (:data:`RESERVED_SAMPLING`: draw again with another seed instead).
        """
        from condeval.core.io import check_integer
        from condeval.encoders.inputs import image_list, rgb_images

        images = image_list(images)
        check_integer(seed, "seed")
        check_integer(batch_size, "batch_size", least=1)
        check_integer(offset, "offset")
        reserved = sorted(set(sampling) & set(RESERVED_SAMPLING))
        if reserved:
            raise ValueError(
                f"generate samples one caption per image; {reserved} would change that (for more "
                "captions per image, call it again with another seed)"
            )
        unwanted = [
            self.tokenizer.convert_tokens_to_ids(t)
            for t in (
                self.tokenizer.pad_token,
                self.tokenizer.unk_token,
                self.tokenizer.mask_token,
                self.tokenizer.cls_token,
            )
            if t is not None
        ]
        sampling = {"suppress_tokens": sorted(set(unwanted)), **sampling}
        captions: list[str] = []
        for start in progress(range(0, len(images), batch_size), desc="captions", unit="batch", enabled=progress_bar):
            batch = rgb_images(images[start : start + batch_size])
            if self.image_size is not None:
                square = (self.image_size, self.image_size)
                batch = [image.resize(square, Image.Resampling.BICUBIC) for image in batch]
            pixels = self.image_processor(batch, return_tensors="pt")["pixel_values"].to(self.device, self.dtype)
            torch.manual_seed(int(np.random.SeedSequence([seed, offset + start]).generate_state(1)[0]))
            out = self.model.generate(pixel_values=pixels, **sampling)
            captions.extend(text.strip() for text in self.tokenizer.batch_decode(out, skip_special_tokens=True))
        empty = sum(not caption for caption in captions)
        if empty:
            log.warning("%s: %d of %d sampled captions are empty", self.path, empty, len(captions))
        return captions
