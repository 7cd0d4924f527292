"""A tiny ``CLIPModel`` trained contrastively on the mini-world, with shape-swap hard negatives.

Trained here, it is saved with ``save_pretrained`` (model, word-level tokenizer, image processor in
one folder) and loaded everywhere as ``ClipEncoder(path)`` (:class:`condeval.encoders.features.ClipEncoder`,
which reads the folder with ``CLIPModel.from_pretrained``), the call that loads
``openai/clip-vit-large-patch14`` from a local directory on a cluster.

Why hard negatives: with the symmetric InfoNCE loss alone, a tiny CLIP retrieves well from colour,
size and count and barely registers the shape noun (a swapped shape scored lower only 51-56% of
the time in a try). Every caption therefore also meets, as extra negatives for its own image,
``foils`` copies of itself with one shape noun swapped (:func:`condeval.datasets.miniworld.swap_shape_noun`),
the FOIL construction the word-level track later detects. Foils cost text-tower passes only, a
small share of a step next to the vision tower.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel

from condeval.core.training import ScheduledModule
from condeval.encoders.data import trim_padding

__all__ = ["ClipSizes", "tiny_clip_config", "ContrastiveCLIP", "clip_image_processor", "contrastive_loss"]


@dataclass(frozen=True)
class ClipSizes:
    """The sizes of a tiny CLIP (:func:`tiny_clip_config`); a config's CLIP ``model`` keys are its fields.

    Parameters
    ----------
    vision_width, vision_layers : int
        Hidden size and depth of the vision tower.
    patch_size : int
        Side of a vision patch, in pixels.
    text_width, text_layers : int
        Hidden size and depth of the text tower.
    heads : int
        Attention heads of both towers.
    projection_dim : int
        Width of the shared embedding.
    max_length : int
        Longest caption, in tokens (the text position embeddings).

    Examples
    --------
    >>> ClipSizes(vision_width=16, vision_layers=1).text_layers
    2
    """

    vision_width: int = 128
    vision_layers: int = 4
    patch_size: int = 8
    text_width: int = 64
    text_layers: int = 2
    heads: int = 4
    projection_dim: int = 128
    max_length: int = 32


def tiny_clip_config(tokenizer, image_size: int, sizes: ClipSizes = ClipSizes()) -> CLIPConfig:
    """A ``CLIPConfig`` of the real architecture at a CPU-trainable size, wired to ``tokenizer``.

    The text tower pools at the first ``[SEP]`` (``eos_token_id``), as CLIP pools at its end token.
    A grammar of 80 words needs a far smaller text tower than the images need a vision tower.

    Parameters
    ----------
    tokenizer : PreTrainedTokenizerBase
        The word-level tokenizer; its vocabulary size and special-token ids go into the config.
    image_size : int
        Side of the square input images, in pixels.
    sizes : ClipSizes
        The towers' sizes.
    """
    text = dict(
        hidden_size=sizes.text_width,
        intermediate_size=2 * sizes.text_width,
        num_hidden_layers=sizes.text_layers,
        num_attention_heads=sizes.heads,
        vocab_size=len(tokenizer),
        max_position_embeddings=sizes.max_length,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
    )
    vision = dict(
        hidden_size=sizes.vision_width,
        intermediate_size=2 * sizes.vision_width,
        num_hidden_layers=sizes.vision_layers,
        num_attention_heads=sizes.heads,
        image_size=image_size,
        patch_size=sizes.patch_size,
    )
    return CLIPConfig(text_config=text, vision_config=vision, projection_dim=sizes.projection_dim)


def clip_image_processor(image_size: int) -> CLIPImageProcessor:
    """CLIP's own preprocessing (resize, centre crop, normalise with CLIP's mean and std) at ``image_size``."""
    return CLIPImageProcessor(size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size})


def contrastive_loss(
    image: torch.Tensor,
    text: torch.Tensor,
    hard: torch.Tensor | None,
    logit_scale: torch.Tensor,
    hard_weight: float = 1.0,
    max_scale: float = 100.0,
) -> torch.Tensor:
    """Symmetric InfoNCE over a batch; image i also ranks against the hard negative texts.

    ``image``, ``text``: L2-normalised (B, D) embeddings; ``hard``: L2-normalised wrong captions of
    each image, (B, D) or (B, K, D). Image→text scores each image against all B captions and all
    hard negatives; ``hard_weight`` adds the choice between each caption and its own K hard
    negatives. ``max_scale`` caps the learned inverse temperature (CLIP's cap is 100).
    """
    scale = logit_scale.exp().clamp(max=max_scale)
    targets = torch.arange(image.shape[0], device=image.device)
    hard = None if hard is None else hard.view(image.shape[0], -1, image.shape[1])
    texts = text if hard is None else torch.cat([text, hard.flatten(0, 1)])
    image_to_text = scale * image @ texts.T
    text_to_image = scale * text @ image.T
    loss = 0.5 * (F.cross_entropy(image_to_text, targets) + F.cross_entropy(text_to_image, targets))
    if hard is None:
        return loss
    # The true caption against its own foils only: among the batch's candidates they are a weak
    # signal, and this term is what makes the shape noun count.
    pair = scale * torch.cat([(image * text).sum(-1, keepdim=True), torch.einsum("bd,bkd->bk", image, hard)], dim=1)
    return loss + hard_weight * F.cross_entropy(pair, torch.zeros_like(targets))


class ContrastiveCLIP(ScheduledModule):
    """Lightning wrapper: a batch is ``(pixel_values, ids, mask, hard_ids, hard_mask)`` per image.

    ``ids``/``mask`` hold all of an image's captions, (B, C, L), ``hard_ids``/``hard_mask`` each
    caption's hard negatives, (B, C, L) or (B, C, K, L); each training step pairs every image with
    one of its captions at random (and that caption's hard negatives), so an epoch is one pass over
    the images. Validation uses caption 0.

    Parameters
    ----------
    config : dict
        ``CLIPConfig.to_dict()`` (plain data, so checkpoints load with ``weights_only=True``).
    schedule : dict, optional
        AdamW's learning rate, warm-up and cosine decay (:func:`~condeval.core.training.cosine_schedule`);
        weight decay 0.1 unless it names one.
    hard_weight : float
        Weight of each caption against its own hard negatives (:func:`contrastive_loss`).
    max_logit_scale : float
        Cap on the learned inverse temperature: a lower cap makes true pairs' cosines rise further
        above the rest, so fewer fall to CLIPScore's clip at 0.
    """

    default_weight_decay = 0.1

    def __init__(
        self,
        config: dict,
        schedule: dict | None = None,
        hard_weight: float = 1.0,
        max_logit_scale: float = 100.0,
    ):
        super().__init__()
        self.save_hyperparameters()
        self.model = CLIPModel(CLIPConfig(**config))

    decay_matrices_only = True

    def embed(self, pixel_values=None, ids=None, mask=None) -> torch.Tensor:
        if pixel_values is not None:
            features = self.model.get_image_features(pixel_values=pixel_values).pooler_output
        else:
            features = self.model.get_text_features(input_ids=ids, attention_mask=mask).pooler_output
        return F.normalize(features, dim=-1)

    def _loss(self, batch, training: bool) -> torch.Tensor:
        pixel_values, *texts = batch
        rows = torch.arange(pixel_values.shape[0], device=pixel_values.device)
        pick = (
            torch.randint(0, texts[0].shape[1], rows.shape, device=rows.device) if training else torch.zeros_like(rows)
        )
        ids, mask, hard_ids, hard_mask = (t[rows, pick] for t in texts)
        mask, ids = trim_padding(mask, ids)
        hard_mask, hard_ids = trim_padding(hard_mask, hard_ids)
        image = self.embed(pixel_values=pixel_values)
        text = self.embed(ids=ids, mask=mask)
        hard = self.embed(ids=hard_ids.flatten(0, -2), mask=hard_mask.flatten(0, -2))
        return contrastive_loss(
            image,
            text,
            hard,
            self.model.logit_scale,
            self.hparams.hard_weight,
            self.hparams.get("max_logit_scale", 100.0),
        )
