"""Training the tiny BLIP and GIT captioners of the mini-world (Lightning), exported with ``save_pretrained``.

Kept apart from :mod:`condeval.generators.captioners` so that sampling captions never imports Lightning.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

import pytorch_lightning as pl
import torch

from condeval.core.training import ScheduledModule, TrainRecipe, cosine_schedule
from condeval.encoders.data import trim_padding
from condeval.generators.captioners import (
    CaptionerSizes,
    _config_class,
    _model_class,
    captioner_image_processor,
    tiny_captioner_config,
)

__all__ = ["CaptionerModule", "VisionInit", "blip_vision_from_clip", "clip_token_scale", "train_captioner"]

log = logging.getLogger(__name__)


class CaptionerModule(ScheduledModule):
    """Lightning wrapper: captioning cross-entropy of a BLIP or GIT on ``(pixel_values, ids, mask)``.

    ``ids``/``mask`` hold all of an image's captions (B, C, L); each step trains on one of them at
    random, so an epoch is one pass over the images. Validation uses caption 0. The image encoder
    learns at ``vision_lr_scale`` times ``lr`` (a pre-trained tower fine-tuned gently).

    With ``freeze_vision``, a batch may carry the encoder's output tokens (B, T, D) from
    :meth:`image_tokens` in place of ``pixel_values``: a frozen encoder gives the same tokens every
    epoch, so they are computed once and the encoder is skipped in training (same loss).
    """

    default_weight_decay = 0.05

    def __init__(
        self,
        architecture: str,
        config: dict,
        schedule: dict | None = None,
        freeze_vision: bool = False,
        vision_lr_scale: float = 1.0,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.model = _model_class(architecture)(_config_class(architecture)(**config))
        if freeze_vision:
            self.vision_tower().requires_grad_(False)

    def _tower_slot(self) -> tuple[torch.nn.Module, str]:
        """The module holding the image encoder and the encoder's attribute name there."""
        if self.hparams.architecture == "git":
            return self.model.git, "image_encoder"
        return self.model, "vision_model"

    def vision_tower(self) -> torch.nn.Module:
        """The image encoder (GIT: a CLIP vision transformer; BLIP: its own ViT)."""
        return getattr(*self._tower_slot())

    @torch.no_grad()
    def image_tokens(self, pixel_values: torch.Tensor, batch_size: int = 256) -> torch.Tensor:
        """The image encoder's last hidden states (N, T, D) of ``pixel_values`` (N, 3, H, W), in eval mode."""
        tower = self.vision_tower()
        was_training = tower.training
        tower.eval()
        tokens = [tower(pixel_values=chunk).last_hidden_state for chunk in pixel_values.split(batch_size)]
        tower.train(was_training)
        return torch.cat(tokens)

    @contextlib.contextmanager
    def _encoder_given_tokens(self):
        """Swap the image encoder for :class:`_GivenTokens` while a batch of precomputed tokens runs."""
        parent, name = self._tower_slot()
        tower = getattr(parent, name)
        setattr(parent, name, _GivenTokens())
        try:
            yield
        finally:
            setattr(parent, name, tower)

    def lr_scale(self, name: str) -> float:
        tower = "model.git.image_encoder." if self.hparams.architecture == "git" else "model.vision_model."
        return self.hparams.vision_lr_scale if name.startswith(tower) else 1.0

    def _loss(self, batch, training: bool) -> torch.Tensor:
        pixel_values, ids, mask = batch
        rows = torch.arange(ids.shape[0], device=ids.device)
        pick = torch.randint(0, ids.shape[1], rows.shape, device=ids.device) if training else torch.zeros_like(rows)
        mask, ids = trim_padding(mask[rows, pick], ids[rows, pick])
        labels = ids.masked_fill(mask == 0, -100)
        if pixel_values.ndim == 4:
            return self.model(pixel_values=pixel_values, input_ids=ids, attention_mask=mask, labels=labels).loss
        if not self.hparams.freeze_vision:
            raise ValueError("precomputed image tokens need freeze_vision: a trained encoder changes its tokens")
        with self._encoder_given_tokens():  # rank 4 on the way in: GIT takes only rank-4 or 5 pixel batches
            return self.model(
                pixel_values=pixel_values[:, None], input_ids=ids, attention_mask=mask, labels=labels
            ).loss


