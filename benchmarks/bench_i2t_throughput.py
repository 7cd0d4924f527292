"""Benchmark C: feature extraction and caption generation throughput of the image-to-text track.

Items per second of every encoder and captioner of a finished run (the offline default's tiny
models, or the paper's from their folders), on the CPU threads given or on CUDA, timed on the
run's own val images after one warm-up batch.

Usage::

    python benchmarks/bench_i2t_throughput.py --run-dir . [--images 1000] [--device cpu|cuda] [--threads 2]
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
from condeval.encoders.features import BertEncoder, ClipEncoder
from condeval.generators.captioners import Captioner


def _rate(call, items: list, batch_size: int) -> float:
    call(items[:batch_size])  # warm-up
    started = time.perf_counter()
    call(items)
    return len(items) / (time.perf_counter() - started)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", default=".", help="folder holding the run's data/ and results/")
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--images", type=int, default=1000)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--out", default="benchmarks/out/i2t_throughput.json")
    args = ap.parse_args(argv)
    torch.set_num_threads(args.threads)
    run = Path(args.run_dir)
    config = yaml.safe_load(Path(args.config).read_text())
    root = run / config["coco"]["root"]
    pairs = evaluation_pairs(load_captions(root / "annotations/captions_val2014.json", root / "val2014")).head(
        args.images
    )
    paths, texts = pairs["path"].to_list(), pairs["caption"].to_list()
    device = args.device
    clip = ClipEncoder(run / "results/encoders/clip", device=device)
    bert = BertEncoder(run / "results/encoders/bert", device=device)
    rates = {
        "clip_images_per_s": _rate(
            lambda x: clip.image_features(x, batch_size=args.batch_size), paths, args.batch_size
        ),
        "clip_texts_per_s": _rate(lambda x: clip.text_features(x, batch_size=args.batch_size), texts, args.batch_size),
        "bert_texts_per_s": _rate(lambda x: bert.text_features(x, batch_size=args.batch_size), texts, args.batch_size),
    }
    i2t = config["crel"]["image_to_text"]
    for name, section in i2t["models"].items():
        folder = section.get("path", f"results/crel_i2t/captioners/{name}")
        captioner = Captioner(run / folder, device=device)
        sampling = {
            **i2t["sampling"],
            "temperature": section.get("temperature", i2t["sampling"].get("temperature", 1.0)),
        }
        rates[f"{name}_captions_per_s"] = _rate(
            lambda x, captioner=captioner, sampling=sampling: captioner.generate(
                x, seed=0, batch_size=args.batch_size, **sampling
            ),
            paths,
            args.batch_size,
        )
    out = {
        "images": len(paths),
        "device": device,
        "threads": args.threads,
        "cpu": platform.processor() or platform.machine(),
        **rates,
    }
    write_json(out, args.out)
    for key, value in rates.items():
        print(f"{key:32s} {value:10.1f}")
    return out


if __name__ == "__main__":
    main()
