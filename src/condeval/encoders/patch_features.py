"""The trust score's feature spaces: a DINOv3 ViT and a SigLIP vision tower, read as the mean of their
patch tokens (the paper's scoring and KID space is DINOv3's; SigLIP's is REPA's second teacher and the
translator's target).

Both load with ``from_pretrained`` like ``facebook/dinov3-vitl16-pretrain-lvd1689m`` and
``google/siglip-so400m-patch14-224``; the offline default builds tiny configs of the same classes.
Which tokens are the patches is one choice made here (:func:`patch_tokens`): DINOv3's sequence is
``[CLS, registers…, patches…]``, SigLIP's vision tower has patches only.

Two ways to train them: :func:`train_patch_encoder` on crop views of given images, and
:func:`train_patch_encoder_on_world` on renders drawn from a miniature world (faces or cells), where
the world's nuisance is the augmentation and every instance meets its counterfactual twins in its batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F

from condeval.core.training import ScheduledModule, TrainRecipe, cosine_schedule

__all__ = [
    "tiny_dinov3",
    "tiny_siglip_vision",
    "patch_tokens",
    "mean_patch_features",
    "pixel_values",
    "augmented_views",
    "FACE_NUISANCE",
    "counterfactual_face",
    "face_view_pairs",
    "cell_view_pairs",
    "channel_statistics",
    "ContrastivePatchEncoder",
    "PatchObjective",
    "WorldSample",
    "train_patch_encoder",
    "train_patch_encoder_on_world",
]

#: What a face's two views resample: everything the four attributes, the skin and the hair do not fix.
FACE_NUISANCE = ("scale", "dx", "dy", "tilt", "background", "light")


def tiny_dinov3(
    image_size: int, *, width: int = 64, layers: int = 3, heads: int = 4, patch_size: int = 8, registers: int = 4
):
    """A randomly initialised ``DINOv3ViTModel`` of the real architecture at a CPU-trainable size."""
    from transformers import DINOv3ViTConfig, DINOv3ViTModel

    config = DINOv3ViTConfig(
        image_size=image_size,
        patch_size=patch_size,
        hidden_size=width,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=2 * width,
        num_register_tokens=registers,
    )
    return DINOv3ViTModel(config)


def tiny_siglip_vision(image_size: int, *, width: int = 64, layers: int = 3, heads: int = 4, patch_size: int = 8):
    """A randomly initialised ``SiglipVisionModel`` of the real architecture at a CPU-trainable size."""
    from transformers import SiglipVisionConfig, SiglipVisionModel

    config = SiglipVisionConfig(
        image_size=image_size,
        patch_size=patch_size,
        hidden_size=width,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=2 * width,
    )
    return SiglipVisionModel(config)


def patch_tokens(model, pixel_values: torch.Tensor) -> torch.Tensor:
    """(B, P, D): the final hidden states of the image patches alone (DINOv3: after its CLS and register tokens).

    A config carrying ``channel_mean`` and ``channel_std`` (the tiny extractors trained on world renders)
    has ``pixel_values`` standardised per channel with them first, as an image processor would.
    """
    hidden = model(pixel_values=_standardised(model.config, pixel_values)).last_hidden_state
    if model.config.model_type == "dinov3_vit":
        return hidden[:, 1 + model.config.num_register_tokens :]
    if model.config.model_type == "siglip_vision_model":
        return hidden
    raise ValueError(f"patch_tokens reads DINOv3 or SigLIP vision models, not {model.config.model_type!r}")


def _standardised(config, pixel_values: torch.Tensor) -> torch.Tensor:
    mean, std = getattr(config, "channel_mean", None), getattr(config, "channel_std", None)
    if mean is None or std is None:
        return pixel_values
    mean, std = (torch.tensor(v, dtype=pixel_values.dtype, device=pixel_values.device) for v in (mean, std))
    return (pixel_values - mean[:, None, None]) / std[:, None, None]


def mean_patch_features(model, pixel_values: torch.Tensor) -> torch.Tensor:
    """(B, D): the mean of the patch tokens, the trust score's image feature."""
    return patch_tokens(model, pixel_values).mean(dim=1)


