"""Benchmark G: every GPU rule of the paper config at full model size on one GPU, in bfloat16 and float32.

Each entry is one Snakemake rule (and wildcard) of ``config/paper.yaml`` whose job runs on a GPU
(``profiles/slurm/config.yaml``'s ``set-resources``), measured through the package's own code on a few
items of the real shapes: the seconds per item after one warm-up, the peak GPU memory
(``torch.cuda.max_memory_allocated``, reset before the models are built, so weights count), the items
timed, the models' parameters, the card and the torch / CUDA versions.

**Full-size models, random weights.** The hub repositories are written here without their weights at
their real depth and width (``condeval.rehearsal.models.write_hub_repo(..., scale="full",
weights=False)``: configs, tokenizers, processors, schedulers, in seconds) and loaded by the package's
loaders inside :func:`condeval.rehearsal.full_size.random_weights`, which builds each model from its
config directly on the device in the dtype asked, with random weights. ``--tiny`` does the same at the
rehearsal's shrunk sizes on small inputs (how this script is tested on a CPU).

**What each entry runs** (``through`` in the JSON says which of the two):

- ``package function``: the rule's own calls (``load_text_to_image`` + ``generate_images``,
  ``Captioner.generate``, ``image_encoder(...).image_features``, ``ClipEncoder`` / ``BertEncoder``
  ``.text_features``, ``AttentionMaskSampler`` + ``sample_captions``, ``image_feature_encoder(...).encode``,
  ``generate_samples``, ``translator_pairs``); only the weights are random.
- ``same calls on constructed modules``: generator and translator training, whose rules train through
  Lightning's ``fit``: one optimiser step of the package's own ``AttributeFlowModule`` /
  ``TranslatorModule`` (its ``_loss`` and ``configure_optimizers``) at the config's batch, without
  Lightning's loop, checkpoints or validation.

Denoising is timed at 1 and 2 steps and scaled to the config's steps: ``seconds(N) = fixed + N ·
(t₂ − t₁)`` with ``fixed = t₁ − (t₂ − t₁)`` (text encoding, decoding). The trust track's rules run in
float32 in the package (no ``dtype``); their ``bfloat16`` rows run under ``torch.autocast`` (``precision``
says so). Float32 runs with torch's defaults: matrix products without TF32, cuDNN convolutions with it
(``provenance.tf32``, ``provenance.cudnn_tf32``). Every entry runs in bfloat16 first, then in float32, the
text-to-image generators last in each pass (float32 FLUX.1-dev, about 67 GB of weights, may not fit).

The JSON (``--out``) is written atomically after every measurement; ``--resume`` keeps the entries
measured (an OOM is a result) and measures the rest. One entry's failure or OOM is recorded
(``"oom": true`` with the memory allocated then) and the others go on; past ``--budget-s`` the
remaining ones are recorded as skipped. ``benchmarks/paper_cost.py`` turns the JSON into GPU-hours.

Usage::

    timeout 480 python benchmarks/bench_paper_gpu.py --device cuda --out benchmarks/out/paper_gpu.json
    python benchmarks/bench_paper_gpu.py --device cpu --tiny --out /tmp/paper_gpu_tiny.json
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import datetime
import fnmatch
import gc
import json
import logging
import platform
import subprocess
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
PACKAGE, MODULES = "package function", "same calls on constructed modules"
DTYPES = ("bfloat16", "float32")
SCHEMAS = ("crel", "coco", "encoders", "crc", "trust")
#: CelebA's four binary attributes: the attribute tables of every trust generator measured here.
ATTRIBUTE_VALUES = (2, 2, 2, 2)
#: A photo's size (COCO 2014's images are about 640 x 480: REFERENCE.md), width by height.
PHOTO = (640, 480)

log = logging.getLogger("bench_paper_gpu")


# ------------------------------------------------------------------------------------------- config
def paper_config(path: Path = ROOT / "config/paper.yaml") -> dict:
    """The paper config with every track's schema defaults filled in, as the workflow reads it."""
    import yaml
    from snakemake.utils import validate

    config = yaml.safe_load(Path(path).read_text())
    for track in SCHEMAS:
        validate(config[track], schema=str(ROOT / f"workflow/schemas/{track}.schema.yaml"))
    return config


def hub_id(path: str) -> str:
    """The hub repository of a config's local snapshot path (``models/<owner>/<name>``)."""
    return str(path).removeprefix("models/")


