"""Benchmark G: scoring during generation through the translator against decoding plus encoding.

What abstention mid-trajectory replaces, per sample, at the paper's sizes (Section 5.2, Appendix L):
after the scoring step the sampler would run its remaining denoiser steps, decode the latent with the
VAE and encode the image with the scoring extractor before the trust score could be read. The
translator reads the block tokens the sampler already computed and maps them to the extractor's space.

Timed in one run, on random weights of the real classes at the paper's configurations (speed does not
depend on the weights):

- **translator + score**: :class:`condeval.trust.translator.TranslatorNet` 768 → 2048 → 1152 (SiT-B/2's
  width to SigLIP so400m's) on mean-pooled tokens, then :meth:`condeval.trust.TrustScorer.score` in
  1152-D (four binary attributes), on ``--samples`` rows;
- **decode + encode** (the baseline): diffusers' ``AutoencoderKL`` with Stable Diffusion's VAE config
  (the SiT's sd-vae-ft-ema) decoding 4 × 32 × 32 latents to 256² images, then transformers'
  ``SiglipVisionModel`` with so400m-patch14-384's config on the 384² resize, mean of patch tokens; on
  ``--images`` images;
- **one denoiser step**: an ``SD3Transformer2DModel`` of SiT-B/2's size (12 blocks of 768, patch 2 on
  32 × 32 latents), the unit the steps saved are counted in.

It prints samples per second for both paths, their ratio, and what abstaining at each of the paper's
scoring steps (25, 50, …, 250 of 250) saves per abstained sample in seconds of this machine.

**Abstention, measured** (``--abstain-images``): what :class:`condeval.trust.TrustAbstention` with
``drop=True`` saves in a real pipeline call, against the same call without it, in the same run. An
``AttributeDiffusionPipeline`` of the paper's sizes (the SiT-B/2-sized denoiser, Stable Diffusion's VAE)
draws ``--abstain-images`` images in ``--abstain-steps`` steps; at step ``--abstain-at`` (0-based) half
the samples abstain (their condition's threshold is below any trust) and leave the batch. The measured
time is set beside the one :func:`condeval.trust.translator.compute_saved`'s count predicts from the
plain call's per-step and per-decode costs.

Usage::

    python benchmarks/bench_translator.py [--samples 4096] [--images 4] [--threads 2]
        [--abstain-images 4] [--abstain-steps 10] [--abstain-at 2] [--out benchmarks/out/translator.json]
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np
import torch

from condeval.core.io import write_json
from condeval.trust import TrustScorer
from condeval.trust.translator import TranslatorNet

SIT_WIDTH, SIGLIP_WIDTH, HIDDEN = 768, 1152, 2048  # SiT-B/2 tokens, SigLIP so400m features, the paper's MLP
STEPS = 250


def _timed(function, *args, repeats: int = 1):
    function(*args)  # warm-up
    started = time.perf_counter()
    for _ in range(repeats):
        out = function(*args)
    return out, (time.perf_counter() - started) / repeats


def _translator_path(samples: int):
    """The translator and a scorer fitted in SigLIP so400m's width; (callable, its input)."""
    rng = np.random.default_rng(0)
    attributes = rng.integers(0, 2, (samples, 4))
    real = rng.standard_normal((max(samples, 4 * SIGLIP_WIDTH), SIGLIP_WIDTH)).astype(np.float32)
    scorer = TrustScorer().fit(real, rng.integers(0, 2, (len(real), 4)))
    net = TranslatorNet(SIT_WIDTH, SIGLIP_WIDTH, HIDDEN).eval()
    tokens = torch.randn(samples, SIT_WIDTH)

    @torch.no_grad()
    def score():
        return scorer.score(net(tokens).numpy(), attributes)

    return score


def _decode_encode_path(images: int):
    """SD's VAE decoder and SigLIP so400m's vision tower at their real configs; a callable on ``images`` latents."""
    from diffusers import AutoencoderKL
    from transformers import SiglipVisionConfig, SiglipVisionModel

    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        latent_channels=4,
        block_out_channels=(128, 256, 512, 512),
        layers_per_block=2,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        sample_size=256,
    ).eval()
    siglip = SiglipVisionModel(
        SiglipVisionConfig(
            hidden_size=SIGLIP_WIDTH,
            intermediate_size=4304,
            num_hidden_layers=27,
            num_attention_heads=16,
            image_size=384,
            patch_size=14,
        )
    ).eval()
    latents = torch.randn(images, 4, 32, 32)

    @torch.no_grad()
    def decode_encode():
        pixels = vae.decode(latents).sample.clamp(-1, 1)
        resized = torch.nn.functional.interpolate(pixels, size=384, mode="bilinear", antialias=True)
        return siglip(pixel_values=resized).last_hidden_state.mean(dim=1)

    return decode_encode


def _denoiser_step(images: int):
    """One step of an SD3Transformer2DModel of SiT-B/2's size on ``images`` latents."""
    from condeval.generators.text_to_image import tiny_sd3_transformer

    model = tiny_sd3_transformer(
        (4, 32, 32), layers=12, heads=12, head_dim=64, joint_attention_dim=SIT_WIDTH, pooled_projection_dim=SIT_WIDTH
    ).eval()
    latents, context = torch.randn(images, 4, 32, 32), torch.randn(images, 1, SIT_WIDTH)
    pooled, timestep = torch.randn(images, SIT_WIDTH), torch.full((images,), 500.0)

    @torch.no_grad()
    def step():
        return model(
            hidden_states=latents, timestep=timestep, encoder_hidden_states=context, pooled_projections=pooled
        ).sample

    return step