# ------------------------------------------------------------------------------------ training
def pixel_values(images) -> torch.Tensor:
    """uint8 images (N, C, H, W) as the extractors read them: each channel scaled to [−1, 1]."""
    return torch.as_tensor(images if torch.is_tensor(images) else np.asarray(images), dtype=torch.float32) / 127.5 - 1.0


def augmented_views(images: np.ndarray, seed: int) -> np.ndarray:
    """One random view per uint8 image (N, C, H, W): a crop of 70–100% of the side resized back, a
    horizontal flip half the time, a per-channel gain in [0.8, 1.2] and pixel noise (seeded)."""
    rng = np.random.default_rng(seed)
    n, _, side, _ = images.shape
    out = np.empty_like(images)
    for i in range(n):
        crop = int(side * rng.uniform(0.7, 1.0))
        y, x = rng.integers(0, side - crop + 1, 2)
        patch = torch.as_tensor(images[i, :, y : y + crop, x : x + crop], dtype=torch.float32)[None]
        view = F.interpolate(patch, size=side, mode="bilinear", align_corners=False)[0].numpy()
        if rng.random() < 0.5:
            view = view[:, :, ::-1]
        view = view * rng.uniform(0.8, 1.2, (len(view), 1, 1)) + rng.normal(0, 4.0, view.shape)
        out[i] = np.clip(view, 0, 255).astype(np.uint8)
    return out


def counterfactual_face(face, attribute: int, rng: np.random.Generator):
    """``face`` with one attribute (an index into ``Face.attributes``) flipped, all else kept; flipping
    Blond_Hair recolours the hair (blond ↔ a dark shade, drawn as the world draws it)."""
    from condeval.datasets.faceworld import sample_face

    field = ("male", "smiling", "blond", "glasses")[attribute]
    twin = replace(face, **{field: 1 - getattr(face, field)})
    if field == "blond":
        drawn = sample_face(rng, twin.attributes)
        twin = replace(twin, hair=drawn.hair, hair_name=drawn.hair_name)
    return twin


def face_view_pairs(n: int, seed: int, side: int) -> tuple[np.ndarray, np.ndarray]:
    """Two views of ``n`` faces and of their counterfactual twins, uint8 (n, 5, 3, side, side) each.

    Row ``i`` holds a face drawn from the world (:func:`~condeval.datasets.faceworld.sample_face`)
    and its four twins, one per attribute flipped (:func:`counterfactual_face`). A view renders all
    five with one fresh draw of :data:`FACE_NUISANCE` and fresh pixel noise, then through the JPEG
    round trip the world's files take, so within a view a face and a twin differ by one attribute
    alone, and the two views of a face share only what it is.
    """
    from condeval.datasets.faceworld import render_face, sample_face

    rng = np.random.default_rng(seed)
    views = np.empty((2, n, 5, 3, side, side), np.uint8)
    for i in range(n):
        face = sample_face(rng)
        group = (face, *(counterfactual_face(face, k, rng) for k in range(len(face.attributes))))
        for view in views:
            fresh = sample_face(rng)
            nuisance = {name: getattr(fresh, name) for name in FACE_NUISANCE}
            for j, instance in enumerate(group):
                view[i, j] = _as_written(render_face(replace(instance, **nuisance), rng, side))
    return views[0], views[1]


def _as_written(image) -> np.ndarray:
    """(3, H, W) uint8 of a rendered face after the JPEG round trip the world's files take (quality 92)."""
    import io

    from PIL import Image

    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=92)
    return np.asarray(Image.open(buffer).convert("RGB")).transpose(2, 0, 1)


