"""Snakemake adapter: train the tiny DINOv2 on the mini-world's train split and save_pretrained it."""

import torch

from condeval.core.io import fingerprint, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.core.training import TrainRecipe, accelerator_for_gpus
from condeval.datasets.coco import coco_root
from condeval.encoders.dino import train_dino

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
train = dict(p.train)
recipe = TrainRecipe.from_config(
    train,
    seed=p.seed,
    accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)),
    fingerprint=fingerprint(
        list(snakemake.input.captions), {"train": train, "image_size": p.image_size, "seed": p.seed}
    ),
)
summary = train_dino(
    coco_root(snakemake.input.captions[0]),
    snakemake.output.model,
    recipe,
    images=train["images"],
    model={**train["model"], "image_size": p.image_size},
    temperature=train.get("temperature", 0.1),
)
write_folder_manifest(snakemake.output.model, snakemake.output.manifest)
log.info("DINOv2 trained: %s", summary)