@dataclasses.dataclass(frozen=True)
class Sizes:
    """The inputs each entry is timed on: the config's batches and sides, or a CPU's tiny ones."""

    t2i_side: int
    t2i_batch: int
    batch: int  # captioning and feature batches (encoders.batch_size)
    warmup: int  # items of a warm-up call
    photo: tuple[int, int]
    max_new_tokens: int | None  # None: the config's
    crc_samples: int | None  # None: the config's I and T
    trust_side: int
    trust_batch: int
    train_batch: int
    train_steps: int
    sample_batch: int
    sit: dict
    repa_depth: int | None  # None: the config's
    layer: int | None  # None: the config's translator layer
    translator_images: int
    translator_batch: int
    signal_side: int
    signal_batch: int

    @classmethod
    def of(cls, config: dict, tiny: bool) -> Sizes:
        t2i, trust = config["crel"]["text_to_image"], config["trust"]
        full = cls(
            t2i_side=t2i["image_size"],
            t2i_batch=t2i["batch_size"],
            batch=config["encoders"]["batch_size"],
            warmup=16,
            photo=PHOTO,
            max_new_tokens=None,
            crc_samples=None,
            trust_side=trust["image_size"],
            trust_batch=trust["batch_size"],
            train_batch=trust["generator_training"]["batch_size"],
            train_steps=3,
            sample_batch=trust["sampling"]["batch_size"],
            sit=dict(trust["generator_training"]["transformer"]),
            repa_depth=None,
            layer=None,
            translator_images=64,
            translator_batch=trust["translator"]["batch_size"],
            signal_side=t2i["image_size"],
            signal_batch=128,  # generation_signal's image_features default
        )
        if not tiny:
            return full
        return dataclasses.replace(
            full,
            t2i_side=64,
            t2i_batch=2,
            batch=2,
            warmup=1,
            photo=(64, 48),
            max_new_tokens=4,
            crc_samples=4,
            trust_side=64,
            trust_batch=2,
            train_batch=4,
            train_steps=1,
            sample_batch=2,
            sit={"layers": 2, "heads": 2, "head_dim": 16},
            repa_depth=1,
            layer=1,
            translator_images=2,
            translator_batch=16,
            signal_side=64,
            signal_batch=2,
        )


@dataclasses.dataclass
class Context:
    """What a measurement needs: where it runs, in which precision, the config, the hub folders."""

    device: torch.device
    dtype: str
    tiny: bool
    config: dict
    sizes: Sizes
    hub: Path
    work: Path

    def repo(self, path: str) -> Path:
        """The folder of a config path's hub repository, written without weights on first use."""
        from condeval.rehearsal.models import write_hub_repo

        folder = self.hub / hub_id(path)
        if not folder.exists():
            write_hub_repo(hub_id(path), folder, scale="rehearsal" if self.tiny else "full", weights=False)
        return folder

    def autocast(self):
        """bfloat16 autocast for the rules the package runs in float32 only (none for float32)."""
        if self.dtype == "float32":
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=getattr(torch, self.dtype))


# -------------------------------------------------------------------------------------------- inputs
def captions(n: int) -> list[str]:
    """``n`` English captions of COCO's length (the rehearsal tokenizers' corpus)."""
    from condeval.rehearsal.models import CORPUS

    lines = [line for line in CORPUS if line.strip()]
    return [lines[i % len(lines)] for i in range(n)]


def photos(n: int, size: tuple[int, int], seed: int = 0) -> list:
    """``n`` RGB PIL images of ``size`` (width, height), smooth noise (a photo's JPEG-like content)."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    small = rng.integers(0, 256, (n, size[1] // 8 + 1, size[0] // 8 + 1, 3), dtype=np.uint8)
    return [Image.fromarray(tile).resize(size, Image.BILINEAR) for tile in small]


def pixels(n: int, side: int, seed: int = 0) -> np.ndarray:
    """``n`` uint8 RGB images (N, 3, side, side), as the trust track's readers give them."""
    return np.stack([np.asarray(image).transpose(2, 0, 1) for image in photos(n, (side, side), seed)])


# ---------------------------------------------------------------------------------------- timing
def synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed_result(ctx: Context, call: Callable[[], object]) -> tuple[float, object]:
    """(seconds ``call()`` takes, the device's queue drained before and after; what it returned)."""
    synchronize(ctx.device)
    started = time.perf_counter()
    value = call()
    synchronize(ctx.device)
    return time.perf_counter() - started, value


def timed(ctx: Context, call: Callable[[], object]) -> float:
    """Seconds ``call()`` takes (:func:`timed_result`)."""
    return timed_result(ctx, call)[0]


def warmed(ctx: Context, warm: Callable[[], object], call: Callable[[], object]) -> float:
    """``warm()`` once, then the seconds of ``call()``."""
    warm()
    return timed(ctx, call)