def cell_view_pairs(n: int, seed: int, side: int, world_seed: int = 0, sirna_ids=None) -> tuple[np.ndarray, ...]:
    """Two views of ``n`` sites and of their counterfactual twins, uint8 (n, 3, 6, side, side) each,
    and each instance's condition key (n, 3), equal for instances of one (cell type, siRNA).

    Row ``i`` holds a (cell type, siRNA) pair drawn uniformly (siRNAs from ``sirna_ids``, default the
    whole library 1…1138, effects as the world ``world_seed`` draws them) and its two twins: another
    siRNA in the same cell type, and the same siRNA in another cell type. A view renders each one's
    :class:`~condeval.datasets.cellworld.SiteSpec` afresh: new cell count, placement, sizes,
    orientations, nucleoli, granules and noise. A few siRNAs make one condition recur in a batch;
    the loss leaves such pairs out of the negatives, by their keys.
    """
    from condeval.datasets.cellworld import CELL_TYPE_BASES, NEGATIVE_CONTROL, render_site, site_parameters

    rng = np.random.default_rng(seed)
    types = list(CELL_TYPE_BASES)
    ids = np.arange(1, NEGATIVE_CONTROL + 1) if sirna_ids is None else np.asarray(sirna_ids)
    views, keys = np.empty((2, n, 3, 6, side, side), np.uint8), np.empty((n, 3), np.int64)
    for i in range(n):
        cell_type, sirna = str(rng.choice(types)), int(rng.choice(ids))
        group = (
            (cell_type, sirna),
            (cell_type, int(rng.choice(ids[ids != sirna]))),
            (str(rng.choice([t for t in types if t != cell_type])), sirna),
        )
        keys[i] = [types.index(t) * (NEGATIVE_CONTROL + 1) + s for t, s in group]
        specs = [site_parameters(*pair, world_seed) for pair in group]
        for view in views:
            for j, spec in enumerate(specs):
                view[i, j] = render_site(spec, rng, side)
    return views[0], views[1], keys


class ContrastivePatchEncoder(ScheduledModule):
    """Lightning wrapper: two views of each image pulled together by their mean-patch features.

    ``kind="dinov3"``: symmetric InfoNCE at ``temperature`` (view invariance, as the DINO-SIM encoder;
    DINOv3 itself self-distils). ``kind="siglip"``: SigLIP's pairwise sigmoid loss with a learnt scale
    and bias (initialised at log 10 and −10, as SigLIP's), the second view in the text's place. The
    two extractors thus differ by objective as well as by architecture.

    A batch is two views, (B, C, H, W) or (B, G, C, H, W): rows of ``G`` instances (an instance and
    its counterfactual twins), each its own instance, so twins always meet as negatives. An optional
    third array of condition keys (B, G) leaves pairs of distinct instances with one key out of the
    negatives. With rows of twins, ``twin_weight`` adds the same loss within each row alone (an
    instance against its twins): over the whole batch the gradient is spread over many easy
    negatives, and twins that differ by a mouth or a rim would be told apart late.
    ``max_grad_norm`` clips the gradient's global norm, as SigLIP and DINOv3 are trained.
    """

    decay_matrices_only = True

    default_weight_decay = 0.05

    def __init__(
        self,
        kind: str,
        config: dict,
        schedule: dict | None = None,
        temperature: float = 0.1,
        twin_weight: float = 0.0,
        max_grad_norm: float | None = None,
    ):
        super().__init__()
        self.save_hyperparameters()
        if kind == "dinov3":
            from transformers import DINOv3ViTConfig, DINOv3ViTModel

            self.model = DINOv3ViTModel(DINOv3ViTConfig(**config))
        elif kind == "siglip":
            from transformers import SiglipVisionConfig, SiglipVisionModel

            self.model = SiglipVisionModel(SiglipVisionConfig(**config))
            self.logit_scale = torch.nn.Parameter(torch.tensor(float(np.log(10.0))))
            self.logit_bias = torch.nn.Parameter(torch.tensor(-10.0))
        else:
            raise ValueError(f"kind must be 'dinov3' or 'siglip'; got {kind!r}")

    def _loss(self, batch, training: bool) -> torch.Tensor:
        first, keys = batch[0], batch[2:]
        a, b = (F.normalize(mean_patch_features(self.model, pixel_values(_instances(v))), dim=-1) for v in batch[:2])
        shared = None
        if keys:
            key = keys[0].reshape(-1)
            shared = (key[:, None] == key[None, :]) & ~torch.eye(len(key), dtype=torch.bool, device=key.device)
        loss = self._objective(a, b, shared)
        if self.hparams.twin_weight and first.ndim == 5:
            groups = first.shape[1]
            loss = loss + self.hparams.twin_weight * self._objective(
                a.unflatten(0, (-1, groups)), b.unflatten(0, (-1, groups))
            )
        return loss

    def configure_gradient_clipping(self, optimizer, gradient_clip_val=None, gradient_clip_algorithm=None):
        if self.hparams.max_grad_norm is not None:
            self.clip_gradients(optimizer, gradient_clip_val=self.hparams.max_grad_norm, gradient_clip_algorithm="norm")

    def _objective(self, a: torch.Tensor, b: torch.Tensor, shared: torch.Tensor | None = None) -> torch.Tensor:
        """The extractor's loss between unit features (..., n, D) of two views, row i of each the same
        instance; ``shared`` (n, n) marks pairs of distinct rows drawn from one condition, left out."""
        logits = a @ b.transpose(-1, -2)
        if self.hparams.kind == "dinov3":
            return _info_nce(logits / self.hparams.temperature, shared)
        return _sigmoid_loss(logits * self.logit_scale.exp() + self.logit_bias, shared)