class _GivenTokens(torch.nn.Module):
    """Stands in for a frozen image encoder: returns the tokens (B, 1, T, D) it is passed as (B, T, D)."""

    def forward(self, pixel_values: torch.Tensor, **kwargs):
        from transformers.modeling_outputs import BaseModelOutputWithPooling

        return BaseModelOutputWithPooling(last_hidden_state=pixel_values[:, 0])


def _vision_shape(vision_config) -> dict:
    """The CLIP vision tower's shape and activation, which a captioner's image encoder takes over with its weights."""
    keys = (
        "hidden_size",
        "intermediate_size",
        "num_hidden_layers",
        "num_attention_heads",
        "image_size",
        "patch_size",
        "hidden_act",
        "layer_norm_eps",
    )
    return {key: getattr(vision_config, key) for key in keys}


_CLIP_QKV = re.compile(r"^encoder\.layers\.(\d+)\.self_attn\.([qkv])_proj\.(weight|bias)$")


def blip_vision_from_clip(
    clip_vision_state: Mapping[str, torch.Tensor], token_scale: float | None = None
) -> dict[str, torch.Tensor]:
    """BLIP's vision-model state dict holding a CLIP vision tower's weights.

    Both are pre-norm ViTs with the same layer layout; they differ in names and shapes only:

    - q/k/v: CLIP's three projections become BLIP's fused ``qkv``, whose output BLIP reshapes to
      ``(3, heads, head_dim)``: rows (and bias entries) are all of q, then all of k, then all of v.
    - ``out_proj`` becomes ``projection``; layer norms, MLP and ``post_layernorm`` keep their names.
    - Embeddings: the class embedding gains BLIP's ``(1, 1, D)`` shape, the position table becomes a
      ``(1, P, D)`` parameter, and the bias-free CLIP patch convolution gets a zero bias.
    - CLIP's ``pre_layrnorm`` (applied to the embeddings) has no BLIP counterpart. Without
      ``token_scale`` it is dropped. With it, the layer norm is folded into the embeddings as the
      affine map ``x -> weight * (x - mean(x)) / token_scale + bias``, which is the layer norm
      itself for a token whose standard deviation is ``token_scale`` (see :func:`clip_token_scale`).

    Parameters
    ----------
    clip_vision_state : mapping of str to torch.Tensor
        ``CLIPModel.vision_model.state_dict()``.
    token_scale : float, optional
        The embedding tokens' typical standard deviation, to fold ``pre_layrnorm`` with.

    Returns
    -------
    dict of str to torch.Tensor
        Loads into ``BlipForConditionalGeneration.vision_model`` with ``strict=True`` when the BLIP
        vision config has the CLIP's shape and activation.

    Raises
    ------
    ValueError
        If a layer lacks one of its q/k/v projections, or ``token_scale`` is not positive.
    """
    state, qkv = {}, {}
    for name, tensor in clip_vision_state.items():
        if match := _CLIP_QKV.match(name):
            layer, part, kind = match.groups()
            qkv.setdefault((layer, kind), {})[part] = tensor
        else:
            state[name.replace(".self_attn.out_proj.", ".self_attn.projection.")] = tensor
    for (layer, kind), parts in qkv.items():
        if set(parts) != set("qkv"):
            raise ValueError(f"CLIP layer {layer} has {kind} of {sorted(parts)} only; BLIP's qkv needs q, k and v")
        state[f"encoder.layers.{layer}.self_attn.qkv.{kind}"] = torch.cat([parts["q"], parts["k"], parts["v"]])
    norm = {key: state.pop(f"pre_layrnorm.{key}") for key in ("weight", "bias")}
    patches = state["embeddings.patch_embedding.weight"]
    embeddings = {
        "embeddings.class_embedding": state["embeddings.class_embedding"].reshape(1, 1, -1),
        "embeddings.patch_embedding.weight": patches,
        "embeddings.patch_embedding.bias": patches.new_zeros(patches.shape[0]),
        "embeddings.position_embedding": state.pop("embeddings.position_embedding.weight")[None],
    }
    if token_scale is not None:
        embeddings = _fold_layer_norm(embeddings, norm, token_scale)
    return {**state, **embeddings}


