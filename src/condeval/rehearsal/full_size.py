"""The paper config's hub checkpoints at their real depth and width, and loading them with random weights.

:data:`FULL` holds, per hub repository of :data:`condeval.rehearsal.models.REPOS`, the values that
:mod:`condeval.rehearsal.models` shrinks (depth, widths, heads, vocabularies), at the checkpoint's real
size; ``write_hub_repo(repo, folder, scale="full")`` builds the repository with them. Everything else
(image sizes, patches, channels, positions, special tokens, schedulers) is the rehearsal's already. The
keys of each entry are those of :data:`condeval.rehearsal.models.REHEARSAL`.

Each value names its source:

- ``class default``: the transformers / diffusers config class's default, which is the base checkpoint
  (read off transformers 5.23 and diffusers 0.42, the versions locked here);
- ``REFERENCE``: ``../shared/REFERENCE.md``, "The real checkpoints' shapes";
- ``diffusers script``: diffusers' ``scripts/convert_kandinsky_to_diffusers.py`` (Kandinsky 2.1's UNet
  and MoVQ; 2.2's decoder keeps them);
- ``recalled``: the hub's ``config.json`` as remembered, not read here (no network): check these first
  against the real files when a number matters.

Tokenizers stay the rehearsal's (about a thousand tokens): the full vocabularies size the embedding tables
and language-model heads, and every id a rehearsal tokenizer produces lies inside them.

:func:`random_weights` loads such a repository written without its weights (``weights=False``: configs,
tokenizers and processors only, built on the meta device in a second): inside it, ``from_pretrained`` of
a folder that holds a config but no weight file builds the class from that config directly on a device, in
the dtype asked, with the class's own random initialisation. The package's loaders then run as they run
on the hub's files, without 24 GB of weights on disk or a 12B model built on the CPU first.
"""

from __future__ import annotations

import contextlib
import inspect
from pathlib import Path

import torch

__all__ = ["FULL", "random_weights", "parameter_count"]


def tower(hidden: int, layers: int, heads: int, intermediate: int) -> dict:
    """A transformer tower's config keywords (transformers' names)."""
    return {
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "intermediate_size": intermediate,
    }


# ----------------------------------------------------------------------------------- shared towers
#: The "base" and "large" transformer towers of BERT and ViT (and XLM-R, DINOv3 ViT-L): 768 × 12 layers of 12
#: heads, MLP 3072 (BertConfig's, BlipVisionConfig's, GitVisionConfig's and CLIPVisionConfig's default: class
#: default) and 1024 × 24 of 16, MLP 4096 (ViT-L; recalled).
BASE, LARGE = tower(768, 12, 12, 3072), tower(1024, 24, 16, 4096)
#: OpenAI CLIP ViT-L/14: vision LARGE, text BASE, projection 768 (recalled; REFERENCE: vision 1024 × 24, text
#: 768 × 12, projection 768); its text tower is SD3's and FLUX's CLIP-L.
CLIP_L_TEXT, CLIP_L_PROJECTION = BASE, 768
#: LAION ViT-B/32: vision BASE, text and projection transformers' CLIP class defaults (class default).
VIT_B32_TEXT, VIT_B32_PROJECTION = tower(512, 12, 8, 2048), 512
#: LAION ViT-H/14 (recalled: OpenCLIP's ViT-H-14, vision 1280 × 32 of head width 80; text 1024 × 24 = LARGE).
VIT_H14_VISION, VIT_H14_PROJECTION = tower(1280, 32, 16, 5120), 1024
#: OpenCLIP ViT-bigG/14 (SD3's CLIP-G text encoder, Kandinsky 2.2's CLIP; recalled; REFERENCE: CLIP-G 1280 wide).
BIGG_TEXT, BIGG_VISION = tower(1280, 32, 20, 5120), tower(1664, 48, 16, 8192)
#: XLM-RoBERTa's vocabulary (base: BASE, large: LARGE; recalled).
XLMR_VOCAB = 250002
#: SigLIP so400m's towers, vision and text alike (REFERENCE: 1152, 27 layers, MLP 4304; 16 heads recalled, and
#: the same in a public preset table, kvmm's SigLIPSo400mP14).
SO400M = tower(1152, 27, 16, 4304)
#: T5 v1.1 XXL's encoder (SD3's text_encoder_3, FLUX's text_encoder_2; recalled; REFERENCE: d_model 4096).
T5_XXL = {"d_model": 4096, "d_kv": 64, "d_ff": 10240, "num_layers": 24, "num_heads": 64, "vocab_size": 32128}
#: The Stable Diffusion autoencoder's blocks (sd-vae-ft-mse, SD3's and FLUX's VAEs; recalled, as in
#: ``benchmarks/bench_trust_device.py``).
SD_AUTOENCODER = {"block_out_channels": (128, 256, 512, 512), "layers_per_block": 2, "norm_num_groups": 32}
CLIP_VOCAB = 49408  # class default