def _paper_sized_pipeline():
    """An AttributeDiffusionPipeline (one binary attribute) with SiT-B/2's denoiser size and SD's VAE config."""
    from diffusers import AutoencoderKL, FlowMatchEulerDiscreteScheduler

    from condeval.generators.attribute_to_image import AttributeDiffusionPipeline, AttributeEncoder
    from condeval.generators.text_to_image import tiny_sd3_transformer

    transformer = tiny_sd3_transformer(
        (4, 32, 32), layers=12, heads=12, head_dim=64, joint_attention_dim=SIT_WIDTH, pooled_projection_dim=SIT_WIDTH
    ).eval()
    vae = AutoencoderKL(
        in_channels=3,
        out_channels=3,
        latent_channels=4,
        block_out_channels=(128, 256, 512, 512),
        layers_per_block=2,
        down_block_types=("DownEncoderBlock2D",) * 4,
        up_block_types=("UpDecoderBlock2D",) * 4,
        sample_size=256,
    ).eval()
    encoder = AttributeEncoder(values=(2,), width=SIT_WIDTH, context_width=SIT_WIDTH).eval()
    return AttributeDiffusionPipeline(transformer, vae, FlowMatchEulerDiscreteScheduler(), encoder)


def _abstention_measured(images: int, steps: int, at: int) -> dict:
    """Seconds of a plain call and of one where half the samples abstain at step ``at`` and are dropped;
    the dropping call's seconds as compute_saved's count predicts them from the plain call's costs."""
    from condeval.trust.translator import TrajectoryTap, TrustAbstention, compute_saved

    pipe = _paper_sized_pipeline()
    pipe.set_progress_bar_config(disable=True)
    attributes = np.arange(images)[:, None] % 2  # half ask for 0, which abstains
    rng = np.random.default_rng(0)
    real = rng.standard_normal((2000, SIT_WIDTH))
    scorer = TrustScorer(names=["a"], calibration=0.0).fit(real, rng.integers(0, 2, (2000, 1)))
    thresholds = scorer.thresholds(0.95)
    thresholds = thresholds.with_columns(threshold=np.where(thresholds["a"].to_numpy() == 0, -1e9, 1e9))

    def call(callback=None):
        pipe(
            attributes,
            num_inference_steps=steps,
            output_type="pt",
            callback_on_step_end=callback,
            callback_on_step_end_tensor_inputs=("latents", "attributes"),
        )

    _, plain_s = _timed(call)
    _, step_s = _timed(_denoiser_step(images))
    callback = TrustAbstention(
        TrajectoryTap(pipe.transformer, 8, [at]), scorer, attributes, thresholds=thresholds, drop=True
    )
    _, dropped_s = _timed(call, callback)
    callback.close()
    saved = compute_saved(callback.abstained, at, steps)
    decode_s = (plain_s - steps * step_s) / images  # what the plain call spent beyond its denoiser steps, a sample
    predicted_s = plain_s - saved["steps_saved_pct"] / 100 * steps * step_s - saved["decoder_passes_saved"] * decode_s
    return {
        "images": images,
        "steps": steps,
        "at": at,
        "abstained": int(callback.abstained.sum()),
        "plain_s": plain_s,
        "dropped_s": dropped_s,
        "predicted_s": predicted_s,
        "saving": 1 - dropped_s / plain_s,
        "predicted_saving": 1 - predicted_s / plain_s,
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, default=4096)
    ap.add_argument("--images", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--abstain-images", type=int, default=4, help="0 skips the measured abstention")
    ap.add_argument("--abstain-steps", type=int, default=10)
    ap.add_argument("--abstain-at", type=int, default=2)
    ap.add_argument("--out", default="benchmarks/out/translator.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    _, translator_s = _timed(_translator_path(args.samples), repeats=3)
    _, decode_encode_s = _timed(_decode_encode_path(args.images))
    _, step_s = _timed(_denoiser_step(args.images))
    per = {
        "translator_score": translator_s / args.samples,
        "decode_encode": decode_encode_s / args.images,
        "denoiser_step": step_s / args.images,
    }
    saved = {
        str(step): {"steps_left": STEPS - step, "seconds": (STEPS - step) * per["denoiser_step"] + per["decode_encode"]}
        for step in range(25, STEPS + 1, 25)
    }
    out = {
        "cpu": platform.processor() or platform.machine(),
        "threads": args.threads,
        "torch": torch.__version__,
        "samples": args.samples,
        "images": args.images,
        "seconds_per_sample": per,
        "samples_per_s": {name: 1.0 / seconds for name, seconds in per.items()},
        "speed_up": per["decode_encode"] / per["translator_score"],
        "saved_per_abstained_sample": saved,
    }
    if args.abstain_images:
        out["abstention_measured"] = _abstention_measured(args.abstain_images, args.abstain_steps, args.abstain_at)
    write_json(out, args.out)
    rates = out["samples_per_s"]
    print(
        f"translator + score: {rates['translator_score']:,.0f} samples/s; decode + encode: "
        f"{rates['decode_encode']:.2f} samples/s ({out['speed_up']:,.0f}x); one denoiser step "
        f"{per['denoiser_step'] * 1e3:.0f} ms a sample"
    )
    for step, row in saved.items():
        print(
            f"abstaining after step {step} of {STEPS}: {row['steps_left']} steps + decode + encode = "
            f"{row['seconds']:.1f} s a sample"
        )
    if args.abstain_images:
        row = out["abstention_measured"]
        print(
            f"abstention measured: {row['abstained']} of {row['images']} samples dropped after step {row['at']} of "
            f"{row['steps']}: {row['plain_s']:.1f} s -> {row['dropped_s']:.1f} s ({100 * row['saving']:.0f}% saved; "
            f"compute_saved's count predicts {row['predicted_s']:.1f} s, {100 * row['predicted_saving']:.0f}%)"
        )
    return out


if __name__ == "__main__":
    main()