def scaled_steps(ctx: Context, draw: Callable[[int], object], steps: int, items: int) -> dict:
    """Seconds per item of a ``steps``-step sampler timed at 1 and 2 steps (after a 1-step warm-up):
    ``fixed + steps · (t₂ − t₁)``, ``fixed = t₁ − (t₂ − t₁)``."""
    draw(1)
    one, two = timed(ctx, lambda: draw(1)), timed(ctx, lambda: draw(2))
    per_step = max(two - one, 0.0)
    total = max(one - per_step, 0.0) + steps * per_step
    return {
        "seconds_per_item": total / items,
        "items_measured": 2 * items,
        "seconds_1_step": one,
        "seconds_2_steps": two,
        "steps": steps,
        "seconds_per_step": per_step,
        "scaled": f"timed at 1 and 2 steps, scaled to {steps}",
    }


def per_item(seconds: float, items: int, **extra) -> dict:
    return {"seconds_per_item": seconds / items, "items_measured": items, **extra}


def parameters(*objects) -> int:
    from condeval.rehearsal.full_size import parameter_count

    return parameter_count(*objects)


# ---------------------------------------------------------------------------------- text to image
def generate_images(model: str) -> Callable[[Context], dict]:
    """``generate_images``: ``load_text_to_image`` and ``generate_images`` at the config's side, batch, guidance."""

    def measure(ctx: Context) -> dict:
        from condeval.generators.text_to_image import generate_images, load_text_to_image, sampling_call

        t2i, sizes = ctx.config["crel"]["text_to_image"], ctx.sizes
        spec = t2i["models"][model]
        prior = ctx.repo(spec["prior_path"]) if "prior_path" in spec else None
        pipe = load_text_to_image(ctx.repo(spec["path"]), device=ctx.device, prior=prior, dtype=ctx.dtype)
        call = sampling_call(spec["family"], spec["sampling"], sizes.t2i_side, t2i["max_length"])
        steps, batch = call.pop("num_inference_steps"), sizes.t2i_batch
        prompts, ids = captions(batch), list(range(batch))

        def draw(n):
            return generate_images(
                pipe, prompts, ids, seed=0, batch_size=batch, progress_bar=False, num_inference_steps=n, **call
            )

        note = (
            "Kandinsky's prior runs its default 25 steps in every call (counted in the fixed part)"
            if prior
            else "guidance as configured (SD3: classifier-free, two passes a step; FLUX: embedded, one)"
        )
        return scaled_steps(ctx, draw, steps, batch) | {
            "parameters": parameters(pipe),
            "through": PACKAGE,
            "batch": batch,
            "side": sizes.t2i_side,
            "note": note,
        }

    return measure


def t2i_signal(ctx: Context) -> dict:
    """``t2i_signal``: the CLIP's image features of generated 512-px images (the rule's cost)."""
    from condeval.encoders.features import ClipEncoder

    sizes = ctx.sizes
    clip = ClipEncoder(ctx.repo(ctx.config["encoders"]["clip"]["path"]), device=ctx.device, dtype=ctx.dtype)
    images = photos(sizes.signal_batch, (sizes.signal_side, sizes.signal_side))
    seconds = warmed(
        ctx,
        lambda: clip.image_features(images[: sizes.warmup], sizes.signal_batch),
        lambda: clip.image_features(images, sizes.signal_batch),
    )
    return per_item(
        seconds,
        len(images),
        parameters=parameters(clip.model),
        through=PACKAGE,
        batch=sizes.signal_batch,
        note="ClipEncoder.image_features, as generation_signal calls it",
    )


# ---------------------------------------------------------------------------------- image to text
def generate_captions(model: str) -> Callable[[Context], dict]:
    """``generate_captions``: ``Captioner.generate`` with the config's sampling at ``encoders.batch_size``."""

    def measure(ctx: Context) -> dict:
        from condeval.generators.captioners import Captioner

        i2t, sizes = ctx.config["crel"]["image_to_text"], ctx.sizes
        captioner = Captioner(ctx.repo(i2t["models"][model]["path"]), device=ctx.device, dtype=ctx.dtype)
        sampling = dict(i2t["sampling"]) | ({"max_new_tokens": sizes.max_new_tokens} if sizes.max_new_tokens else {})
        images = photos(sizes.batch, sizes.photo)

        def caption(items):
            return captioner.generate(items, seed=0, batch_size=sizes.batch, progress_bar=False, **sampling)

        seconds = warmed(ctx, lambda: caption(images[: sizes.warmup]), lambda: caption(images))
        return per_item(
            seconds,
            len(images),
            parameters=parameters(captioner.model),
            through=PACKAGE,
            batch=sizes.batch,
            max_new_tokens=sampling["max_new_tokens"],
            note="random weights rarely sample the end token: every caption runs max_new_tokens "
            "(real captions stop earlier), an upper bound",
        )

    return measure