#: Hub repository id -> its real-size values (the keys of :data:`condeval.rehearsal.models.REHEARSAL`).
FULL: dict[str, dict] = {
    # BLIP: text tower 12 heads (recalled; BlipTextConfig's default is 8), projection 512 and vocabulary
    # 30,524 (class default: BERT's 30,522 plus [DEC] and [ENC])
    "Salesforce/blip-image-captioning-base": {"vision": BASE, "text": BASE, "projection": 512, "vocab_size": 30524},
    "Salesforce/blip-image-captioning-large": {"vision": LARGE, "text": BASE, "projection": 512, "vocab_size": 30524},
    # GIT: base is GitConfig's default (6 text layers, class default); large's text 1024 × 6 (recalled)
    "microsoft/git-base-coco": {"vision": BASE, "text": tower(768, 6, 12, 3072), "vocab_size": 30522},
    "microsoft/git-large-coco": {"vision": LARGE, "text": tower(1024, 6, 16, 4096), "vocab_size": 30522},
    "openai/clip-vit-large-patch14": {
        "text": CLIP_L_TEXT,
        "vision": LARGE,
        "projection": CLIP_L_PROJECTION,
        "vocab_size": CLIP_VOCAB,
    },
    "laion/CLIP-ViT-B-32-laion2B-s34B-b79K": {
        "text": VIT_B32_TEXT,
        "vision": BASE,
        "projection": VIT_B32_PROJECTION,
        "vocab_size": CLIP_VOCAB,
    },
    "laion/CLIP-ViT-H-14-laion2B-s32B-b79K": {
        "text": LARGE,
        "vision": VIT_H14_VISION,
        "projection": VIT_H14_PROJECTION,
        "vocab_size": CLIP_VOCAB,
    },
    # DINOv2-base: Dinov2Config's defaults (class default; REFERENCE: 768, 12 layers)
    "facebook/dinov2-base": {"hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12, "mlp_ratio": 4},
    # DINOv3 ViT-L/16: REFERENCE (1024 wide, 24 layers); 16 heads and MLP 4096 recalled
    "facebook/dinov3-vitl16-pretrain-lvd1689m": {"tower": LARGE},
    # SigLIP so400m: text vocabulary 32,000 (class default), projection its width
    "google/siglip-so400m-patch14-224": {"text": SO400M, "vision": SO400M, "projection": 1152, "vocab_size": 32000},
    "google-bert/bert-base-uncased": {"tower": BASE, "vocab_size": 30522},
    "FacebookAI/xlm-roberta-base": {"tower": BASE, "vocab_size": XLMR_VOCAB},
    "FacebookAI/xlm-roberta-large": {"tower": LARGE, "vocab_size": XLMR_VOCAB},
    # the converted multilingual LAION CLIPs: LAION's vision towers, XLM-R's text towers (REFERENCE), OpenCLIP's
    # embedding widths 512 and 1024 (recalled)
    "calpt/CLIP-ViT-B-32-xlm-roberta-base-laion5B-s13B-b90k": {
        "vision": BASE,
        "text": BASE,
        "projection": 512,
        "vocab_size": XLMR_VOCAB,
    },
    "calpt/CLIP-ViT-H-14-frozen-xlm-roberta-large-laion5B-s13B-b90k": {
        "vision": VIT_H14_VISION,
        "text": LARGE,
        "projection": 1024,
        "vocab_size": XLMR_VOCAB,
    },
    "stabilityai/sd-vae-ft-mse": {"autoencoder": SD_AUTOENCODER},
    # SD3-Medium and SD3.5-Large transformers: REFERENCE (24 layers of 24 heads × 64, caption projection 1536;
    # 38 × 38 × 64, 2432); CLIP-L and CLIP-G text towers above
    "stabilityai/stable-diffusion-3-medium-diffusers": {
        "transformer": {
            "num_layers": 24,
            "num_attention_heads": 24,
            "attention_head_dim": 64,
            "caption_projection_dim": 1536,
        },
        "clip_l": CLIP_L_TEXT,
        "clip_g": BIGG_TEXT,
        "t5": T5_XXL,
        "autoencoder": SD_AUTOENCODER,
        "clip_vocab_size": CLIP_VOCAB,
    },
    "stabilityai/stable-diffusion-3.5-large": {
        "transformer": {
            "num_layers": 38,
            "num_attention_heads": 38,
            "attention_head_dim": 64,
            "caption_projection_dim": 2432,
        },
        "clip_l": CLIP_L_TEXT,
        "clip_g": BIGG_TEXT,
        "t5": T5_XXL,
        "autoencoder": SD_AUTOENCODER,
        "clip_vocab_size": CLIP_VOCAB,
    },
    # FLUX.1-dev: REFERENCE (19 double and 38 single blocks of 24 heads × 128, rotary axes 16, 56, 56), also
    # FluxTransformer2DModel's defaults (class default)
    "black-forest-labs/FLUX.1-dev": {
        "transformer": {
            "num_layers": 19,
            "num_single_layers": 38,
            "num_attention_heads": 24,
            "attention_head_dim": 128,
            "axes_dims_rope": (16, 56, 56),
        },
        "clip": CLIP_L_TEXT,
        "t5": T5_XXL,
        "autoencoder": SD_AUTOENCODER,
        "clip_vocab_size": CLIP_VOCAB,
    },
    # Kandinsky 2.2's prior: PriorTransformer's defaults for heads, head width and depth (class default; the
    # diffusers script's PRIOR_CONFIG is {}), embedding 1280 (REFERENCE), ViT-bigG/14 towers above
    "kandinsky-community/kandinsky-2-2-prior": {
        "prior": {"num_attention_heads": 32, "attention_head_dim": 64, "num_layers": 20},
        "embedding": 1280,
        "text": BIGG_TEXT,
        "vision": BIGG_VISION,
        "clip_vocab_size": CLIP_VOCAB,
    },
    # Kandinsky 2.2's decoder: the UNet's blocks, head width, cross-attention width and groups and MoVQ's
    # blocks (diffusers script); its image-embedding width 1280 (REFERENCE: the prior's embedding)
    "kandinsky-community/kandinsky-2-2-decoder": {
        "unet": {
            "block_out_channels": (384, 768, 1152, 1536),
            "layers_per_block": 3,
            "attention_head_dim": 64,
            "cross_attention_dim": 768,
            "norm_num_groups": 32,
        },
        "movq": {"block_out_channels": (128, 256, 256, 512), "layers_per_block": 2},
        "embedding": 1280,
    },
}


# ------------------------------------------------------------------------------ random-weight loading
_WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth", ".ckpt")


def _has_weights(folder: Path) -> bool:
    return folder.is_dir() and any(path.suffix in _WEIGHT_SUFFIXES for path in folder.iterdir())


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def _dtype(value, config=None) -> torch.dtype:
    """The dtype a ``from_pretrained(..., dtype=value)`` gives: ``value``, else the config's, else float32."""
    if isinstance(value, str) and value != "auto":
        value = getattr(torch, value)
    if isinstance(value, torch.dtype):
        return value
    stored = getattr(config, "dtype", None) if config is not None else None
    return getattr(torch, stored) if isinstance(stored, str) else stored or torch.float32


def _keep_in_float32(model, dtype: torch.dtype) -> None:
    """The modules transformers keeps in float32 when it loads ``model`` in ``dtype`` (T5's ``wo`` in float16)."""
    keep = set(getattr(model, "_keep_in_fp32_modules_strict", None) or ())
    if dtype == torch.float16:
        keep |= set(getattr(model, "_keep_in_fp32_modules", None) or ())
    if dtype in (torch.float16, torch.bfloat16) and keep:
        for name, module in model.named_modules():
            if keep & set(name.split(".")):
                module.float()


def _built(device, dtype: torch.dtype, build):
    """``build()`` with ``device`` and ``dtype`` as the defaults of every tensor it creates, in eval mode."""
    with torch.device(device), _default_dtype(dtype):
        return build().eval()


def _transformers_loader(original, device):
    def from_pretrained(cls, path, *args, **kwargs):
        folder = Path(path) / kwargs.get("subfolder", "")
        if _has_weights(folder):
            return original(cls, path, *args, **kwargs)
        config = kwargs.get("config")
        if not hasattr(config, "to_dict"):  # AutoModel passes the config it read; a class reads its own
            config = cls.config_class.from_pretrained(str(folder))
        dtype = _dtype(kwargs.get("dtype", kwargs.get("torch_dtype")), config)
        accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "config"}
        model = _built(device, dtype, lambda: cls(config, **{k: v for k, v in kwargs.items() if k in accepted}))
        _keep_in_float32(model, dtype)
        return model

    return from_pretrained


