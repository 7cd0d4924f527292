"""Text-to-image generators as the real diffusers pipelines, at tiny sizes for the mini-world.

Four families, each assembled from components of the real classes and saved with
``save_pretrained`` as a complete pipeline folder, so that ``DiffusionPipeline.from_pretrained(path)``
loads it as it loads the hub checkpoints:

==================  =================================  ==========================================
family              pipeline                           denoiser
==================  =================================  ==========================================
``sd3``             ``StableDiffusion3Pipeline``       ``SD3Transformer2DModel`` (SD3-M, SD3.5-L)
``flux``            ``FluxPipeline``                   ``FluxTransformer2DModel``, guidance embedded
``kandinsky``       ``KandinskyV22PriorPipeline`` +    ``PriorTransformer`` (text -> image embedding),
                    ``KandinskyV22Pipeline``           ``UNet2DConditionModel`` on ``VQModel`` latents
==================  =================================  ==========================================

Text encoders come from the shared tiny CLIP (:func:`clip_text_encoder`): its text tower, as
``CLIPTextModelWithProjection`` (SD3's two CLIP encoders, Kandinsky's prior) or ``CLIPTextModel``
(FLUX's pooled vector). A tiny ``T5EncoderModel`` (:func:`tiny_t5_encoder`) is the sequence encoder
of FLUX and SD3.5. Kandinsky's prior needs its text width, its projection and its image-embedding
width to be one number; the shared CLIP's are 64 and 128, so Kandinsky gets its own CLIP space
(:func:`kandinsky_clip`), as the real Kandinsky 2.2 has its own CLIP (ViT-bigG).

Every pipeline is called as on a cluster: ``pipe(prompt, num_inference_steps=..., guidance_scale=...,
generator=...)``. :mod:`condeval.generators.text_to_image_training` trains the denoisers.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import torch

__all__ = [
    "FAMILIES",
    "clip_text_encoder",
    "pipeline_tokenizer",
    "tiny_t5_encoder",
    "tiny_sd3_transformer",
    "tiny_flux_transformer",
    "tiny_kandinsky_prior",
    "tiny_kandinsky_unet",
    "kandinsky_clip",
    "build_sd3_pipeline",
    "build_flux_pipeline",
    "build_kandinsky_pipelines",
    "load_text_to_image",
    "image_seed",
    "sampling_call",
    "generate_images",
    "PRIOR_FOLDER",
    "check_pipeline_folder",
    "DECODER_FOLDER",
]

FAMILIES = ("sd3", "flux", "kandinsky")
#: Kandinsky 2.2 is two hub repositories (``-prior`` and ``-decoder``); a saved mini-kandinsky
#: folder holds both, under these names.
PRIOR_FOLDER, DECODER_FOLDER = "prior", "decoder"
_HEAD_DIM = 16


# ------------------------------------------------------------------------------------- text
def clip_text_encoder(clip, projection: bool = True):
    """The text tower of a ``CLIPModel`` as ``CLIPTextModelWithProjection`` (or ``CLIPTextModel``).

    The weights are the CLIP's own (tower and, with ``projection``, ``text_projection``), so
    ``text_embeds`` equal ``clip.get_text_features`` and the pooled output is the tower's.
    """
    from transformers import CLIPTextModel, CLIPTextModelWithProjection

    config = copy.deepcopy(clip.config.text_config)
    config.projection_dim = clip.config.projection_dim
    if not projection:  # transformers 5: CLIPTextModel is the tower itself (no ``text_model`` child)
        encoder = CLIPTextModel(config)
        encoder.load_state_dict(clip.text_model.state_dict())
        return encoder.eval()
    encoder = CLIPTextModelWithProjection(config)
    encoder.text_model.load_state_dict(clip.text_model.state_dict())
    encoder.text_projection.load_state_dict(clip.text_projection.state_dict())
    return encoder.eval()


def pipeline_tokenizer(tokenizer, max_length: int):
    """A copy of ``tokenizer`` that pads prompts to ``max_length`` (the pipelines pad to ``model_max_length``)."""
    tokenizer = copy.deepcopy(tokenizer)
    tokenizer.model_max_length = max_length
    return tokenizer


def tiny_t5_encoder(tokenizer, width: int, layers: int = 2, heads: int = 4):
    """A ``T5EncoderModel`` over ``tokenizer``'s vocabulary (T5's relative-position attention)."""
    from transformers import T5Config, T5EncoderModel

    config = T5Config(
        vocab_size=len(tokenizer),
        d_model=width,
        d_kv=width // heads,
        d_ff=2 * width,
        num_layers=layers,
        num_heads=heads,
        pad_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.sep_token_id,
        relative_attention_num_buckets=16,
        relative_attention_max_distance=32,
        dropout_rate=0.0,
    )
    return T5EncoderModel(config).eval()


# ------------------------------------------------------------------------------- denoisers
def tiny_sd3_transformer(
    latent_shape: tuple[int, int, int],
    *,
    layers: int,
    heads: int,
    joint_attention_dim: int,
    pooled_projection_dim: int,
    patch_size: int = 2,
    qk_norm: str | None = None,
    head_dim: int = _HEAD_DIM,
):
    """An ``SD3Transformer2DModel`` (MMDiT) on one latent's ``(channels, side, side)``; width ``heads`` ×
    ``head_dim`` (16; SiT-B/2's 768 is 12 × 64)."""
    from diffusers import SD3Transformer2DModel

    latent_channels, latent_size, width = latent_shape
    if latent_size != width:
        raise ValueError(f"latent_shape must be (channels, side, side), a square grid; got {tuple(latent_shape)}")
    return SD3Transformer2DModel(
        sample_size=latent_size,
        patch_size=patch_size,
        in_channels=latent_channels,
        out_channels=latent_channels,
        num_layers=layers,
        attention_head_dim=head_dim,
        num_attention_heads=heads,
        joint_attention_dim=joint_attention_dim,
        caption_projection_dim=heads * head_dim,
        pooled_projection_dim=pooled_projection_dim,
        pos_embed_max_size=latent_size // patch_size,
        qk_norm=qk_norm,
    )


def tiny_flux_transformer(
    latent_channels: int,
    *,
    layers: int,
    single_layers: int,
    heads: int,
    joint_attention_dim: int,
    pooled_projection_dim: int,
    guidance_embeds: bool = True,
):
    """A ``FluxTransformer2DModel`` on 2×2-packed latents; rotary axes (4, 6, 6) sum to the head width 16."""
    from diffusers import FluxTransformer2DModel

    return FluxTransformer2DModel(
        patch_size=1,
        in_channels=4 * latent_channels,
        num_layers=layers,
        num_single_layers=single_layers,
        attention_head_dim=_HEAD_DIM,
        num_attention_heads=heads,
        joint_attention_dim=joint_attention_dim,
        pooled_projection_dim=pooled_projection_dim,
        guidance_embeds=guidance_embeds,
        axes_dims_rope=(4, 6, 6),
    )


def tiny_kandinsky_prior(embedding_dim: int, text_length: int, *, layers: int, heads: int):
    """A ``PriorTransformer`` from text (``embedding_dim``-wide tokens and pooled vector) to an image embedding."""
    from diffusers import PriorTransformer

    return PriorTransformer(
        num_attention_heads=heads,
        attention_head_dim=_HEAD_DIM,
        num_layers=layers,
        embedding_dim=embedding_dim,
        num_embeddings=text_length,
        additional_embeddings=4,
    )


def tiny_kandinsky_unet(latent_size: int, latent_channels: int, image_embed_dim: int, *, channels: tuple[int, ...]):
    """Kandinsky 2.2's decoder ``UNet2DConditionModel``: conditioned on an image embedding only
    (``addition_embed_type="image"``, ``encoder_hid_dim_type="image_proj"``); twice the latent channels
    out (noise and variance, as Kandinsky's; the fixed-variance scheduler reads the noise half)."""
    from diffusers import UNet2DConditionModel

    depth = len(channels)
    return UNet2DConditionModel(
        sample_size=latent_size,
        in_channels=latent_channels,
        out_channels=2 * latent_channels,
        block_out_channels=tuple(channels),
        layers_per_block=1,
        down_block_types=("ResnetDownsampleBlock2D",) + ("SimpleCrossAttnDownBlock2D",) * (depth - 1),
        up_block_types=("SimpleCrossAttnUpBlock2D",) * (depth - 1) + ("ResnetUpsampleBlock2D",),
        mid_block_type="UNetMidBlock2DSimpleCrossAttn",
        attention_head_dim=_HEAD_DIM,
        cross_attention_dim=channels[-1],
        encoder_hid_dim=image_embed_dim,
        encoder_hid_dim_type="image_proj",
        addition_embed_type="image",
        class_embed_type=None,
        norm_num_groups=8,
        only_cross_attention=False,
        resnet_time_scale_shift="scale_shift",
    )


# ------------------------------------------------------------------------------- schedulers
def flow_scheduler(shift: float = 1.0, dynamic: bool = False, tokens: int = 64):
    """``FlowMatchEulerDiscreteScheduler``: SD3's fixed ``shift``, or FLUX's resolution-dependent one."""
    from diffusers import FlowMatchEulerDiscreteScheduler

    if not dynamic:
        return FlowMatchEulerDiscreteScheduler(num_train_timesteps=1000, shift=shift)
    return FlowMatchEulerDiscreteScheduler(
        num_train_timesteps=1000,
        shift=shift,
        use_dynamic_shifting=True,
        base_shift=0.5,
        max_shift=1.15,
        base_image_seq_len=tokens,
        max_image_seq_len=4 * tokens,
    )


def kandinsky_schedulers():
    """(prior, decoder) schedulers as Kandinsky 2.2's: ``UnCLIPScheduler`` predicting the embedding,
    ``DDPMScheduler`` predicting noise."""
    from diffusers import DDPMScheduler, UnCLIPScheduler

    prior = UnCLIPScheduler(
        variance_type="fixed_small_log",
        prediction_type="sample",
        num_train_timesteps=1000,
        clip_sample=True,
        clip_sample_range=10.0,
    )
    decoder = DDPMScheduler(
        num_train_timesteps=1000,
        beta_schedule="linear",
        beta_start=0.00085,
        beta_end=0.012,
        clip_sample=False,
        prediction_type="epsilon",
        steps_offset=1,
    )
    return prior, decoder


# ------------------------------------------------------------------------------- assembly
def build_sd3_pipeline(transformer, vae, clip, tokenizer, t5, *, shift: float = 1.0):
    """A ``StableDiffusion3Pipeline``: the CLIP's text tower as both CLIP encoders, ``t5`` as the
    third and a flow-matching Euler scheduler with a fixed ``shift``."""
    from diffusers import StableDiffusion3Pipeline

    text = clip_text_encoder(clip)
    return StableDiffusion3Pipeline(
        transformer=transformer,
        scheduler=flow_scheduler(shift),
        vae=vae,
        text_encoder=text,
        tokenizer=tokenizer,
        text_encoder_2=copy.deepcopy(text),
        tokenizer_2=tokenizer,
        text_encoder_3=t5,
        tokenizer_3=tokenizer,
    )


def build_flux_pipeline(transformer, vae, clip, tokenizer, t5):
    """A ``FluxPipeline``: the CLIP's text tower for the pooled vector, ``t5`` for the sequence."""
    from diffusers import FluxPipeline

    return FluxPipeline(
        scheduler=flow_scheduler(dynamic=True),
        vae=vae,
        text_encoder=clip_text_encoder(clip, projection=False),
        tokenizer=tokenizer,
        text_encoder_2=t5,
        tokenizer_2=tokenizer,
        transformer=transformer,
    )


def build_kandinsky_pipelines(prior, unet, movq, text_encoder, image_encoder, tokenizer, image_processor):
    """(``KandinskyV22PriorPipeline``, ``KandinskyV22Pipeline``) over Kandinsky's own CLIP space."""
    from diffusers import KandinskyV22Pipeline, KandinskyV22PriorPipeline

    prior_scheduler, decoder_scheduler = kandinsky_schedulers()
    prior_pipe = KandinskyV22PriorPipeline(
        prior=prior,
        image_encoder=image_encoder,
        text_encoder=text_encoder,
        tokenizer=tokenizer,
        scheduler=prior_scheduler,
        image_processor=image_processor,
    )
    return prior_pipe, KandinskyV22Pipeline(unet=unet, scheduler=decoder_scheduler, movq=movq)


def kandinsky_clip(clip, basis: torch.Tensor):
    """Kandinsky's (text encoder, image encoder): the shared CLIP's towers, their projections composed
    with ``basis`` (k, projection_dim), e.g. the top principal axes of the CLIP's embeddings, so that
    the text width, the projection and the image embeddings are all ``k`` wide (the prior needs one width).
    """
    from transformers import CLIPVisionModelWithProjection

    k = basis.shape[0]
    if k != clip.config.text_config.hidden_size:
        raise ValueError(f"Kandinsky's prior needs k = the text width {clip.config.text_config.hidden_size}, got {k}")
    text = clip_text_encoder(clip)
    text.config.projection_dim = k
    text.text_projection = torch.nn.Linear(text.config.hidden_size, k, bias=False)
    text.text_projection.weight.data = basis @ clip.text_projection.weight.data
    vision_config = copy.deepcopy(clip.config.vision_config)
    vision_config.projection_dim = k
    image = CLIPVisionModelWithProjection(vision_config)
    image.vision_model.load_state_dict(clip.vision_model.state_dict())
    image.visual_projection.weight.data = basis @ clip.visual_projection.weight.data
    return text.eval(), image.eval()


def load_text_to_image(
    path: str | os.PathLike,
    device: str | torch.device = "cpu",
    prior: str | os.PathLike | None = None,
    dtype: str | None = None,
):
    """A saved generator as a callable pipeline, in precision ``dtype`` (default: bfloat16 on a GPU,
    float32 on a CPU; :func:`condeval.core.devices.torch_dtype`).

    SD3 and FLUX: ``DiffusionPipeline.from_pretrained(path)``. Kandinsky 2.2: the prior pipeline
    (``prior``, default ``path/prior``) and the decoder pipeline (``path/decoder`` if it exists, else
    ``path``, as the hub's ``kandinsky-2-2-decoder``) joined as ``KandinskyV22CombinedPipeline``.

    Raises
    ------
    FileNotFoundError
        Naming the folder: ``path`` or an explicit ``prior`` that does not exist, a folder without
        ``model_index.json``, a component folder its ``model_index.json`` names but that is missing,
        a Kandinsky ``decoder/`` without its ``prior/``.
    ValueError
        A Kandinsky folder that holds another pipeline class; ``device`` asking for CUDA torch does not see.
    """
    from diffusers import (
        DiffusionPipeline,
        KandinskyV22CombinedPipeline,
        KandinskyV22Pipeline,
        KandinskyV22PriorPipeline,
    )

    from condeval.core.devices import check_device, log_precision, torch_dtype

    path, device = Path(path), check_device(device)
    loading = {"dtype": torch_dtype(dtype, device)}
    if not path.is_dir():
        raise FileNotFoundError(f"no saved pipeline folder at {path}")
    if prior is not None and not Path(prior).is_dir():
        raise FileNotFoundError(f"prior={str(prior)!r}: no such folder (Kandinsky's saved prior pipeline)")
    prior = Path(prior) if prior is not None else path / PRIOR_FOLDER
    if not prior.is_dir():
        if (path / DECODER_FOLDER).is_dir():
            raise FileNotFoundError(
                f"{path} holds {DECODER_FOLDER}/ but no {PRIOR_FOLDER}/: Kandinsky needs its prior "
                "pipeline (save it there or pass prior=)"
            )
        check_pipeline_folder(path)
        pipe = DiffusionPipeline.from_pretrained(str(path), **loading).to(device)
        log_precision(pipe, path)
        return pipe
    decoder_dir = path / DECODER_FOLDER if (path / DECODER_FOLDER).is_dir() else path
    if decoder_dir == path and not (path / "model_index.json").is_file():
        raise FileNotFoundError(
            f"{path} holds Kandinsky's prior but no {DECODER_FOLDER}/ (nor a decoder pipeline at its root)"
        )
    prior_pipe = KandinskyV22PriorPipeline.from_pretrained(
        str(check_pipeline_folder(prior, KandinskyV22PriorPipeline.__name__)), **loading
    )
    decoder = KandinskyV22Pipeline.from_pretrained(
        str(check_pipeline_folder(decoder_dir, KandinskyV22Pipeline.__name__)), **loading
    )
    pipe = KandinskyV22CombinedPipeline(
        unet=decoder.unet,
        scheduler=decoder.scheduler,
        movq=decoder.movq,
        prior_prior=prior_pipe.prior,
        prior_image_encoder=prior_pipe.image_encoder,
        prior_text_encoder=prior_pipe.text_encoder,
        prior_tokenizer=prior_pipe.tokenizer,
        prior_scheduler=prior_pipe.scheduler,
        prior_image_processor=prior_pipe.image_processor,
    )
    log_precision(pipe, f"{decoder_dir} with {prior}")
    return pipe.to(device)


def check_pipeline_folder(folder: str | os.PathLike, expected_class: str | None = None) -> Path:
    """``folder`` if it is a complete saved diffusers pipeline: its ``model_index.json`` (of
    ``expected_class``, when given) and every component folder that index names.

    diffusers reports a missing component as a file missing from the pipeline's root folder; this
    names the component.
    """
    from condeval.core.io import read_json

    folder = Path(folder)
    index = folder / "model_index.json"
    if not index.is_file():
        raise FileNotFoundError(f"{folder} is not a saved diffusers pipeline: it has no model_index.json")
    components = read_json(index)
    found = components.get("_class_name")
    if expected_class is not None and found != expected_class:
        raise ValueError(f"{folder} holds a {found}, not the {expected_class} expected there")
    missing = [
        name
        for name, spec in components.items()
        if not name.startswith("_") and isinstance(spec, list) and spec[:1] != [None] and not (folder / name).is_dir()
    ]
    if missing:
        raise FileNotFoundError(f"{folder}: the component folder(s) {missing} its model_index.json names are missing")
    return folder


def sampling_call(family: str, sampling: dict, image_size: int, max_length: int) -> dict:
    """Keyword arguments of a ``family`` pipeline's ``__call__``: ``sampling`` (steps, guidance, ...),
    the image side and, for SD3 and FLUX, the T5 sequence length (Kandinsky has no T5)."""
    call = {**sampling, "height": image_size, "width": image_size}
    if family != "kandinsky":
        call["max_sequence_length"] = max_length
    return call


def image_seed(seed: int, image_id: int) -> int:
    """The seed of one image's noise: a function of ``(seed, image_id)`` only, so that an image is the
    same whatever the shard or batch it is drawn in. Both must be non-negative integers (a float id
    would be truncated onto another image's noise)."""
    import numpy as np

    from condeval.core.io import check_integer

    state = [check_integer(seed, "seed"), check_integer(image_id, "image id")]
    return int(np.random.SeedSequence(state).generate_state(1, dtype=np.uint64)[0] >> 1)


#: Arguments of ``__call__`` that :func:`generate_images` sets itself (one image per prompt and id).
_SET_BY_GENERATE = ("prompt", "generator", "output_type", "num_images_per_prompt")


def _check_generation(prompts, image_ids, batch_size, call: dict) -> None:
    from condeval.core.io import check_integer

    if isinstance(prompts, str):
        raise TypeError("prompts must be a sequence of str, one per image; got one str")
    bad = next((position for position, prompt in enumerate(prompts) if not isinstance(prompt, str)), None)
    if bad is not None:
        raise TypeError(f"prompts[{bad}] must be a str; got {type(prompts[bad]).__name__}")
    if len(prompts) != len(image_ids):
        raise ValueError(f"{len(prompts)} prompts but {len(image_ids)} image ids")
    for position, image_id in enumerate(image_ids):
        check_integer(image_id, f"image_ids[{position}]")
    check_integer(batch_size, "batch_size", least=1)
    reserved = sorted(set(call) & set(_SET_BY_GENERATE))
    if reserved:
        raise TypeError(f"generate_images sets {reserved} itself (one seeded generator per image id, PIL output)")
    if call.get("num_inference_steps", 1) < 1:
        raise ValueError(f"num_inference_steps must be at least 1; got {call['num_inference_steps']}")
    if call.get("prior_num_inference_steps", 2) < 2:
        # diffusers' UnCLIPScheduler divides by (steps - 1)
        raise ValueError(f"prior_num_inference_steps must be at least 2; got {call['prior_num_inference_steps']}")


@torch.no_grad()
def generate_images(
    pipe, prompts, image_ids, *, seed: int, batch_size: int = 64, progress_bar: bool = True, **call
) -> list:
    """One image per prompt through the pipeline's ``__call__``, each from its own seeded generator.

    Parameters
    ----------
    pipe : diffusers pipeline
        From :func:`load_text_to_image` (or any text-to-image pipeline taking ``prompt`` and a list
        of ``generator``).
    prompts : sequence of str
    image_ids : sequence of int
        The id each prompt belongs to, a non-negative integer; with ``seed`` it seeds that image's CPU
        generator (:func:`image_seed`), so an image's noise does not depend on batching, sharding or
        the device's RNG. (Its pixels may differ by a rounding step, 1/255, between batch sizes:
        batched matrix products round differently.) A repeated id repeats the noise.
    seed : int
    batch_size : int, default 64
        Prompts per ``__call__``.
    progress_bar : bool, default True
        Report progress over batches (:func:`condeval.core.logs.progress`); the pipeline's own bar is off.
    **call
        Keyword arguments of ``__call__``: ``num_inference_steps``, ``guidance_scale``, ``height``,
        ``width``, ``max_sequence_length``, ... (not ``prompt``, ``generator`` or ``output_type``,
        which are set here). Give ``height`` and ``width``: the pipelines' defaults differ.

    Returns
    -------
    list of PIL.Image.Image

    Raises
    ------
    TypeError, ValueError
        Before any image is drawn, naming the argument: prompts that are not a sequence of str, ids that
        are not non-negative integers (by position), lengths that differ, a batch size below 1,
        ``__call__`` arguments set here, Kandinsky's ``prior_num_inference_steps`` below 2.
    """
    from condeval.core.logs import progress

    _check_generation(prompts, image_ids, batch_size, call)
    if type(pipe).__name__ == "KandinskyV22Pipeline":
        raise TypeError(
            "a Kandinsky decoder alone draws from image embeddings, not prompts: load the folder with "
            "its prior (load_text_to_image(path, prior=...))"
        )
    seeds = [image_seed(seed, image_id) for image_id in image_ids]
    pipe.set_progress_bar_config(disable=True)
    images = []
    for start in progress(range(0, len(prompts), batch_size), desc="images", unit="batch", enabled=progress_bar):
        generators = [torch.Generator().manual_seed(s) for s in seeds[start : start + batch_size]]
        batch = list(prompts[start : start + batch_size])
        images += pipe(prompt=batch, generator=generators, output_type="pil", **call).images
    return images