def image_features(ctx: Context) -> dict:
    """``image_features``: CLIP ViT-L/14 and DINOv2-base ``image_features`` of photos, one batch each."""
    from condeval.encoders.features import image_encoder

    encoders, sizes = ctx.config["encoders"], ctx.sizes
    loaded = {
        name: image_encoder(name, ctx.repo(encoders[name]["path"]), device=ctx.device, dtype=ctx.dtype)
        for name in ("clip", "dino")
    }
    images = photos(sizes.batch, sizes.photo)
    seconds = {
        name: warmed(
            ctx,
            lambda e=encoder: e.image_features(images[: sizes.warmup], sizes.batch),
            lambda e=encoder: e.image_features(images, sizes.batch),
        )
        for name, encoder in loaded.items()
    }
    return per_item(
        sum(seconds.values()),
        len(images),
        parameters=parameters(*(e.model for e in loaded.values())),
        through=PACKAGE,
        batch=sizes.batch,
        seconds_by_encoder=seconds,
        note="PIL images in memory: the rule also decodes each JPEG",
    )


def text_features(ctx: Context) -> dict:
    """``text_features``: CLIP ViT-L/14's text and BERT-base's [CLS] features of captions, one batch each."""
    from condeval.encoders.features import BertEncoder, ClipEncoder

    encoders, sizes = ctx.config["encoders"], ctx.sizes
    loaded = {
        "clip": ClipEncoder(ctx.repo(encoders["clip"]["path"]), device=ctx.device, dtype=ctx.dtype),
        "bert": BertEncoder(
            ctx.repo(encoders["bert"]["path"]),
            device=ctx.device,
            dtype=ctx.dtype,
            max_length=encoders["bert"]["max_length"],
        ),
    }
    texts = captions(sizes.batch)
    seconds = {
        name: warmed(
            ctx,
            lambda e=encoder: e.text_features(texts[: sizes.warmup], sizes.batch),
            lambda e=encoder: e.text_features(texts, sizes.batch),
        )
        for name, encoder in loaded.items()
    }
    return per_item(
        sum(seconds.values()),
        len(texts),
        parameters=parameters(*(e.model for e in loaded.values())),
        through=PACKAGE,
        batch=sizes.batch,
        seconds_by_encoder=seconds,
    )


# ------------------------------------------------------------------------------------------ crc
def crc_sample(model: str) -> Callable[[Context], dict]:
    """``crc_sample``: ``sample_captions`` with the config's I × T masked samples (``crc.sampling.words``)."""

    def measure(ctx: Context) -> dict:
        from condeval.crc.pos import LexiconTagger
        from condeval.crc.sampling import AttentionMaskSampler, sample_captions
        from condeval.encoders.features import ClipEncoder

        crc, sizes = ctx.config["crc"], ctx.sizes
        spec = crc["models"][model]
        encoder = ClipEncoder(
            ctx.repo(spec["path"]),
            device=ctx.device,
            tokenizer=ctx.repo(spec["tokenizer"]),
            image_processor=ctx.repo(spec["image_processor"]),
            trust_remote_code=True,
            dtype=ctx.dtype,
        )
        sampling = dict(crc["sampling"]["words"])
        if sizes.crc_samples:
            sampling |= {"n_image": sizes.crc_samples, "n_text": sizes.crc_samples}
        words = [caption.split() for caption in captions(3)]
        tagger = LexiconTagger({word: "NOUN" for caption in words for word in caption})
        sampler = AttentionMaskSampler(encoder, tagger, weight=crc["clipscore_weight"], **sampling)
        paths = []
        for k, image in enumerate(photos(3, sizes.photo)):
            paths.append(ctx.work / f"crc-{k}.jpg")
            image.save(paths[-1], quality=90)

        def sample(files, keys):
            return sample_captions(sampler, files, words[1 : 1 + len(keys)], keys, seed=0, progress=False)

        own = warmed(ctx, lambda: sample(paths[:1], [0]), lambda: sample(paths[1:3], [1, 2]))
        shared = timed(ctx, lambda: sample([paths[1], paths[1]], [3, 4]))
        image = max(own - shared, 0.0)
        return per_item(
            own,
            2,
            parameters=parameters(encoder.model),
            through=PACKAGE,
            samples=sampling,
            seconds_per_image=image,
            seconds_per_caption_on_a_shared_image=max(shared - image, 0.0) / 2,
            note="per caption with its own image (an upper bound: captions of one image share its "
            "masked image forwards)",
        )

    return measure


