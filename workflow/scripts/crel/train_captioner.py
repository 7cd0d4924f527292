"""Snakemake adapter: train a tiny BLIP or GIT captioner and save_pretrained it."""

import torch

from condeval.core.io import fingerprint, saved_folder, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.core.training import accelerator_for_gpus
from condeval.datasets.coco import coco_root
from condeval.generators.captioner_training import train_captioner

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
train = dict(p.train)
summary = train_captioner(
    coco_root(snakemake.input.captions[0]),
    saved_folder(snakemake.input.tokenizer),
    snakemake.output.model,
    architecture=train["architecture"],
    images=train["images"],
    epochs=train["epochs"],
    batch_size=train["batch_size"],
    lr=train["lr"],
    model=dict(train["model"]),
    image_size=p.image_size,
    val_images=train.get("val_images", 200),
    seed=p.seed,
    vision_from=saved_folder(snakemake.input.clip) if train.get("vision_from_clip") else None,
    freeze_vision=train.get("freeze_vision", False),
    vision_lr_scale=train.get("vision_lr_scale", 1.0),
    accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)),
    fingerprint=fingerprint(
        list(snakemake.input.captions), {"train": train, "image_size": p.image_size, "seed": p.seed}
    ),
)
write_folder_manifest(snakemake.output.model, snakemake.output.manifest)
log.info("%s trained: %s", snakemake.wildcards.model, summary)
