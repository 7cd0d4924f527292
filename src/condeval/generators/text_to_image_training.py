"""Training the tiny text-to-image generators of :mod:`condeval.generators.text_to_image` (Lightning).

Every denoiser trains on latents of the mini-world's train images, computed once by the frozen
autoencoder, and on text embeddings computed each step by the pipeline's own ``encode_prompt``
(frozen encoders), so training and sampling condition through the same code:

- **SD3 / SD3.5** (``SD3Transformer2DModel``) and **FLUX** (``FluxTransformer2DModel``): rectified
  flow, as in the SD3 paper. ``x_t = (1 - σ) x_0 + σ ε`` with ``σ`` logit-normal, the model predicts
  the velocity ``ε - x_0``; captions drop to ``""`` at ``caption_dropout`` (the pipelines'
  classifier-free guidance uses the ``""`` prompt as its unconditional branch).
- **FLUX's guidance embedding** (FLUX.1-dev is guidance-distilled from a teacher: one forward,
  ``guidance_scale`` fed to the model): after the base training (guidance input 1), a student copy
  of the trained transformer learns, at guidance input ``g`` drawn from ``guidance_range``, the
  frozen teacher's classifier-free combination ``v("") + g (v(caption) - v(""))``
  (:class:`GuidanceDistillationModule`, ``distill_epochs``, in the run folder's ``distill/``).
  The teacher never changes, so the base model cannot drift, and the validation loss (the same
  term at seeded ``g``) judges the guided prediction the pipeline uses.
- **Kandinsky 2.2**: the prior (``PriorTransformer``) learns the image embedding from the text
  (x_0-prediction, UnCLIP's cosine schedule, normalised by ``clip_mean``/``clip_std``), the decoder
  ``UNet2DConditionModel`` the noise of MoVQ latents given the image's own embedding (dropped to the
  empty image's embedding, the pipeline's negative, at ``caption_dropout``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch

from condeval.core.training import ScheduledModule, TrainRecipe, cosine_schedule, hold_out, state_digest

if TYPE_CHECKING:
    from transformers import CLIPImageProcessor, CLIPModel, PreTrainedTokenizerBase, T5EncoderModel

__all__ = [
    "train_text_to_image",
    "train_flow_generator",
    "train_kandinsky",
    "train_t5_from_clip",
    "FrozenEncoders",
    "FlowOptions",
    "KandinskyOptions",
    "SavedComponents",
    "world_images",
    "latents_of",
    "flow_velocity",
    "FlowMatchingModule",
    "GuidanceDistillationModule",
    "KandinskyPriorModule",
    "KandinskyDecoderModule",
    "T5FromClipModule",
    "logit_normal",
]

log = logging.getLogger(__name__)


def logit_normal(n: int, generator: torch.Generator | None = None, device=None) -> torch.Tensor:
    """``σ = sigmoid(u)``, ``u ~ N(0, 1)``: SD3's timestep density for rectified-flow training."""
    return torch.sigmoid(torch.randn(n, generator=generator, device=device))


class _TextConditioned(ScheduledModule):
    """A denoiser trained on (latents or embeddings, image index) rows, with the image's captions
    (``captions[index]``, a list per image) encoded each step by the frozen ``encode(prompts, device)``
    callable, on the module's device.

    ``encode`` and ``captions`` are attached with :meth:`attach` and are not part of the
    checkpoint: only the denoiser is. They are part of the run's identity (:meth:`frozen_identity`),
    so a run folder left by other captions or another text encoder is not resumed.
    """

    def attach(self, encode, captions: list[list[str]], frozen=()) -> _TextConditioned:
        """Attach ``encode(prompts, device)`` and each image's ``captions``; ``frozen``: the modules and
        tokenizers ``encode`` reads (their weights and vocabularies identify the run)."""
        self._encode, self._captions, self._empty = encode, captions, None
        vocabularies = [part.get_vocab() for part in frozen if hasattr(part, "get_vocab")]
        modules = [part for part in frozen if isinstance(part, torch.nn.Module)]
        self._frozen = state_digest(captions, vocabularies, *modules)
        return self

    def frozen_identity(self) -> str:
        """Digest of the attached captions and frozen encoders (:func:`condeval.core.training.state_digest`)."""
        return self._frozen

    def _encoded(self, prompts: list[str]):
        return self._encode(prompts, self.device)

    def _prompts(self, index: torch.Tensor, generator: torch.Generator | None) -> list[str]:
        """One of each image's captions at random, ``""`` at ``caption_dropout`` (training only)."""
        n = len(index)
        pick = torch.rand(n, generator=generator)
        dropped = (
            torch.rand(n) < self.hparams.caption_dropout if generator is None else torch.zeros(n, dtype=torch.bool)
        )
        prompts = []
        for i, u, drop in zip(index.tolist(), pick.tolist(), dropped.tolist(), strict=True):
            captions = self._captions[i]
            prompts.append("" if drop else captions[int(u * len(captions))])
        return prompts

    def _randomness(self, training: bool, batch_idx_seed: int) -> torch.Generator | None:
        """None (the global, seeded RNG) in training; a fixed generator per validation batch."""
        return None if training else torch.Generator().manual_seed(batch_idx_seed)

    def validation_step(self, batch, batch_idx):
        self._val_batch = batch_idx
        super().validation_step(batch, batch_idx)