def _diffusers_loader(original, device):
    def from_pretrained(cls, path, **kwargs):
        subfolder = kwargs.get("subfolder")
        if _has_weights(Path(path) / (subfolder or "")):
            return original(cls, path, **kwargs)
        config = cls.load_config(str(path), subfolder=subfolder)
        dtype = _dtype(kwargs.get("torch_dtype", kwargs.get("dtype")))
        return _built(device, dtype, lambda: cls.from_config(config))

    return from_pretrained


@contextlib.contextmanager
def random_weights(device: str | torch.device = "cpu"):
    """Inside the block, ``from_pretrained`` of a folder without weight files builds random weights.

    transformers' ``PreTrainedModel.from_pretrained`` (and so ``AutoModel``'s, remote code included) and
    diffusers' ``ModelMixin.from_pretrained`` (and so every component a ``DiffusionPipeline.from_pretrained``
    loads) build the class from the folder's config on ``device``, in the dtype asked (``dtype`` /
    ``torch_dtype``; float32 when none), with the class's own initialisation: the memory and compute of the
    real checkpoint without its weights. Modules transformers keeps in float32 stay so. A folder that holds
    weights loads as usual. Tokenizers, processors and schedulers are read from their files.

    Parameters
    ----------
    device : str or torch.device
        Where the weights are made (``"cuda"``: a 12B model is never built on the CPU).
    """
    from diffusers import ModelMixin
    from transformers import PreTrainedModel

    patched = {
        PreTrainedModel: _transformers_loader(PreTrainedModel.__dict__["from_pretrained"].__func__, device),
        ModelMixin: _diffusers_loader(ModelMixin.__dict__["from_pretrained"].__func__, device),
    }
    originals = {owner: owner.__dict__["from_pretrained"] for owner in patched}
    try:
        for owner, loader in patched.items():
            owner.from_pretrained = classmethod(loader)
        yield
    finally:
        for owner, original in originals.items():
            owner.from_pretrained = original


def parameter_count(*objects) -> int:
    """Parameters of every ``torch.nn.Module`` among ``objects`` and the components of the pipelines among
    them (a module shared by two is counted once)."""
    modules = []
    for thing in objects:
        parts = getattr(thing, "components", None)
        modules += [c for c in parts.values() if isinstance(c, torch.nn.Module)] if parts else [thing]
    seen = {id(p): p.numel() for m in modules if isinstance(m, torch.nn.Module) for p in m.parameters()}
    return int(sum(seen.values()))