# ----------------------------------------------------------------------------------------- trust
def trust_real_features(extractor: str) -> Callable[[Context], dict]:
    """``trust_real_features``: ``image_feature_encoder(...).encode`` of uint8 images at ``trust.image_size``."""

    def measure(ctx: Context) -> dict:
        from condeval.encoders.features import image_feature_encoder

        trust, sizes = ctx.config["trust"], ctx.sizes
        spec = trust["extractors"][extractor]
        encoder = image_feature_encoder(
            ctx.repo(spec["path"]), device=ctx.device, dtype=ctx.dtype, image_size=spec.get("image_size")
        )
        images = pixels(sizes.trust_batch, sizes.trust_side)
        batch = len(images)
        seconds = warmed(
            ctx, lambda: encoder.encode(images[: sizes.warmup], batch), lambda: encoder.encode(images, batch)
        )
        return per_item(
            seconds,
            batch,
            parameters=parameters(encoder.model),
            through=PACKAGE,
            batch=batch,
            note="three-channel images; RxRx1's six-channel sites are composed to RGB first (CPU)",
        )

    return measure


def _sit_shape(ctx: Context) -> tuple[tuple[int, int, int], int, dict]:
    """(latent shape, width, transformer keywords) of the SiT-B/2-shaped denoiser on ``trust.image_size`` images."""
    side = ctx.sizes.trust_side // 8  # sd-vae-ft-mse down-samples by 8
    sit = ctx.sizes.sit
    return (4, side, side), sit["heads"] * sit["head_dim"], sit


def _vae(ctx: Context):
    """CelebA's sd-vae-ft-mse through the package's ``load_autoencoder`` (float32, as the rules load it)."""
    from condeval.generators.channelwise import load_autoencoder

    return load_autoencoder(ctx.repo(ctx.config["trust"]["datasets"]["celeba"]["autoencoder"]["path"])).to(ctx.device)


def _attribute_pipeline(ctx: Context):
    """An ``AttributeDiffusionPipeline`` of the paper's denoiser on sd-vae-ft-mse, built on the device in float32
    as the rules load it."""
    from diffusers import SD3Transformer2DModel

    from condeval.generators.attribute_to_image import AttributeDiffusionPipeline, AttributeEncoder
    from condeval.generators.attribute_training import denoiser_config
    from condeval.generators.text_to_image import flow_scheduler

    vae = _vae(ctx)
    latent, width, sit = _sit_shape(ctx)
    with torch.device(ctx.device):
        transformer = SD3Transformer2DModel.from_config(denoiser_config(latent, width, sit))
        encoder = AttributeEncoder(values=ATTRIBUTE_VALUES, width=width, context_width=width)
    pipe = AttributeDiffusionPipeline(transformer, vae, flow_scheduler(), encoder).to(ctx.device)
    pipe.set_progress_bar_config(disable=True)
    return pipe


def _optimizer_steps(ctx: Context, module, batch: tuple, steps: int) -> float:
    """Seconds per optimiser step of ``module`` (its ``_loss`` and ``configure_optimizers``'s AdamW) on ``batch``,
    after one warm-up step."""
    optimizer = module.configure_optimizers()["optimizer"]

    def step():
        with ctx.autocast():
            loss = module._loss(batch, training=True)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step()
    return timed(ctx, lambda: [step() for _ in range(steps)]) / steps


def _train_batch(ctx: Context, batch: int, tokens: torch.Tensor | None) -> tuple:
    """A cached-rows batch: latents, attribute rows and (REPA) the extractor's float16 patch tokens."""
    latent, _, _ = _sit_shape(ctx)
    rows = (
        torch.randn(batch, *latent, device=ctx.device),
        torch.randint(0, 2, (batch, len(ATTRIBUTE_VALUES)), device=ctx.device),
    )
    if tokens is None:
        return rows
    return (*rows, tokens[torch.arange(batch) % len(tokens)].to(ctx.device, torch.float16))


def _is_oom(error: BaseException) -> bool:
    return isinstance(error, (torch.OutOfMemoryError, MemoryError)) or "out of memory" in str(error).lower()


def _largest_batch(ctx: Context, module, tokens) -> tuple[float, int, list[int]]:
    """(seconds per optimiser step, batch, the batches that did not fit): the config's training batch, halved
    after each out-of-memory error."""
    batch, too_large = ctx.sizes.train_batch, []
    while True:
        try:
            step = _optimizer_steps(ctx, module, _train_batch(ctx, batch, tokens), ctx.sizes.train_steps)
            return step, batch, too_large
        except RuntimeError as error:  # torch.OutOfMemoryError, or cuBLAS / cuDNN failing to allocate
            if not _is_oom(error) or batch == 1:
                raise
        too_large.append(batch)
        batch //= 2
        module.zero_grad(set_to_none=True)
        _release(ctx.device)  # the peak of the batch that fits (the weights, still allocated, count)


