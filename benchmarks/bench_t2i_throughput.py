"""Benchmark E: text-to-image generation throughput, batched against a per-image loop.

Images per second of every generator of a finished run (the offline default's tiny pipelines, or
the paper's from their folders), through ``condeval.generators.text_to_image.generate_images`` at
the model's configured steps and guidance, on the CPU threads given or on CUDA: one pipeline call
per ``--batch-size`` prompts against one call per prompt (the baseline), in the same run, on the
run's own val captions after a warm-up call.

Usage::

    python benchmarks/bench_t2i_throughput.py --run-dir . [--images 100] [--device cpu|cuda] [--threads 2]
"""

from __future__ import annotations

import argparse
import platform
import time
from pathlib import Path

import torch
import yaml

from condeval.core.io import write_json
from condeval.datasets.coco import evaluation_pairs, load_captions
from condeval.generators.text_to_image import generate_images, load_text_to_image, sampling_call


def _images_per_s(pipe, prompts, batch_size: int, call: dict) -> float:
    generate_images(pipe, prompts[:2], [0, 1], seed=0, batch_size=2, progress_bar=False, **call)  # warm-up
    started = time.perf_counter()
    generate_images(pipe, prompts, list(range(len(prompts))), seed=0, batch_size=batch_size, progress_bar=False, **call)
    return len(prompts) / (time.perf_counter() - started)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", default=".", help="folder holding the run's data/ and results/")
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--images", type=int, default=100)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=100)
    ap.add_argument("--out", default="benchmarks/out/t2i_throughput.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    run = Path(args.run_dir)
    config = yaml.safe_load(Path(args.config).read_text())
    t2i = config["crel"]["text_to_image"]
    root = run / config["coco"]["root"]
    pairs = evaluation_pairs(load_captions(root / "annotations/captions_val2014.json", root / "val2014"))
    prompts = pairs.sort("image_id")["caption"].head(args.images).to_list()
    out = {
        "device": args.device,
        "threads": args.threads,
        "images": len(prompts),
        "batch_size": args.batch_size,
        "cpu": platform.processor() or platform.machine(),
        "models": {},
    }
    for name, section in t2i["models"].items():
        folder = section.get("path") or run / f"results/crel_t2i/generators/{name}"
        pipe = load_text_to_image(folder, device=args.device, prior=section.get("prior_path"))
        call = sampling_call(section["family"], dict(section["sampling"]), t2i["image_size"], t2i.get("max_length", 26))
        batched = _images_per_s(pipe, prompts, args.batch_size, call)
        alone = _images_per_s(pipe, prompts, 1, call)
        out["models"][name] = {
            "images_per_s": batched,
            "per_image_loop_images_per_s": alone,
            "speed_up": batched / alone,
            "call": call,
        }
        print(f"{name}: {batched:.1f} images/s batched, {alone:.1f} one at a time ({batched / alone:.1f}x)")
    write_json(out, args.out)
    return out


if __name__ == "__main__":
    main()