def _fold_layer_norm(embeddings: dict, norm: dict, token_scale: float) -> dict:
    """The embeddings followed by the affine map ``x -> weight * (x - mean(x)) / token_scale + bias``.

    Every embedding token is a sum of the class or patch term and its position row, so the linear
    part maps each term and the bias joins the position rows.
    """
    if not token_scale > 0:
        raise ValueError(f"token_scale must be positive, got {token_scale}")
    width = norm["weight"].shape[0]
    centring = torch.eye(width) - torch.full((width, width), 1.0 / width)
    linear = norm["weight"][:, None] * centring / token_scale
    patches = embeddings["embeddings.patch_embedding.weight"]
    return {
        "embeddings.class_embedding": embeddings["embeddings.class_embedding"] @ linear.T,
        "embeddings.patch_embedding.weight": torch.einsum("oi,ichw->ochw", linear, patches),
        "embeddings.patch_embedding.bias": linear @ embeddings["embeddings.patch_embedding.bias"],
        "embeddings.position_embedding": embeddings["embeddings.position_embedding"] @ linear.T + norm["bias"],
    }


@torch.no_grad()
def clip_token_scale(clip_vision: torch.nn.Module, pixel_values: torch.Tensor) -> float:
    """The mean over images and tokens of the standard deviation ``pre_layrnorm`` divides by.

    Parameters
    ----------
    clip_vision : torch.nn.Module
        ``CLIPModel.vision_model``.
    pixel_values : torch.Tensor
        Processed images, (N, 3, H, W).

    Returns
    -------
    float
    """
    tokens = clip_vision.embeddings(pixel_values)
    variance = tokens.var(dim=-1, unbiased=False) + clip_vision.pre_layrnorm.eps
    return variance.sqrt().mean().item()


_SCALE_IMAGES = 1024  # training images whose embedding tokens set the folded pre_layrnorm's scale


def _load_clip_vision(module: CaptionerModule, clip, pixels) -> None:
    """Copy the CLIP's vision tower into the captioner's image encoder (every parameter, strictly).

    BLIP gets the CLIP's ``pre_layrnorm`` folded into its embeddings at the scale of ``pixels``'
    tokens (training images only).
    """
    state = clip.vision_model.state_dict()
    if module.hparams.architecture == "git":
        module.vision_tower().vision_model.load_state_dict(state)
        return
    scale = clip_token_scale(clip.vision_model, torch.as_tensor(pixels[:_SCALE_IMAGES]))
    module.vision_tower().load_state_dict(blip_vision_from_clip(state, token_scale=scale))
    log.info("BLIP's ViT from the CLIP's, pre_layrnorm folded at token scale %.4f", scale)


@dataclass(frozen=True)
class VisionInit:
    """Where a captioner's image encoder starts and how it learns (:func:`train_captioner`).

    Parameters
    ----------
    from_clip : path-like, optional
        A saved CLIP folder whose vision transformer initialises the image encoder: GIT's as the real
        GIT starts from a CLIP ViT (same parameter names); BLIP's through :func:`blip_vision_from_clip`,
        as the real BLIP starts from a pre-trained ViT (the CLIP's is the mini-world's only one), its
        ``pre_layrnorm`` folded in at the scale of the training images' tokens. The tower's shape and
        activation then come from the CLIP config, and the model's ``vision_width``, ``vision_layers``,
        ``heads`` and ``patch_size`` are ignored for it. ``None``: the encoder starts at random.
    freeze : bool, default False
        Keep the image encoder fixed. Its tokens of the training images are then computed once
        (:meth:`CaptionerModule.image_tokens`) and every epoch trains the text side on them.
    lr_scale : float, default 1.0
        The image encoder's learning rate as a fraction of the recipe's (when it is not frozen).
    """

    from_clip: str | os.PathLike | None = None
    freeze: bool = False
    lr_scale: float = 1.0


