"""Benchmark T2: the trust track's GPU paths (generator training, REPA targets, sampling) through the package.

Runs what ``trust_train_generator`` and ``trust_generate`` run, on the device they are given, at one of
two shapes:

* ``offline``: the offline default's CelebA generator (32-pixel images, a two-block
  ``SD3Transformer2DModel`` of width 64 on 4 x 16 x 16 latents, the tiny DINOv3 for REPA), 64 samples
  for each of 16 conditions at 20 steps.
* ``paper``: the paper's shapes (Section 5, Appendix I): 256-pixel images through an autoencoder of
  sd-vae-ft-mse's architecture into 4 x 32 x 32 latents, the SiT-B/2-shaped denoiser (12 blocks,
  12 heads of 64, patch 2: 256 tokens), REPA at block 8 against a DINOv3 ViT-L/16's 256 patch tokens
  (width 1,024), 100 samples of one condition at 250 steps (RxRx1's per-condition count; CelebA's
  1,000 scale linearly).

Weights are freshly initialised and images are uniform noise: the cost of a step does not depend on
either. Wall times include Lightning's set-up and checkpointing, as a workflow job pays them.

Usage::

    python benchmarks/bench_trust_device.py --scale paper --device cuda [--out benchmarks/out/trust_device.json]
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from condeval.core.io import write_json
from condeval.core.training import TrainRecipe
from condeval.encoders.patch_encoder import PatchEncoder
from condeval.generators.attribute_to_image import AttributeDiffusionPipeline
from condeval.generators.attribute_training import RepaAlignment, train_attribute_generator
from condeval.generators.autoencoders import tiny_autoencoder_kl
from condeval.trust.samples import SamplingSettings, generate_samples

SHAPES = {
    "offline": dict(
        image=32,
        images=1000,
        val=50,
        batch=32,
        epochs=2,
        layers=2,
        heads=4,
        head_dim=16,
        repa_depth=1,
        samples=64,
        conditions=16,
        steps=20,
        sample_batch=128,
    ),
    "paper": dict(
        image=256,
        images=2048,
        val=64,
        batch=256,
        epochs=2,
        layers=12,
        heads=12,
        head_dim=64,
        repa_depth=8,
        samples=100,
        conditions=1,
        steps=250,
        sample_batch=100,
    ),
}


def _autoencoder(scale: str, image: int):
    if scale == "offline":
        return tiny_autoencoder_kl(image, channels=(32, 64))
    from diffusers import AutoencoderKL

    blocks = 4  # sd-vae-ft-mse: 128, 256, 512, 512 channels, two ResNet layers a block, 8x down
    return AutoencoderKL(
        block_out_channels=(128, 256, 512, 512),
        layers_per_block=2,
        latent_channels=4,
        down_block_types=("DownEncoderBlock2D",) * blocks,
        up_block_types=("UpDecoderBlock2D",) * blocks,
        sample_size=image,
        scaling_factor=0.18215,
    )


def _extractor_folder(scale: str, image: int, folder: Path) -> Path:
    from transformers import DINOv3ViTConfig, DINOv3ViTModel

    if scale == "offline":
        config = DINOv3ViTConfig(
            image_size=image,
            patch_size=8,
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            intermediate_size=128,
            num_register_tokens=0,
        )
    else:  # ViT-L/16 as facebook/dinov3-vitl16-pretrain-lvd1689m
        config = DINOv3ViTConfig(
            image_size=image,
            patch_size=16,
            hidden_size=1024,
            num_hidden_layers=24,
            num_attention_heads=16,
            intermediate_size=4096,
            num_register_tokens=4,
        )
    DINOv3ViTModel(config).save_pretrained(folder)
    return folder


def _synchronised(device: str):
    if device == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", choices=sorted(SHAPES), default="offline")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--variants", nargs="+", default=["vanilla", "repa"], choices=["vanilla", "repa"])
    ap.add_argument("--out", default="benchmarks/out/trust_device.json")
    args = ap.parse_args()
    shape = SHAPES[args.scale]
    rng = np.random.default_rng(0)
    side = shape["image"]
    images = rng.integers(0, 256, size=(shape["images"] + shape["val"], 3, side, side), dtype=np.uint8)
    attributes = rng.integers(0, 2, size=(len(images), 4))
    vae = _autoencoder(args.scale, side).to(args.device)
    accelerator = "gpu" if args.device == "cuda" else "cpu"
    out = {
        "scale": args.scale,
        "shape": shape,
        "device": args.device,
        "torch": torch.__version__,
        "gpu": torch.cuda.get_device_name() if args.device == "cuda" else None,
        "cpus": torch.get_num_threads(),
        "machine": platform.platform(),
        "variants": {},
    }
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        extractor = PatchEncoder(_extractor_folder(args.scale, side, tmp / "dinov3"), device=args.device)
        start = _synchronised(args.device)
        extractor.tokens(images[:256], batch_size=64)
        out["repa_tokens_per_s"] = 256 / (_synchronised(args.device) - start)
        for variant in args.variants:
            start = _synchronised(args.device)
            summary = train_attribute_generator(
                images,
                attributes,
                tmp / variant,
                TrainRecipe(
                    epochs=shape["epochs"],
                    batch_size=shape["batch"],
                    lr=1e-4,
                    held_out=shape["val"],
                    seed=0,
                    accelerator=accelerator,
                ),
                vae=vae,
                model=dict(
                    values=[2, 2, 2, 2], layers=shape["layers"], heads=shape["heads"], head_dim=shape["head_dim"]
                ),
                repa=RepaAlignment(extractor, depth=shape["repa_depth"]) if variant == "repa" else None,
            )
            trained = _synchronised(args.device) - start
            pipe = AttributeDiffusionPipeline.from_pretrained(str(tmp / variant)).to(args.device)
            pipe.set_progress_bar_config(disable=True)
            conditions = rng.integers(0, 2, size=(shape["conditions"], 4))
            start = _synchronised(args.device)
            sampling = SamplingSettings(
                per_condition=shape["samples"],
                num_inference_steps=shape["steps"],
                seed=0,
                batch_size=shape["sample_batch"],
            )
            drawn, *_ = generate_samples(pipe, conditions, sampling)
            sampled = _synchronised(args.device) - start
            if not np.isfinite(drawn.astype(np.float64)).all() or drawn.shape[0] != shape["samples"] * len(conditions):
                raise RuntimeError(f"{variant}: generation returned {drawn.shape} or non-finite pixels")
            out["variants"][variant] = {
                "train_s": trained,
                "train_images_per_s": shape["images"] * shape["epochs"] / trained,
                "fit_wall_s": summary["wall_time_s"],
                "epochs_run": summary["epochs_run"],
                "mean_epoch_s": summary["mean_epoch_time_s"],
                "peak_cuda_mib": summary["peak_cuda_mib"],
                "sample_s": sampled,
                "samples_per_s": len(drawn) / sampled,
                "parameters": sum(p.numel() for p in pipe.transformer.parameters()),
            }
            print(variant, out["variants"][variant], flush=True)
    if args.device == "cuda":
        out["peak_gpu_memory_gib"] = torch.cuda.max_memory_allocated() / 2**30
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    write_json(out, args.out)
    print(out)


if __name__ == "__main__":
    main()
