"""Snakemake adapter: train a tiny BLIP or GIT captioner and save_pretrained it."""

import torch

from condeval.core.io import fingerprint, saved_folder, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.core.training import TrainRecipe, accelerator_for_gpus
from condeval.datasets.coco import coco_root
from condeval.generators.captioner_training import VisionInit, train_captioner

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
train = dict(p.train)
recipe = TrainRecipe.from_config(
    {"val_images": 200, **train},
    seed=p.seed,
    accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)),
    fingerprint=fingerprint(
        list(snakemake.input.captions), {"train": train, "image_size": p.image_size, "seed": p.seed}
    ),
)
vision = VisionInit(
    from_clip=saved_folder(snakemake.input.clip) if train.get("vision_from_clip") else None,
    freeze=train.get("freeze_vision", False),
    lr_scale=train.get("vision_lr_scale", 1.0),
)
summary = train_captioner(
    coco_root(snakemake.input.captions[0]),
    saved_folder(snakemake.input.tokenizer),
    snakemake.output.model,
    recipe,
    architecture=train["architecture"],
    images=train["images"],
    model={**train["model"], "image_size": p.image_size},
    vision=vision,
)
write_folder_manifest(snakemake.output.model, snakemake.output.manifest)
log.info("%s trained: %s", snakemake.wildcards.model, summary)