def _vision_from_clip(config, folder: str | os.PathLike, image_size: int):
    """The CLIP saved in ``folder``, its vision tower's shape and activation set in ``config``."""
    from transformers import CLIPModel

    clip = CLIPModel.from_pretrained(str(folder))
    if clip.config.vision_config.image_size != image_size:
        raise ValueError(
            f"{folder}: the CLIP reads {clip.config.vision_config.image_size}-pixel images, "
            f"the captioner is trained on {image_size}"
        )
    # CaptionerModule rebuilds the config from this dict, so BLIP's text decoder takes the new
    # vision width for its cross-attention (BlipConfig sets encoder_hidden_size from it).
    config.vision_config = type(config.vision_config)(**_vision_shape(clip.config.vision_config))
    log.info(
        "image encoder from %s: %s (model's vision_width and vision_layers ignored)",
        folder,
        _vision_shape(clip.config.vision_config),
    )
    return clip


def train_captioner(
    world: str | os.PathLike,
    tokenizer_dir: str | os.PathLike,
    out_dir: str | os.PathLike,
    recipe: TrainRecipe,
    *,
    architecture: str,
    images: int,
    model: dict,
    vision: VisionInit = VisionInit(),
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
    recipe : condeval.core.training.TrainRecipe
        Passes over the images, images per step, peak learning rate, the training images held out to
        validate, the seed (of the weights, the order and the caption picked per image), where it runs
        and the run's fingerprint (a changed setting starts afresh).
    architecture : {"blip", "git"}
        The captioner family.
    images : int
        Training images (the first ``recipe.held_out`` of them validate).
    model : dict
        Keyword arguments of :func:`~condeval.generators.captioners.tiny_captioner_config`, with
        ``image_size`` (the side of the square input images).
    vision : VisionInit, default VisionInit()
        Where the image encoder starts (a CLIP's vision tower, or at random), whether it is frozen, and
        its learning rate's scale.

    Returns
    -------
    dict
        The training summary of :func:`condeval.encoders.train.train_and_export`.
    """
    from transformers import AutoTokenizer

    from condeval.core.resources import optimizer_steps
    from condeval.encoders.data import pixel_values
    from condeval.encoders.train import coco_split, token_cube, train_and_export

    tokenizer = AutoTokenizer.from_pretrained(str(tokenizer_dir))
    model = dict(model)
    image_size = model.pop("image_size")
    processor = captioner_image_processor(architecture, image_size)
    frame, captions = coco_split(world, "train", images)
    arrays = (
        pixel_values(frame["path"].to_list(), processor),
        *token_cube(tokenizer, captions, model.get("max_length", 32)),
    )
    pl.seed_everything(recipe.seed, workers=True, verbose=False)
    config = tiny_captioner_config(architecture, tokenizer, image_size, CaptionerSizes(**model))
    clip = None if vision.from_clip is None else _vision_from_clip(config, vision.from_clip, image_size)
    steps = optimizer_steps(len(captions) - recipe.held_out, recipe.batch_size, recipe.epochs)
    module = CaptionerModule(
        architecture,
        config.to_dict(),
        schedule=cosine_schedule(recipe.lr, steps, max(1, steps // 10)),
        freeze_vision=vision.freeze,
        vision_lr_scale=vision.lr_scale,
    )
    if clip is not None:
        _load_clip_vision(module, clip, arrays[0][recipe.held_out :])
    if vision.freeze:
        arrays = (module.image_tokens(torch.as_tensor(arrays[0])).numpy(), *arrays[1:])
        log.info("image encoder frozen: its tokens %s computed once for every epoch", tuple(arrays[0].shape))
    return train_and_export(module, arrays, out_dir, recipe, (tokenizer, processor))