def trust_train_generator(variant: str) -> Callable[[Context], dict]:
    """``trust_train_generator``: one AdamW step of ``AttributeFlowModule`` at the config's batch (halved until it
    fits), and the once-per-image encoding into the row cache (``latents_of``, ``PatchEncoder.tokens``)."""

    def measure(ctx: Context) -> dict:
        from condeval.core.training import cosine_schedule
        from condeval.encoders.patch_encoder import PatchEncoder
        from condeval.encoders.patch_features import pixel_values
        from condeval.generators.attribute_to_image import AttributeEncoder
        from condeval.generators.attribute_training import AttributeFlowModule, denoiser_config
        from condeval.generators.text_to_image_training import latents_of

        trust, sizes = ctx.config["trust"], ctx.sizes
        train, repa = trust["generator_training"], trust["generators"][variant].get("repa")
        vae = _vae(ctx)
        images = pixels(min(sizes.train_batch, 64), sizes.trust_side)
        latents = pixel_values(images).numpy()
        encode = {"latents": warmed(ctx, lambda: latents_of(vae, latents[:1]), lambda: latents_of(vae, latents))}
        tokens, options = None, {}
        if repa:
            spec = trust["extractors"][repa["extractor"]]
            extractor = PatchEncoder(
                ctx.repo(spec["path"]), device=ctx.device, dtype=ctx.dtype, image_size=spec.get("image_size")
            )
            extractor.tokens(images[:1])
            encode["tokens"], tokens = timed_result(ctx, lambda: torch.from_numpy(extractor.tokens(images)))
            options["repa"] = {
                "coefficient": repa["coefficient"],
                "depth": sizes.repa_depth or repa["depth"],
                "target_dim": tokens.shape[-1],
                "extractor": repa["extractor"],
            }
        latent, width, sit = _sit_shape(ctx)
        with torch.device(ctx.device):
            encoder = AttributeEncoder(values=ATTRIBUTE_VALUES, width=width, context_width=width)
            module = AttributeFlowModule(
                denoiser_config(latent, width, sit),
                dict(encoder.config),
                cosine_schedule(train["lr"], 1000, 1),
                condition_dropout=train["condition_dropout"],
                **options,
            )
        step, batch, too_large = _largest_batch(ctx, module, tokens)
        return {
            "seconds_per_item": step / batch,
            "items_measured": batch * sizes.train_steps,
            "seconds_per_step": step,
            "batch": batch,
            "batch_too_large": too_large,
            "parameters": parameters(module),
            "through": MODULES,
            "encode_seconds_per_image": {k: v / len(images) for k, v in encode.items()},
            "note": "AttributeFlowModule._loss + AdamW step per item of a batch; the rule's Lightning loop "
            "(checkpoints, validation, deterministic=True) and its row reads are not timed",
        }

    return measure


def trust_generate(ctx: Context) -> dict:
    """``trust_generate``: ``generate_samples`` at the config's batch, timed at 1 and 2 steps, scaled to its 250."""
    from condeval.trust.samples import SamplingSettings, generate_samples

    sampling, batch = ctx.config["trust"]["sampling"], ctx.sizes.sample_batch
    pipe = _attribute_pipeline(ctx)

    def draw(steps):
        with ctx.autocast():
            sampling = SamplingSettings(per_condition=batch, num_inference_steps=steps, seed=0, batch_size=batch)
            return generate_samples(pipe, [[0] * len(ATTRIBUTE_VALUES)], sampling)

    return scaled_steps(ctx, draw, sampling["num_inference_steps"], batch) | {
        "parameters": parameters(pipe),
        "through": PACKAGE,
        "batch": batch,
        "note": "the pipeline built in memory at the paper's SiT-B/2 shape (the rule loads a trained folder)",
    }


def _extractor_width(ctx: Context, extractor: str) -> int:
    """The feature width of a trust extractor (SigLIP so400m's 1152 at full size), the translator's target."""
    from condeval.rehearsal.models import shapes

    path = ctx.config["trust"]["extractors"][extractor]["path"]
    return shapes(hub_id(path), "rehearsal" if ctx.tiny else "full")["vision"]["hidden_size"]