def _info_nce(logits: torch.Tensor, shared: torch.Tensor | None = None) -> torch.Tensor:
    """Symmetric InfoNCE of (..., n, n) logits whose diagonal holds the matching views."""
    if shared is not None:
        logits = logits.masked_fill(shared, float("-inf"))
    return -(logits.log_softmax(-1) + logits.log_softmax(-2)).diagonal(dim1=-2, dim2=-1).mean() / 2


def _sigmoid_loss(logits: torch.Tensor, shared: torch.Tensor | None = None) -> torch.Tensor:
    """SigLIP's loss of (..., n, n) logits: +1 labels on the diagonal, −1 elsewhere, summed per row."""
    n = logits.shape[-1]
    signs = 2 * torch.eye(n, device=logits.device) - 1
    terms = -F.logsigmoid(signs * logits)
    if shared is not None:
        terms = terms.masked_fill(shared, 0.0)
    return terms.sum((-2, -1)).mean() / n


def channel_statistics(images: np.ndarray) -> tuple[list[float], list[float]]:
    """Per-channel mean and standard deviation of uint8 images (…, C, H, W) in :func:`pixel_values` units."""
    pixels = pixel_values(images.reshape(-1, *images.shape[-3:]))
    return pixels.mean((0, 2, 3)).tolist(), pixels.std((0, 2, 3)).clamp_min(1e-3).tolist()


def _instances(view: torch.Tensor) -> torch.Tensor:
    """(B, G, C, H, W) rows of twins as (B·G, C, H, W) instances; (B, C, H, W) as it is."""
    return view.flatten(0, 1) if view.ndim == 5 else view


@dataclass(frozen=True)
class PatchObjective:
    """The contrastive loss terms of :class:`ContrastivePatchEncoder` (its defaults: those of training on a
    world's renders).

    Parameters
    ----------
    temperature : float > 0, default 0.2
        DINOv3's InfoNCE temperature (SigLIP learns its scale and bias instead).
    twin_weight : float >= 0, default 3.0
        Weight of the same loss within each row of an instance and its counterfactual twins.
    max_grad_norm : float, optional, default 1.0
        The gradient's global norm is clipped at it; ``None`` clips nothing.
    """

    temperature: float = 0.2
    twin_weight: float = 3.0
    max_grad_norm: float | None = 1.0


@dataclass(frozen=True)
class WorldSample:
    """The training rows drawn from a miniature world: ``instances`` rows of an instance and its
    counterfactual twins, two views of each, ``side`` pixels square.

    Parameters
    ----------
    world : {"faces", "cells"}
        :func:`face_view_pairs` or :func:`cell_view_pairs` draws the rows.
    instances : int
        Rows drawn (the training recipe's ``held_out`` first rows validate).
    side : int
        The renders' side in pixels.
    world_seed : int, default 0
        The cell world whose siRNA effects the sites show (``world="cells"`` only).
    sirna_ids : sequence of int, optional
        The siRNAs drawn from (``world="cells"`` only; default the whole library).
    """

    world: str
    instances: int
    side: int
    world_seed: int = 0
    sirna_ids: Sequence[int] | None = None

    def view_pairs(self, seed: int) -> tuple[np.ndarray, ...]:
        """The two views of every row (and, for cells, each instance's condition key), drawn with ``seed``."""
        if self.world == "faces":
            return face_view_pairs(self.instances, seed, self.side)
        if self.world == "cells":
            return cell_view_pairs(self.instances, seed, self.side, self.world_seed, self.sirna_ids)
        raise ValueError(f"world must be 'faces' or 'cells'; got {self.world!r}")


