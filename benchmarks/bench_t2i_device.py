"""Benchmark F: the text-to-image generators on a GPU, and whether longer training draws the shapes.

Runs what ``train_t2i_generator``, ``generate_images`` and ``t2i_signal`` run, through the package,
on the device given, in three stages, writing the JSON after each:

* ``smoke``: every generator of the config (SD3, FLUX with its guidance distillation, Kandinsky's
  prior and decoder) trained for one epoch on ``--smoke-images`` train images and saved as a
  pipeline folder, so each family's training path is run on the device once.
* ``throughput``: Benchmark E (``bench_t2i_throughput.py``) on those folders: images/s batched
  against one pipeline call per prompt, in the same run.
* ``length``: one generator (default ``mini-sd3-medium``, its config unchanged but ``epochs``)
  trained for each of ``--epochs`` and read as ``t2i_signal`` reads it: CLIP retrieval and the
  requested colour and shape on the single-object items, by zero-shot CLIP and by the attribute
  probe, beside the real images and a shuffled-caption baseline. ``--train`` changes other keys of its
  train section (a wider denoiser, another learning rate) for every length. A 6 x 6 grid of single-object
  samples is saved per length. A length whose training would outrun ``--budget-s`` (scaled from the
  last one) is skipped and recorded as such. ``--scenes lone`` trains it on the single-object
  train scenes only (2,950 of the world's 12,000), the diagnostic of whether the denoiser can draw
  an outline at all when no scene asks it to bind shapes to places.

The run folder holds the trained shared components (``results/encoders/{tokenizer,clip}``,
``results/crel_t2i/{t5,autoencoders/kl,autoencoders/vq}``); the miniature COCO world is rendered
into it from the config when missing.

Usage::

    python benchmarks/bench_t2i_device.py --run-dir RUN --device cuda [--epochs 3 24 72] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import platform
import time
import traceback
from pathlib import Path

import numpy as np
import torch
import yaml

from condeval.core.io import read_json, write_json

SMOKE_EPOCHS = {"epochs": 1, "prior_epochs": 1, "distill_epochs": 1}


def _world(run: Path, config: dict) -> Path:
    """The COCO-format root of the config's miniature world, rendered into ``run`` if missing."""
    from condeval.datasets.miniworld import write_split

    coco = config["coco"]
    world, root = coco["miniworld"], run / coco["root"]
    firsts = {"train": 1, "val": world["train_images"] + 1}
    for split, first_id in firsts.items():
        if not (root / f"annotations/captions_{split}2014.json").exists():
            write_split(
                root, split, world[f"{split}_images"], seed=world["seed"], side=world["image_size"], first_id=first_id
            )
    return root


def _lone_ids(run: Path, config: dict) -> list[int]:
    """Ids of the world's train images that hold one object."""
    from condeval.generators.signal import single_objects

    scenes = read_json(run / config["coco"]["root"] / "annotations/scenes_train2014.json")
    ids = sorted(scenes, key=int)
    return [int(ids[i]) for i in single_objects([scenes[k] for k in ids])]


def _train(run: Path, config: dict, name: str, out_dir: Path, device: str, image_ids=None, **overrides) -> dict:
    """Train the config's generator ``name`` (its train section updated by ``overrides``) into ``out_dir``,
    on the train images ``image_ids`` if given."""
    from condeval.generators.text_to_image_training import SavedComponents, train_text_to_image

    t2i, encoders = config["crel"]["text_to_image"], config["encoders"]
    section, family = t2i["models"][name]["train"], t2i["models"][name]["family"]
    # an epoch count the family has no stage for (FLUX's distillation, Kandinsky's prior) is not passed
    train = {**section, **{k: v for k, v in overrides.items() if k in section or k in ("images", "val_images")}}
    components = SavedComponents(
        tokenizer_dir=run / "results/encoders/tokenizer",
        clip_dir=run / "results/encoders/clip",
        autoencoder_dir=run / f"results/crel_t2i/autoencoders/{'vq' if family == 'kandinsky' else 'kl'}",
        t5_dir=run / "results/crel_t2i/t5" if family != "kandinsky" else None,
        image_size=t2i["image_size"],
        clip_image_size=encoders["image_size"],
        max_length=t2i["max_length"],
    )
    started = time.perf_counter()
    summary = train_text_to_image(
        run / config["coco"]["root"],
        out_dir,
        family=family,
        train=train,
        components=components,
        seed=t2i["seed"],
        accelerator="gpu" if device == "cuda" else "cpu",
        image_ids=image_ids,
    )
    return {"train_s": time.perf_counter() - started, "train": train, "summary": summary}