def trust_train_translator(ctx: Context) -> dict:
    """``trust_train_translator``: the pairs (``translator_pairs``: VAE encoding and block-``layer`` features at
    each t) and the translator's AdamW steps over ``epochs``, per pair."""
    from condeval.core.training import cosine_schedule
    from condeval.trust.translator import FeatureReadout, translator_pairs
    from condeval.trust.translator_training import TranslatorModule

    settings, sizes = ctx.config["trust"]["translator"], ctx.sizes
    pipe = _attribute_pipeline(ctx)
    layer, t_values = sizes.layer or settings["layer"], settings["t"]
    images = pixels(sizes.translator_images, sizes.trust_side)
    attributes = np.zeros((len(images), len(ATTRIBUTE_VALUES)), dtype=np.int64)

    def pairs(n):
        with ctx.autocast():
            readout = FeatureReadout(layer, path=settings["noise_path"])
            return translator_pairs(pipe, images[:n], attributes[:n], t_values, readout)

    pair_seconds = warmed(ctx, lambda: pairs(1), lambda: pairs(len(images)))
    width, target = _sit_shape(ctx)[1], _extractor_width(ctx, "siglip")
    with torch.device(ctx.device):
        module = TranslatorModule(
            {
                "in_dim": width,
                "out_dim": target,
                "hidden": settings["hidden"],
                "mean": [0.0] * width,
                "scale": [1.0] * width,
            },
            settings["weights"],
            cosine_schedule(settings["lr"], 1000, 1, weight_decay=settings["weight_decay"]),
            loss=settings["loss"],
            whitened=settings["whitened"],
        )
        batch = (torch.randn(sizes.translator_batch, width), torch.randn(sizes.translator_batch, target))
    step = _optimizer_steps(ctx, module, batch, max(sizes.train_steps, 2))
    per_pair = pair_seconds / (len(images) * len(t_values))
    train_per_pair = step / sizes.translator_batch
    return {
        "seconds_per_item": per_pair + settings["epochs"] * train_per_pair,
        "items_measured": len(images) * len(t_values),
        "seconds_per_pair_computed": per_pair,
        "seconds_per_pair_epoch": train_per_pair,
        "epochs": settings["epochs"],
        "batch": sizes.translator_batch,
        "parameters": parameters(pipe, module),
        "through": f"{PACKAGE} (pairs) and {MODULES} (training)",
        "note": "per pair: computing it once plus one pass per epoch; Lightning's loop not timed",
    }


# --------------------------------------------------------------------------------------- entries
@dataclasses.dataclass(frozen=True)
class Entry:
    """One rule (with its wildcard) and how it is measured; ``precision``: ``loader`` when the rule's loader
    takes the dtype, ``autocast`` when the package runs it in float32 only."""

    rule: str
    wildcard: str | None
    measure: Callable[[Context], dict]
    precision: str = "loader"

    @property
    def name(self) -> str:
        return f"{self.rule}[{self.wildcard}]" if self.wildcard else self.rule


def entries(config: dict) -> list[Entry]:
    """Every GPU rule of the paper config, the text-to-image generators (the longest) last: a run cut short by
    ``--budget-s`` or ``timeout`` keeps the most entries."""
    crel, crc, trust = config["crel"], config["crc"], config["trust"]
    return [
        *(Entry("generate_captions", m, generate_captions(m)) for m in crel["image_to_text"]["models"]),
        Entry("image_features", None, image_features),
        Entry("text_features", None, text_features),
        Entry("t2i_signal", None, t2i_signal),
        *(Entry("crc_sample", m, crc_sample(m)) for m in crc["models"]),
        *(Entry("trust_real_features", e, trust_real_features(e)) for e in trust["extractors"]),
        *(Entry("trust_train_generator", v, trust_train_generator(v), "autocast") for v in ("vanilla", "repa-dinov3")),
        Entry("trust_generate", None, trust_generate, "autocast"),
        Entry("trust_train_translator", None, trust_train_translator, "autocast"),
        *(Entry("generate_images", m, generate_images(m)) for m in crel["text_to_image"]["models"]),
    ]


def selected(all_entries: list[Entry], patterns: list[str] | None) -> list[Entry]:
    """The entries whose name or rule matches one of ``patterns`` (shell patterns whose brackets are the names'
    own: ``generate_images[sd3-*]``), all when None."""
    if not patterns:
        return all_entries
    globs = [pattern.replace("[", "[[]") for pattern in patterns]
    chosen = [e for e in all_entries if any(fnmatch.fnmatchcase(n, g) for g in globs for n in (e.name, e.rule))]
    if not chosen:
        raise SystemExit(f"--rules {patterns} match none of {[e.name for e in all_entries]}")
    return chosen


# ----------------------------------------------------------------------------------------- harness
def provenance(device: torch.device, tiny: bool) -> dict:
    """The card, the versions, the date and the commit a run's numbers come from."""

    def git(*args):
        try:
            result = subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=False)
        except OSError:  # no git where the copy runs
            return ""
        return result.stdout.strip()

    dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
    return {
        "card": card(device),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "device": str(device),
        "tiny": tiny,
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "commit": git("rev-parse", "--short", "HEAD") + ("-dirty" if dirty else ""),
        "host": platform.node(),
        "tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_tf32": torch.backends.cudnn.allow_tf32,
    }


def card(device: torch.device) -> str:
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"CPU ({platform.processor() or platform.machine()})"


def _memory(device: torch.device) -> dict:
    if device.type != "cuda":
        return {"peak_memory_bytes": None, "peak_reserved_bytes": None}
    return {
        "peak_memory_bytes": torch.cuda.max_memory_allocated(device),
        "peak_reserved_bytes": torch.cuda.max_memory_reserved(device),
    }