def train_patch_encoder(
    images: np.ndarray,
    out_dir,
    recipe: TrainRecipe,
    *,
    kind: str,
    model: dict,
    temperature: float = 0.1,
) -> dict:
    """Train a tiny DINOv3 (``kind="dinov3"``) or SigLIP vision tower on two augmented views of each
    uint8 image (N, C, H, W) and ``save_pretrained`` it into ``out_dir`` (see :class:`ContrastivePatchEncoder`);
    ``recipe.held_out`` first images validate.

    Returns
    -------
    dict
        The training summary.
    """
    views = augmented_views(images, recipe.seed), augmented_views(images, recipe.seed + 1)
    objective = PatchObjective(temperature=temperature, twin_weight=0.0, max_grad_norm=None)
    return _train_on_views(views, out_dir, recipe, kind=kind, model=model, objective=objective)


def train_patch_encoder_on_world(
    sample: WorldSample,
    out_dir,
    recipe: TrainRecipe,
    *,
    kind: str,
    model: dict,
    objective: PatchObjective = PatchObjective(),
) -> dict:
    """Train a tiny DINOv3 or SigLIP vision tower on renders of a miniature world; ``save_pretrained`` it.

    Needs no files: ``sample.instances`` rows are drawn with ``recipe.seed`` by :func:`face_view_pairs`
    (``world="faces"``) or :func:`cell_view_pairs` (``world="cells"``), each an instance and its
    counterfactual twins, two views of each. A batch of ``recipe.batch_size`` rows thus holds 5 (faces)
    or 3 (cells) times as many instances, and the loss must tell every instance from its twins, which
    differ by one attribute (faces) or one factor (cells); ``objective.twin_weight`` weighs the loss
    within each row and ``objective.max_grad_norm`` clips the gradient (see
    :class:`ContrastivePatchEncoder`). The extractor's config stores each channel's mean and standard
    deviation over the training renders, and :func:`patch_tokens` standardises with them: in [−1, 1]
    units the dark six-channel sites hardly vary, and their features collapse.

    Parameters
    ----------
    sample : WorldSample
        The world, its rows and their side.
    out_dir : path-like
    recipe : TrainRecipe
        Epochs, batch size, learning rate, held-out rows (the first drawn, for early stopping), seed,
        patience (default: all epochs; the best epoch is saved either way), accelerator and fingerprint.
    kind : {"dinov3", "siglip"}
    model : dict
        Keyword arguments of :func:`tiny_dinov3` or :func:`tiny_siglip_vision`.
    objective : PatchObjective
        The loss terms.

    Returns
    -------
    dict
        The training summary.
    """
    views = sample.view_pairs(recipe.seed)
    return _train_on_views(views, out_dir, recipe, kind=kind, model=model, objective=objective, standardise=True)


def _train_on_views(
    views, out_dir, recipe: TrainRecipe, *, kind, model, objective: PatchObjective, standardise: bool = False
) -> dict:
    import pytorch_lightning as pl

    from condeval.core.resources import optimizer_steps
    from condeval.encoders.train import train_and_export

    first = views[0]
    side, channels = first.shape[-1], first.shape[-3]
    build = tiny_dinov3 if kind == "dinov3" else tiny_siglip_vision
    config = build(side, **model).config
    config.num_channels = channels
    if standardise:
        config.channel_mean, config.channel_std = channel_statistics(first[recipe.held_out :])
    pl.seed_everything(recipe.seed, workers=True, verbose=False)
    steps = optimizer_steps(len(first) - recipe.held_out, recipe.batch_size, recipe.epochs)
    module = ContrastivePatchEncoder(
        kind,
        config.to_dict(),
        schedule=cosine_schedule(recipe.lr, steps, max(1, steps // 10)),
        temperature=objective.temperature,
        twin_weight=objective.twin_weight,
        max_grad_norm=objective.max_grad_norm,
    )
    return train_and_export(module, tuple(views), out_dir, recipe)