def _smoke(run: Path, config: dict, device: str, images: int) -> dict:
    out = {}
    for name in config["crel"]["text_to_image"]["models"]:
        try:
            result = _train(
                run,
                config,
                name,
                run / f"results/crel_t2i/generators/{name}",
                device,
                images=images,
                val_images=100,
                **SMOKE_EPOCHS,
            )
            out[name] = {"ok": True, "train_s": result["train_s"]}
        except Exception:  # a failing family is the finding: record it and go on to the next
            out[name] = {"ok": False, "error": traceback.format_exc(limit=6)}
        print(name, out[name], flush=True)
    return out


class _Reader:
    """``t2i_signal``'s readers: the shared CLIP and the attribute probe fitted on single-object train images."""

    def __init__(self, run: Path, config: dict, device: str):
        from condeval.datasets.coco import evaluation_pairs, image_dir, load_captions
        from condeval.encoders.features import ClipEncoder
        from condeval.generators.signal import AttributeProbe, at_size, single_objects

        t2i = config["crel"]["text_to_image"]
        self.side, root = t2i["image_size"], run / config["coco"]["root"]
        self.clip = ClipEncoder(run / "results/encoders/clip", device=device)
        train_file = root / "annotations/captions_train2014.json"
        train = load_captions(train_file, image_dir(train_file)).unique("image_id").sort("image_id")
        train_scenes = read_json(root / "annotations/scenes_train2014.json")
        objects = [train_scenes[str(k)] for k in train["image_id"]]
        lone = single_objects(objects)[:3000]
        self.probe = AttributeProbe(self.clip).fit(
            [at_size(train["path"][k], self.side) for k in lone], [objects[k][0] for k in lone]
        )
        val_file = root / "annotations/captions_val2014.json"
        pairs = evaluation_pairs(load_captions(val_file, image_dir(val_file))).sort("image_id").head(t2i["items"])
        scenes = read_json(root / "annotations/scenes_val2014.json")
        self.ids, self.captions = pairs["image_id"].to_list(), pairs["caption"].to_list()
        self.real = [at_size(path, self.side) for path in pairs["path"]]
        self.scenes = [scenes[str(k)] for k in self.ids]

    def signal(self, pipe, call: dict, seed: int, grid: Path) -> dict:
        from condeval.generators.signal import generation_signal, single_objects
        from condeval.generators.text_to_image import generate_images

        started = time.perf_counter()
        generated = generate_images(
            pipe, self.captions, self.ids, seed=seed, batch_size=250, progress_bar=False, **call
        )
        generate_s = time.perf_counter() - started
        lone = single_objects(self.scenes, self.captions)[:36]
        requested = [f"{self.scenes[i][0]['colour']} {self.scenes[i][0]['shape']}" for i in lone]
        _save_grid([generated[i] for i in lone], requested, grid)
        signal = generation_signal(self.clip, generated, self.real, self.captions, self.scenes, probe=self.probe)
        return {"generate_s": generate_s, **signal}