def flow_velocity(transformer, x_t, sigma, text, guidance=None) -> torch.Tensor:
    """An SD3 or FLUX ``transformer``'s velocity at noise level ``sigma`` (B,) for latents ``x_t`` (B, C, H, W).

    ``text`` is ``(sequence embeddings, pooled, text ids)`` as :func:`_flow_encoder` gives it;
    ``guidance`` (B,), FLUX's guidance-embedding input, defaults to 1 (the undistilled prediction).
    """
    from diffusers import FluxPipeline, SD3Transformer2DModel

    embeds, pooled, text_ids = text
    if isinstance(transformer, SD3Transformer2DModel):
        return transformer(
            hidden_states=x_t, timestep=sigma * 1000, encoder_hidden_states=embeds, pooled_projections=pooled
        ).sample
    b, c, h, w = x_t.shape
    packed = FluxPipeline._pack_latents(x_t, b, c, h, w)
    image_ids = FluxPipeline._prepare_latent_image_ids(b, h // 2, w // 2, x_t.device, x_t.dtype)
    if guidance is None and transformer.config.guidance_embeds:
        guidance = torch.ones_like(sigma)
    out = transformer(
        hidden_states=packed,
        timestep=sigma,
        guidance=guidance,
        pooled_projections=pooled,
        encoder_hidden_states=embeds,
        txt_ids=text_ids,
        img_ids=image_ids,
    ).sample
    return out.view(b, h // 2, w // 2, c, 2, 2).permute(0, 3, 1, 4, 2, 5).reshape(b, c, h, w)


def _noised(latents: torch.Tensor, generator: torch.Generator | None):
    """(σ, ε, x_t): a logit-normal noise level per row and the rectified-flow interpolant.

    Drawn where ``generator`` lives (validation's fixed CPU stream), else on the latents' device, so a
    GPU step does not wait for noise made on the CPU.
    """
    device = generator.device if generator is not None else latents.device
    sigma = logit_normal(len(latents), generator, device=device).to(latents)
    noise = torch.randn(latents.shape, generator=generator, device=device).to(latents)
    x_t = (1 - sigma[:, None, None, None]) * latents + sigma[:, None, None, None] * noise
    return sigma, noise, x_t


class FlowMatchingModule(_TextConditioned):
    """Rectified-flow training of an SD3 (``family="sd3"``) or FLUX (``"flux"``) transformer (FLUX at guidance input 1)."""

    def __init__(
        self,
        family: str,
        config: dict,
        schedule: dict | None = None,
        caption_dropout: float = 0.1,
    ):
        super().__init__()
        self.save_hyperparameters()
        from diffusers import FluxTransformer2DModel, SD3Transformer2DModel

        self.transformer = {"sd3": SD3Transformer2DModel, "flux": FluxTransformer2DModel}[family].from_config(config)

    def _loss(self, batch, training: bool) -> torch.Tensor:
        latents, index = batch
        generator = self._randomness(training, getattr(self, "_val_batch", 0))
        sigma, noise, x_t = _noised(latents, generator)
        text = self._encoded(self._prompts(index, generator))
        return (flow_velocity(self.transformer, x_t, sigma, text) - (noise - latents)).square().mean()


class GuidanceDistillationModule(_TextConditioned):
    """FLUX.1-dev's guidance distillation: a student transformer, at guidance input ``g``, learns its
    frozen teacher's classifier-free guidance at ``g``.

    Both start as ``teacher_state`` (the base model); only the student trains and is saved in the
    pipeline. The teacher lives in the checkpoint too, so a resumed run distils from the same teacher.
    """

    def __init__(
        self,
        config: dict,
        teacher_state: dict | None = None,
        schedule: dict | None = None,
        guidance_range: tuple[float, float] = (1.0, 5.0),
        caption_dropout: float = 0.0,
    ):
        super().__init__()
        self.save_hyperparameters(ignore=["teacher_state"])
        from diffusers import FluxTransformer2DModel

        self.transformer = FluxTransformer2DModel.from_config(config)
        self.teacher = FluxTransformer2DModel.from_config(config).requires_grad_(False).eval()
        if teacher_state is not None:
            self.transformer.load_state_dict(teacher_state)
            self.teacher.load_state_dict(teacher_state)

    def train(self, mode: bool = True):
        super().train(mode)
        self.teacher.eval()
        return self

    def _empty_prompt(self, n: int):
        """The ``""`` prompt's encoding, computed once and repeated ``n`` times."""
        if self._empty is None:
            self._empty = self._encoded([""])
        embeds, pooled, text_ids = self._empty
        return embeds.expand(n, -1, -1), pooled.expand(n, -1), text_ids

    def _loss(self, batch, training: bool) -> torch.Tensor:
        latents, index = batch
        generator = self._randomness(training, getattr(self, "_val_batch", 0))
        sigma, _, x_t = _noised(latents, generator)
        text = self._encoded(self._prompts(index, generator))
        low, high = self.hparams.guidance_range
        g = low + (high - low) * torch.rand(len(x_t), generator=generator).to(x_t)
        with torch.no_grad():
            v_text = flow_velocity(self.teacher, x_t, sigma, text)
            v_empty = flow_velocity(self.teacher, x_t, sigma, self._empty_prompt(len(x_t)))
            target = v_empty + g[:, None, None, None] * (v_text - v_empty)
        return (flow_velocity(self.transformer, x_t, sigma, text, guidance=g) - target).square().mean()


class KandinskyPriorModule(_TextConditioned):
    """The prior: x_0-prediction of the normalised image embedding under UnCLIP's cosine noise schedule."""

    def __init__(
        self,
        config: dict,
        clip_mean: list[float],
        clip_std: list[float],
        schedule: dict | None = None,
        caption_dropout: float = 0.1,
    ):
        super().__init__()
        self.save_hyperparameters()
        from diffusers import DDPMScheduler, PriorTransformer

        self.prior = PriorTransformer.from_config(config)
        self.prior.clip_mean.data = torch.tensor(clip_mean)[None]
        self.prior.clip_std.data = torch.tensor(clip_std)[None]
        self.prior.clip_mean.requires_grad_(False)
        self.prior.clip_std.requires_grad_(False)
        self.noise_schedule = DDPMScheduler(num_train_timesteps=1000, beta_schedule="squaredcos_cap_v2")

    def _loss(self, batch, training: bool) -> torch.Tensor:
        embeddings, index = batch
        generator = self._randomness(training, getattr(self, "_val_batch", 0))
        x0 = (embeddings - self.prior.clip_mean) / self.prior.clip_std
        t = torch.randint(0, 1000, (len(x0),), generator=generator).to(x0.device)
        noisy = self.noise_schedule.add_noise(x0, torch.randn(x0.shape, generator=generator).to(x0), t)
        pooled, hidden, mask = self._encoded(self._prompts(index, generator))
        predicted = self.prior(
            noisy, timestep=t, proj_embedding=pooled, encoder_hidden_states=hidden, attention_mask=mask
        ).predicted_image_embedding
        return (predicted - x0).square().mean()


class KandinskyDecoderModule(ScheduledModule):
    """The decoder UNet: noise prediction on MoVQ latents given the image's embedding, rows
    (latents, embedding); the embedding drops to ``negative`` (the empty image's) at ``caption_dropout``."""

    def __init__(
        self,
        config: dict,
        negative: list[float],
        schedule: dict | None = None,
        caption_dropout: float = 0.1,
    ):
        super().__init__()
        self.save_hyperparameters()
        from diffusers import DDPMScheduler, UNet2DConditionModel

        from condeval.generators.text_to_image import kandinsky_schedulers

        # channels-last convolutions: about 20% faster on the CPU (oneDNN), the same weights once saved
        self.unet = UNet2DConditionModel.from_config(config).to(memory_format=torch.channels_last)
        self.noise_schedule = DDPMScheduler.from_config(kandinsky_schedulers()[1].config)
        self.register_buffer("negative", torch.tensor(negative)[None], persistent=False)

    def _loss(self, batch, training: bool) -> torch.Tensor:
        latents, embeddings = batch
        generator = None if training else torch.Generator().manual_seed(0)
        n = len(latents)
        if training:
            dropped = torch.rand(n, device=latents.device) < self.hparams.caption_dropout
            embeddings = torch.where(dropped[:, None], self.negative.to(embeddings), embeddings)
        t = torch.randint(0, 1000, (n,), generator=generator).to(latents.device)
        noise = torch.randn(latents.shape, generator=generator).to(latents)
        noisy = self.noise_schedule.add_noise(latents, noise, t).contiguous(memory_format=torch.channels_last)
        out = self.unet(noisy, t, encoder_hidden_states=None, added_cond_kwargs={"image_embeds": embeddings}).sample
        return (out[:, : latents.shape[1]] - noise).square().mean()


class T5FromClipModule(ScheduledModule):
    """A tiny ``T5EncoderModel`` distilled from the CLIP text tower: a linear head on its last hidden
    state regresses the tower's last hidden state at every real token (rows: ids, mask)."""

    def __init__(
        self,
        config: dict,
        clip_text_config: dict,
        clip_state: dict | None = None,
        schedule: dict | None = None,
    ):
        super().__init__()
        self.save_hyperparameters(ignore=["clip_state"])
        from transformers import CLIPTextConfig, CLIPTextModel, T5Config, T5EncoderModel

        self.t5 = T5EncoderModel(T5Config(**config))
        self.head = torch.nn.Linear(self.t5.config.d_model, clip_text_config["hidden_size"])
        self.teacher = CLIPTextModel(CLIPTextConfig(**clip_text_config)).requires_grad_(False).eval()
        if clip_state is not None:
            self.teacher.load_state_dict(clip_state)

    def frozen_identity(self) -> str:
        """Digest of the CLIP teacher's weights (``clip_state`` is no hyperparameter)."""
        return state_digest(self.teacher)

    def _loss(self, batch, training: bool) -> torch.Tensor:
        ids, mask = batch
        with torch.no_grad():
            target = self.teacher(input_ids=ids).last_hidden_state
        predicted = self.head(self.t5(input_ids=ids, attention_mask=mask).last_hidden_state)
        weights = mask[..., None].to(target)
        return ((predicted - target).square() * weights).sum() / (weights.sum() * target.shape[-1])


def latents_of(vae, images: np.ndarray, batch_size: int = 256) -> np.ndarray:
    """Scaled latent means of ``images`` in [-1, 1]: ``(mode - shift_factor) * scaling_factor`` (KL)
    or the MoVQ's pre-quantisation latents (the space Kandinsky's decoder denoises).

    Runs on the autoencoder's device (a GPU job moves it there first); returns CPU float32.

    Raises
    ------
    TypeError, ValueError
        ``images`` that are not finite floats in [-1, 1], (N, C, H, W) with the autoencoder's C
        (:func:`condeval.core.io.image_batch`: uint8 pixels are named with their scaling).
    """
    from condeval.core.io import image_batch
    from condeval.generators.autoencoders import image_channels

    images = image_batch(images, kind="signed", channels=image_channels(vae))
    out = []
    with torch.no_grad():
        for chunk in torch.as_tensor(images).split(batch_size):
            encoded = vae.encode(chunk.to(vae.device, vae.dtype))
            if hasattr(encoded, "latent_dist"):
                shift = vae.config.shift_factor or 0.0
                out.append((encoded.latent_dist.mode() - shift) * vae.config.scaling_factor)
            else:
                out.append(encoded.latents)
    return torch.cat(out).float().cpu().numpy()


# ------------------------------------------------------------------------------ orchestration
def world_images(paths, side: int) -> np.ndarray:
    """Image files as the autoencoders read them: RGB resized to ``side``², in [-1, 1], float32 (N, 3, side, side)."""
    from diffusers.image_processor import VaeImageProcessor
    from PIL import Image

    processor = VaeImageProcessor(vae_scale_factor=1, do_resize=True)
    chunks = []
    for start in range(0, len(paths), 512):
        images = [Image.open(path).convert("RGB") for path in paths[start : start + 512]]
        chunks.append(processor.preprocess(images, height=side, width=side).numpy())
    return np.concatenate(chunks).astype(np.float32)


def _flow_encoder(pipe, family: str, max_length: int):
    """(prompts, device) -> (sequence embeddings, pooled, text ids) by the pipeline's own ``encode_prompt``."""

    def encode(prompts: list[str], device):
        _text_encoders_to(pipe, device)
        with torch.no_grad():
            if family == "sd3":
                embeds, _, pooled, _ = pipe.encode_prompt(
                    prompt=prompts,
                    prompt_2=None,
                    prompt_3=None,
                    do_classifier_free_guidance=False,
                    max_sequence_length=max_length,
                    device=device,
                )
                return embeds, pooled, None
            return pipe.encode_prompt(prompt=prompts, prompt_2=None, max_sequence_length=max_length, device=device)

    return encode


def _text_encoders_to(pipe, device) -> None:
    """Move ``pipe``'s frozen text encoders to ``device``, the denoiser's.

    Lightning moves only the trained module's own weights to the job's GPU; the pipeline's
    ``encode_prompt`` sends the token ids to ``device``, so its encoders must be there too.
    """
    for name in ("text_encoder", "text_encoder_2", "text_encoder_3"):
        encoder = getattr(pipe, name, None)
        if encoder is not None and encoder.device != device:
            encoder.to(device)


def _flow_pipeline(family: str, transformer, vae, clip, tokenizer, t5, shift: float):
    from condeval.generators.text_to_image import build_flux_pipeline, build_sd3_pipeline

    if family == "sd3":
        return build_sd3_pipeline(transformer, vae, clip, tokenizer, t5, shift=shift)
    return build_flux_pipeline(transformer, vae, clip, tokenizer, t5)


def _flow_transformer_config(family: str, latents: np.ndarray, clip, t5, transformer: dict) -> dict:
    """The denoiser's config: ``transformer``'s depth and heads, the rest fixed by the latents and text encoders."""
    from condeval.generators.text_to_image import tiny_flux_transformer, tiny_sd3_transformer

    channels, side = latents.shape[1], latents.shape[-1]
    if family == "sd3":  # pooled: both CLIP encoders' projections side by side
        model = tiny_sd3_transformer(
            (channels, side, side),
            joint_attention_dim=t5.config.d_model,
            pooled_projection_dim=2 * clip.config.projection_dim,
            **transformer,
        )
    else:  # pooled: CLIPTextModel's pooler output
        model = tiny_flux_transformer(
            channels,
            joint_attention_dim=t5.config.d_model,
            pooled_projection_dim=clip.config.text_config.hidden_size,
            **transformer,
        )
    return dict(model.config)


@dataclass(frozen=True)
class FrozenEncoders:
    """The frozen encoders a generator conditions through, shared by its training and its saved pipeline.

    Parameters
    ----------
    clip : CLIPModel
        The shared CLIP (its text tower encodes the prompts; Kandinsky's CLIP space is built from it).
    tokenizer : PreTrainedTokenizerBase
        The pipeline tokenizer (:func:`~condeval.generators.text_to_image.pipeline_tokenizer`).
    t5 : T5EncoderModel, optional
        SD3's and FLUX's sequence encoder (Kandinsky has none).
    max_length : int, default 32
        Tokens of the T5 sequence (the pipelines' ``max_sequence_length``).
    image_processor : CLIPImageProcessor, optional
        Kandinsky: the CLIP's image processor, saved with its prior pipeline.
    """

    clip: CLIPModel
    tokenizer: PreTrainedTokenizerBase
    t5: T5EncoderModel | None = None
    max_length: int = 32
    image_processor: CLIPImageProcessor | None = None


@dataclass(frozen=True)
class FlowOptions:
    """An SD3 or FLUX denoiser's own training options (:func:`train_flow_generator`), beyond its
    :class:`~condeval.core.settings.TrainRecipe`.

    Parameters
    ----------
    transformer : dict
        Depth and heads: ``layers``, ``heads`` (and ``qk_norm`` for SD3, ``single_layers`` and
        ``guidance_embeds`` for FLUX).
    caption_dropout : float, default 0.1
        See :class:`FlowMatchingModule`.
    distill_epochs : int, default 1
        FLUX: epochs of :class:`GuidanceDistillationModule`.
    distill_lr : float, optional
        FLUX: the distillation's learning rate (default: the recipe's).
    guidance_range : (float, float), default (1.0, 5.0)
        FLUX: the guidance values distilled.
    shift : float, default 1.0
        SD3's scheduler shift.
    """

    transformer: dict
    caption_dropout: float = 0.1
    distill_epochs: int = 1
    distill_lr: float | None = None
    guidance_range: tuple[float, float] = (1.0, 5.0)
    shift: float = 1.0


@dataclass(frozen=True)
class KandinskyOptions:
    """A mini Kandinsky 2.2's own training options (:func:`train_kandinsky`), beyond its
    :class:`~condeval.core.settings.TrainRecipe` (whose ``epochs`` are the decoder's).

    Parameters
    ----------
    prior : dict
        ``layers``/``heads`` of the ``PriorTransformer``.
    unet : dict
        ``channels`` of the decoder UNet.
    prior_epochs : int
        Epochs of the prior.
    caption_dropout : float, default 0.1
        See :class:`KandinskyPriorModule` and :class:`KandinskyDecoderModule`.
    """

    prior: dict
    unet: dict
    prior_epochs: int
    caption_dropout: float = 0.1


@dataclass(frozen=True, kw_only=True)
class SavedComponents:
    """The saved components :func:`train_text_to_image` assembles a generator from, and the sizes they serve.

    Parameters
    ----------
    tokenizer_dir, clip_dir : path-like
        The saved word tokenizer and CLIP.
    autoencoder_dir : path-like
        The saved autoencoder (``AutoencoderKL``; Kandinsky: ``VQModel``).
    image_size : int
        Generated side (the autoencoder's input side).
    clip_image_size : int
        The CLIP's input side (Kandinsky's image encoder reads the images at it).
    max_length : int
        Prompt tokens.
    t5_dir : path-like, optional
        The saved T5 (SD3 and FLUX).
    """

    tokenizer_dir: str | os.PathLike
    clip_dir: str | os.PathLike
    autoencoder_dir: str | os.PathLike
    image_size: int
    clip_image_size: int
    max_length: int
    t5_dir: str | os.PathLike | None = None


def train_flow_generator(
    images: np.ndarray,
    captions: list[list[str]],
    out_dir,
    recipe: TrainRecipe,
    *,
    family: str,
    encoders: FrozenEncoders,
    vae,
    options: FlowOptions,
) -> dict:
    """Train an SD3 (``family="sd3"``) or FLUX (``"flux"``) transformer and save the whole pipeline.

    Parameters
    ----------
    images : ndarray
        Training images in [-1, 1], (N, 3, H, W); the first ``recipe.held_out`` validate.
    captions : list of list of str
        Each image's captions (one is drawn per step).
    out_dir : path-like
        Receives the pipeline (``DiffusionPipeline.from_pretrained(out_dir)``); its run folder is
        ``<out_dir>_run`` (FLUX's guidance distillation: its ``distill/`` subfolder).
    recipe : TrainRecipe
        The base training's; FLUX's distillation runs it with ``options.distill_epochs`` and ``distill_lr``.
    family : {"sd3", "flux"}
    encoders : FrozenEncoders
        The shared CLIP, the pipeline tokenizer, the T5 and its ``max_length``.
    vae : AutoencoderKL
        The trained autoencoder.
    options : FlowOptions
        The transformer's depth and heads, caption dropout, FLUX's distillation and SD3's shift.

    Returns
    -------
    dict
        The training summary (also ``out_dir/training.json``); FLUX's holds the distillation's under
        ``"guidance_distillation"``.
    """
    import pytorch_lightning as pl

    from condeval.core.resources import optimizer_steps

    pl.seed_everything(recipe.seed, workers=True, verbose=False)
    clip, tokenizer, t5 = encoders.clip, encoders.tokenizer, encoders.t5
    latents = latents_of(vae, images)
    config = _flow_transformer_config(family, latents, clip, t5, options.transformer)
    steps = optimizer_steps(len(images) - recipe.held_out, recipe.batch_size, recipe.epochs)
    module = FlowMatchingModule(
        family,
        config,
        schedule=cosine_schedule(recipe.lr, steps, max(1, steps // 20)),
        caption_dropout=options.caption_dropout,
    )
    pipe = _flow_pipeline(family, module.transformer, vae, clip, tokenizer, t5, options.shift)
    encode = _flow_encoder(pipe, family, encoders.max_length)

    def attach(denoiser: _TextConditioned) -> _TextConditioned:
        return denoiser.attach(encode, captions, (clip, tokenizer, t5))

    rows = (latents, np.arange(len(latents)))
    out_dir = Path(out_dir)
    trained, summary = _fit_best(attach(module), rows, _run_dir(out_dir), recipe)
    if family == "flux" and options.transformer.get("guidance_embeds", True):
        student = _guidance_student(trained, config, len(images), recipe, options)
        trained, distilled = _fit_best(
            attach(student), rows, _run_dir(out_dir) / "distill", _distill_recipe(recipe, options)
        )
        summary = {**summary, "guidance_distillation": distilled}
    pipe.register_modules(transformer=trained.transformer)
    _save_folder(out_dir, pipe.save_pretrained, summary)
    return summary


def _distill_recipe(recipe: TrainRecipe, options: FlowOptions) -> TrainRecipe:
    """FLUX's guidance distillation's recipe: the base one at ``distill_epochs`` and ``distill_lr``."""
    return recipe.replace(epochs=options.distill_epochs, lr=options.distill_lr or recipe.lr)


def _guidance_student(trained, config: dict, n_images: int, recipe: TrainRecipe, options: FlowOptions):
    """The :class:`GuidanceDistillationModule` that starts from the base model ``trained``."""
    from condeval.core.resources import optimizer_steps

    stage = _distill_recipe(recipe, options)
    steps = optimizer_steps(n_images - stage.held_out, stage.batch_size, stage.epochs)
    return GuidanceDistillationModule(
        config,
        trained.transformer.state_dict(),
        schedule=cosine_schedule(stage.lr, steps, max(1, steps // 20)),
        guidance_range=tuple(options.guidance_range),
    )


def _run_dir(out_dir: Path) -> Path:
    """``<out_dir>_run``: the Lightning run folder of a saved model."""
    return out_dir.with_name(f"{out_dir.name}_run")


def _fit_best(module, rows, run_dir, recipe: TrainRecipe, *, epochs: int | None = None, rows_per_item: int = 1):
    """:func:`~condeval.core.training.fit` (resumable) in ``run_dir`` under ``recipe``; (best module, training summary).

    ``rows`` are arrays whose first ``recipe.held_out * rows_per_item`` rows validate (``rows_per_item``: rows
    of one held-out item), or ``(train, val)`` datasets read from disk. ``epochs``: the ones the trainer
    derived (e.g. from a step count), in place of the recipe's."""
    from torch.utils.data import Dataset

    from condeval.core.training import fit, training_summary

    split = isinstance(rows[0], Dataset)
    train, val = rows if split else hold_out(rows, recipe.held_out * rows_per_item)
    settings = recipe.settings(epochs)
    best = fit(module, train, val, run_dir, settings, seed=recipe.seed, fingerprint=recipe.fingerprint)
    trained = type(module).load_from_checkpoint(best, map_location="cpu", weights_only=True).eval()
    return trained, training_summary(run_dir)


def _save_folder(out_dir, save, summary: dict) -> None:
    """``save(folder)`` and ``training.json`` into ``out_dir``, atomically."""
    from condeval.core.io import atomic_directory, write_json
    from condeval.core.training import model_record

    with atomic_directory(out_dir) as folder:
        save(folder)
        write_json(model_record(summary), folder / "training.json")


def _fit_and_save(module, rows, out_dir, save, recipe: TrainRecipe, *, rows_per_item: int = 1) -> dict:
    """Fit in ``<out_dir>_run`` under ``recipe``, then ``save(best module, folder)`` into ``out_dir`` atomically."""
    out_dir = Path(out_dir)
    trained, summary = _fit_best(module, rows, _run_dir(out_dir), recipe, rows_per_item=rows_per_item)
    _save_folder(out_dir, lambda folder: save(trained, folder), summary)
    return summary


def train_t5_from_clip(
    captions: list[list[str]],
    out_dir,
    recipe: TrainRecipe,
    *,
    clip,
    tokenizer,
    width: int,
    layers: int,
    max_length: int = 32,
) -> dict:
    """Distil a tiny ``T5EncoderModel`` from the CLIP's text tower (:class:`T5FromClipModule`) on every
    caption of the training images, and ``save_pretrained`` it with the tokenizer into ``out_dir``.

    ``recipe.held_out`` images (all their captions) validate; ``width`` and ``layers`` size the T5, whose
    sequences are ``max_length`` tokens."""
    import pytorch_lightning as pl

    from condeval.core.resources import optimizer_steps
    from condeval.encoders.data import token_arrays
    from condeval.generators.text_to_image import tiny_t5_encoder

    pl.seed_everything(recipe.seed, workers=True, verbose=False)
    ids, mask = token_arrays(tokenizer, [c for per_image in captions for c in per_image], max_length)
    per_image = len(captions[0])
    steps = optimizer_steps(len(ids) - recipe.held_out * per_image, recipe.batch_size, recipe.epochs)
    module = T5FromClipModule(
        tiny_t5_encoder(tokenizer, width, layers).config.to_dict(),
        clip.config.text_config.to_dict(),
        clip.text_model.state_dict(),
        schedule=cosine_schedule(recipe.lr, steps, max(1, steps // 20)),
    )

    def save(trained, folder):
        trained.t5.save_pretrained(folder)
        tokenizer.save_pretrained(folder)

    return _fit_and_save(module, (ids, mask), out_dir, save, recipe, rows_per_item=per_image)


def _encode_prior_prompts(prior_pipe, prompts: list[str], device):
    """Kandinsky's prior conditioning of ``prompts`` on ``device`` (the prior module's), by the pipeline's own encoder."""
    _text_encoders_to(prior_pipe, device)
    return prior_pipe._encode_prompt(prompts, device, 1, False)


def kandinsky_basis(clip, images: torch.Tensor, ids: np.ndarray, k: int) -> torch.Tensor:
    """The top ``k`` principal axes (k, projection_dim) of the CLIP's image embeddings ``images`` and
    caption embeddings (scikit-learn's PCA), the projection of Kandinsky's CLIP space
    (:func:`~condeval.generators.text_to_image.kandinsky_clip`)."""
    from sklearn.decomposition import PCA

    with torch.no_grad():
        texts = torch.cat([clip.get_text_features(input_ids=c).pooler_output for c in torch.as_tensor(ids).split(512)])
    pca = PCA(n_components=k, svd_solver="full").fit(torch.cat([images, texts]).numpy())
    return torch.as_tensor(pca.components_, dtype=torch.float32)


def _kandinsky_space(clip, tokenizer, captions: list[list[str]], clip_pixels: np.ndarray):
    """(text tower, image tower, image embeddings) of Kandinsky's CLIP space (:func:`kandinsky_basis`)."""
    from condeval.encoders.data import token_arrays
    from condeval.generators.text_to_image import kandinsky_clip

    width = clip.config.text_config.hidden_size
    ids, _ = token_arrays(tokenizer, [c for per_image in captions for c in per_image], tokenizer.model_max_length)
    with torch.no_grad():  # the CLIP reads each image once: Kandinsky's image embedding is basis @ its projection
        projected = torch.cat(
            [clip.get_image_features(pixel_values=c).pooler_output for c in torch.as_tensor(clip_pixels).split(256)]
        )
    basis = kandinsky_basis(clip, projected, ids, width)
    text, image = kandinsky_clip(clip, basis)
    return text, image, projected @ basis.T


def train_kandinsky(
    images: np.ndarray,
    clip_pixels: np.ndarray,
    captions: list[list[str]],
    out_dir,
    recipe: TrainRecipe,
    *,
    encoders: FrozenEncoders,
    movq,
    options: KandinskyOptions,
) -> dict:
    """Train a mini Kandinsky 2.2: its CLIP space, the prior, then the decoder; save ``prior/`` and ``decoder/``.

    Long because its two stages share what it builds first (the CLIP space, the latents and the two
    pipelines the trained prior and UNet are registered into); each stage is one module and one fit.

    Parameters
    ----------
    images : ndarray
        Training images in [-1, 1] at the generator's size, (N, 3, H, W) (the MoVQ's input).
    clip_pixels : ndarray
        The same images as the CLIP's image processor makes them (its image encoder's input).
    captions : list of list of str
    out_dir : path-like
        Receives ``prior/`` (``KandinskyV22PriorPipeline``) and ``decoder/`` (``KandinskyV22Pipeline``);
        runs in ``<out_dir>_run/{prior,decoder}``.
    recipe : TrainRecipe
        The decoder's; the prior runs it with ``options.prior_epochs``. Each stage's fingerprint is
        ``recipe.fingerprint`` with ``-prior`` or ``-decoder``.
    encoders : FrozenEncoders
        The shared CLIP, the pipeline tokenizer and the CLIP's image processor.
    movq : VQModel
        The trained autoencoder.
    options : KandinskyOptions
        The prior's and the UNet's sizes, the prior's epochs and the caption dropout.

    Returns
    -------
    dict
        {"prior": summary, "decoder": summary}.
    """
    import pytorch_lightning as pl

    from condeval.core.resources import optimizer_steps
    from condeval.generators.text_to_image import (
        DECODER_FOLDER,
        PRIOR_FOLDER,
        build_kandinsky_pipelines,
        tiny_kandinsky_prior,
        tiny_kandinsky_unet,
    )

    pl.seed_everything(recipe.seed, workers=True, verbose=False)
    out_dir = Path(out_dir)
    run_dir = _run_dir(out_dir)
    clip, tokenizer = encoders.clip, encoders.tokenizer
    width = clip.config.text_config.hidden_size
    text, image, embeddings = _kandinsky_space(clip, tokenizer, captions, clip_pixels)
    latents = latents_of(movq, images)
    prior_model = tiny_kandinsky_prior(width, tokenizer.model_max_length, **options.prior)
    unet_model = tiny_kandinsky_unet(latents.shape[-1], latents.shape[1], width, **options.unet)
    prior_pipe, decoder_pipe = build_kandinsky_pipelines(
        prior_model, unet_model, movq, text, image, tokenizer, encoders.image_processor
    )
    prior_recipe = _stage(recipe, PRIOR_FOLDER, epochs=options.prior_epochs)
    steps = optimizer_steps(len(images) - recipe.held_out, recipe.batch_size, prior_recipe.epochs)
    prior_module = KandinskyPriorModule(
        dict(prior_model.config),
        embeddings.mean(0).tolist(),
        embeddings.std(0).tolist(),
        schedule=cosine_schedule(recipe.lr, steps, max(1, steps // 20)),
        caption_dropout=options.caption_dropout,
    ).attach(partial(_encode_prior_prompts, prior_pipe), captions, (text, tokenizer))
    trained_prior, prior_summary = _fit_best(
        prior_module, (embeddings.numpy(), np.arange(len(images))), run_dir / PRIOR_FOLDER, prior_recipe
    )
    steps = optimizer_steps(len(images) - recipe.held_out, recipe.batch_size, recipe.epochs)
    decoder_module = KandinskyDecoderModule(
        dict(unet_model.config),
        prior_pipe.get_zero_embed(device=prior_pipe.image_encoder.device).squeeze(0).tolist(),
        schedule=cosine_schedule(recipe.lr, steps, max(1, steps // 20)),
        caption_dropout=options.caption_dropout,
    )
    trained_decoder, decoder_summary = _fit_best(
        decoder_module, (latents, embeddings.numpy()), run_dir / DECODER_FOLDER, _stage(recipe, DECODER_FOLDER)
    )
    prior_pipe.register_modules(prior=trained_prior.prior)
    decoder_pipe.register_modules(unet=trained_decoder.unet)
    summary = {"prior": prior_summary, "decoder": decoder_summary}

    def save(folder):
        prior_pipe.save_pretrained(folder / PRIOR_FOLDER)
        decoder_pipe.save_pretrained(folder / DECODER_FOLDER)

    _save_folder(out_dir, save, summary)
    return summary


def _stage(recipe: TrainRecipe, name: str, **changes) -> TrainRecipe:
    """A Kandinsky stage's recipe: ``recipe`` with ``changes``, its fingerprint (if any) suffixed ``-<name>``."""
    return recipe.replace(fingerprint=recipe.fingerprint and f"{recipe.fingerprint}-{name}", **changes)


def _popped_recipe(train: dict, seed: int, where: dict) -> TrainRecipe:
    """The recipe of a generator's ``train`` section, its keys popped (``val_images``: 200 unless given)."""
    return TrainRecipe(
        epochs=train.pop("epochs"),
        batch_size=train.pop("batch_size"),
        lr=train.pop("lr"),
        held_out=train.pop("val_images", 200),
        seed=seed,
        **where,
    )


def train_text_to_image(
    world,
    out_dir,
    *,
    family: str,
    train: dict,
    components: SavedComponents,
    seed: int,
    image_ids: Sequence[int] | None = None,
    **where,
) -> dict:
    """Train one mini generator of ``family`` on the world's train split from saved components.

    Parameters
    ----------
    world : path-like
        The COCO-format root (``annotations/captions_train2014.json``, ``train2014/``).
    out_dir : path-like
        The pipeline folder to save.
    family : {"sd3", "flux", "kandinsky"}
    train : dict
        ``images``, ``epochs``, ``batch_size``, ``lr``, optional ``val_images`` (default 200) and the
        family's keys: :class:`FlowOptions`' (``transformer``; optional ``caption_dropout``, ``shift``;
        FLUX: ``distill_epochs``, ``distill_lr``, ``guidance_range``) or :class:`KandinskyOptions`'
        (``prior``, ``unet``, ``prior_epochs``; optional ``caption_dropout``).
    components : SavedComponents
        The saved tokenizer, CLIP, autoencoder and T5, and the sizes they serve.
    seed : int
    image_ids : sequence of int, optional
        Train on these train images only (the first ``images`` of them), e.g. the single-object
        scenes (``benchmarks/bench_t2i_device.py --scenes lone``).
    **where
        Where every stage runs: :class:`~condeval.core.settings.TrainRecipe`'s ``accelerator``, ``workers``,
        ``stop_at`` and ``fingerprint``.

    Returns
    -------
    dict
        The training summary.
    """
    from transformers import AutoTokenizer, CLIPModel, T5EncoderModel

    from condeval.encoders.train import coco_split
    from condeval.generators.autoencoders import _autoencoder_class
    from condeval.generators.text_to_image import pipeline_tokenizer

    train = dict(train)
    frame, captions = coco_split(world, "train", train.pop("images"), image_ids=image_ids)
    recipe = _popped_recipe(train, seed, where)
    paths, parts = frame["path"].to_list(), components
    clip = CLIPModel.from_pretrained(str(parts.clip_dir)).eval()
    tokenizer = pipeline_tokenizer(AutoTokenizer.from_pretrained(str(parts.tokenizer_dir)), parts.max_length)
    images = world_images(paths, parts.image_size)
    kind = "vq" if family == "kandinsky" else "kl"
    autoencoder = _autoencoder_class(kind).from_pretrained(str(parts.autoencoder_dir)).eval()
    if family == "kandinsky":
        from condeval.encoders.clip import clip_image_processor
        from condeval.encoders.data import pixel_values

        processor = clip_image_processor(parts.clip_image_size)
        encoders = FrozenEncoders(clip, tokenizer, max_length=parts.max_length, image_processor=processor)
        clip_pixels = pixel_values(paths, processor)
        return train_kandinsky(
            images,
            clip_pixels,
            captions,
            out_dir,
            recipe,
            encoders=encoders,
            movq=autoencoder,
            options=KandinskyOptions(**train),
        )
    t5 = T5EncoderModel.from_pretrained(str(parts.t5_dir)).eval()
    encoders = FrozenEncoders(clip, tokenizer, t5, parts.max_length)
    return train_flow_generator(
        images,
        captions,
        out_dir,
        recipe,
        family=family,
        encoders=encoders,
        vae=autoencoder,
        options=FlowOptions(**train),
    )