def _release(device: torch.device) -> None:
    """Free what the last measurement held and restart the peak-memory count (from what is still allocated)."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def _precision(entry: Entry, dtype: str) -> str:
    """How ``dtype`` was applied: through the rule's loader, or autocast over float32 weights."""
    if entry.precision == "loader" or dtype == "float32":
        return dtype
    return f"{dtype} autocast (float32 weights: the package has no dtype here)"


def measure_one(entry: Entry, ctx: Context) -> dict:
    """One entry in one precision: its measurement, its OOM (with the memory then) or its error, never raised;
    what it held freed after it (the run frees before the first)."""
    started = time.perf_counter()
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = entry.measure(ctx)
    except Exception as error:  # noqa: BLE001 - one entry's failure is its result; the others go on
        oom = _is_oom(error)
        result = (
            {"oom": True}
            if oom
            else {
                "error": "".join(traceback.format_exception_only(error)).strip(),
                "traceback": traceback.format_exc(limit=-4),
            }
        )
        result |= {"memory_at_failure_bytes": _memory(ctx.device)["peak_memory_bytes"]} if oom else {}
    result |= {
        "wall_s": time.perf_counter() - started,
        **_memory(ctx.device),
        "card": card(ctx.device),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "precision": _precision(entry, ctx.dtype),
    }
    _release(ctx.device)
    return result


def finished(result: dict | None) -> bool:
    """A measurement that ``--resume`` keeps: timed, or out of memory (a result too); not an error or a skip."""
    return bool(result) and ("seconds_per_item" in result or result.get("oom", False))


def run(args) -> dict:
    """Measure the selected entries, bfloat16 first, writing ``args.out`` after each; the document."""
    from condeval.core.io import write_json
    from condeval.rehearsal.full_size import random_weights

    device = torch.device(args.device)
    config = paper_config(args.config)
    out = Path(args.out)
    document = json.loads(out.read_text()) if args.resume and out.exists() else {}
    if document and document["provenance"]["tiny"] != args.tiny:
        raise SystemExit(f"{out} holds a {'--tiny' if args.tiny else 'full-size'} run's numbers: --resume another file")
    document["provenance"] = provenance(device, args.tiny)
    document.setdefault("runs", []).append(document["provenance"])
    rules = document.setdefault("rules", {})
    started = time.monotonic()
    _release(device)
    with tempfile.TemporaryDirectory(prefix="bench_paper_gpu_") as scratch, random_weights(device):
        base = Context(
            device, DTYPES[0], args.tiny, config, Sizes.of(config, args.tiny), Path(scratch) / "hub", Path(scratch)
        )
        for dtype in args.dtypes:
            ctx = dataclasses.replace(base, dtype=dtype)
            for entry in selected(entries(config), args.rules):
                record = rules.setdefault(entry.name, {"rule": entry.rule, "wildcard": entry.wildcard, "dtypes": {}})
                if args.resume and finished(record["dtypes"].get(dtype)):
                    log.info("%s %s: kept from %s", entry.name, dtype, out)
                    continue
                if time.monotonic() - started > args.budget_s:
                    record["dtypes"][dtype] = {"skipped": f"past --budget-s {args.budget_s}"}
                else:
                    record["dtypes"][dtype] = measure_one(entry, ctx)
                    log.info("%s %s: %s", entry.name, dtype, _summary(record["dtypes"][dtype]))
                document["elapsed_s"] = time.monotonic() - started
                write_json(document, out)
    return document


def _summary(result: dict) -> str:
    if "seconds_per_item" in result:
        peak = result.get("peak_memory_bytes")
        return f"{result['seconds_per_item']:.4g} s/item" + (f", peak {peak / 2**30:.2f} GiB" if peak else "")
    return "out of memory" if result.get("oom") else result.get("error", "skipped")


def parse(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--tiny", action="store_true", help="the rehearsal's shrunk models on tiny inputs (CPU tests)")
    parser.add_argument(
        "--rules",
        nargs="*",
        help="entries or rules to run (shell patterns), e.g. generate_images 'crc_sample[ml-laion-h14]'; default all",
    )
    parser.add_argument("--dtypes", nargs="+", default=list(DTYPES), choices=DTYPES)
    parser.add_argument("--out", default="benchmarks/out/paper_gpu.json")
    parser.add_argument("--resume", action="store_true", help="keep the entries already measured in --out")
    parser.add_argument("--budget-s", type=float, default=420.0, help="after this, remaining entries are skipped")
    parser.add_argument("--config", default=str(ROOT / "config/paper.yaml"))
    return parser.parse_args(argv)


def main(argv=None) -> dict:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    for noisy in ("transformers", "diffusers"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    return run(parse(argv))


if __name__ == "__main__":
    main()