def _save_grid(images, titles: list[str], path: Path) -> None:
    """A 6 x 6 grid of generated images titled with the object each was asked for."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(6, 6, figsize=(9, 10))
    for ax, image, title in zip(axes.flat, images, titles, strict=False):
        ax.imshow(np.asarray(image))
        ax.set_title(title, fontsize=7)
    for ax in axes.flat:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _length(run: Path, config: dict, device: str, args, out_dir: Path, record) -> dict:
    from condeval.generators.text_to_image import load_text_to_image, sampling_call

    t2i = config["crel"]["text_to_image"]
    section = t2i["models"][args.model]
    call = sampling_call(section["family"], dict(section["sampling"]), t2i["image_size"], t2i["max_length"])
    reader = _Reader(run, config, device)
    image_ids = _lone_ids(run, config) if args.scenes == "lone" else None
    out, deadline, last = {}, time.perf_counter() + args.budget_s, None
    for epochs in sorted(args.epochs):
        predicted = last and last[1] * epochs / last[0]
        if predicted and time.perf_counter() + predicted > deadline:
            out[str(epochs)] = {"skipped": f"training would take about {predicted:.0f} s, past --budget-s"}
            continue
        name = f"{args.model}{args.tag}{'-lone' if image_ids else ''}-e{epochs}"
        folder = run / f"length/{name}"
        result = _train(run, config, args.model, folder, device, image_ids=image_ids, epochs=epochs, **args.train)
        last = (epochs, result["train_s"])
        pipe = load_text_to_image(folder, device=device)
        result["signal"] = reader.signal(pipe, call, t2i["seed"], out_dir / f"grid_{name}.png")
        result["best_val_loss"] = result["summary"].get("best_val_loss")
        del result["summary"]
        out[str(epochs)] = result
        probe = result["signal"]["attributes_probe"]["generated"]
        print(
            f"{name}: {result['train_s']:.0f} s, probe colour {probe['colour']:.3f} shape {probe['shape']:.3f}",
            flush=True,
        )
        record(out)
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", required=True, help="folder holding results/encoders and results/crel_t2i components")
    ap.add_argument("--config", default="config/config.yaml")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument(
        "--stages", nargs="+", default=["smoke", "throughput", "length"], choices=["smoke", "throughput", "length"]
    )
    ap.add_argument("--smoke-images", type=int, default=1200)
    ap.add_argument("--throughput-images", type=int, default=64)
    ap.add_argument("--model", default="mini-sd3-medium")
    ap.add_argument("--epochs", type=int, nargs="+", default=[3, 24, 72])
    ap.add_argument(
        "--train",
        type=json.loads,
        default={},
        help='JSON of train keys the length stage changes, e.g. \'{"lr": 0.001, "transformer": {...}}\'',
    )
    ap.add_argument(
        "--scenes",
        default="all",
        choices=["all", "lone"],
        help="the length stage trains on every train scene or on the single-object ones",
    )
    ap.add_argument("--tag", default="", help="suffix of the length stage's folders and grids")
    ap.add_argument("--budget-s", type=float, default=240.0, help="training time the length stage may spend")
    ap.add_argument("--out", default="benchmarks/out/t2i_device", help="folder for t2i_device.json and the grids")
    args = ap.parse_args(argv)
    run, out_dir = Path(args.run_dir), Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    config = yaml.safe_load(Path(args.config).read_text())
    torch.manual_seed(0)
    started = time.perf_counter()
    _world(run, config)
    out = {
        "device": torch.cuda.get_device_name() if args.device == "cuda" else platform.processor(),
        "torch": torch.__version__,
        "world_s": time.perf_counter() - started,
    }

    def record(stage_out=None, stage=None):
        if stage is not None:
            out[stage] = stage_out
        write_json(out, out_dir / "t2i_device.json")

    if "smoke" in args.stages:
        record(_smoke(run, config, args.device, args.smoke_images), "smoke")
    if "throughput" in args.stages:
        import bench_t2i_throughput

        try:  # a generator whose smoke training failed has no folder to time
            record(
                bench_t2i_throughput.main(
                    [
                        "--run-dir",
                        str(run),
                        "--config",
                        args.config,
                        "--device",
                        args.device,
                        "--images",
                        str(args.throughput_images),
                        "--out",
                        str(out_dir / "t2i_throughput.json"),
                    ]
                ),
                "throughput",
            )
        except Exception:
            record({"error": traceback.format_exc(limit=4)}, "throughput")
    if "length" in args.stages:
        out["length"] = {}
        _length(run, config, args.device, args, out_dir, lambda stage_out: record(stage_out, "length"))
    return out


if __name__ == "__main__":
    main()
