"""Snakemake adapter: train the text-to-image track's latent autoencoder (kl or vq) and save_pretrained it."""

import torch

from condeval.core.io import fingerprint, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.core.training import TrainRecipe, accelerator_for_gpus
from condeval.datasets.coco import coco_root
from condeval.encoders.train import coco_split
from condeval.generators.autoencoders import train_autoencoder
from condeval.generators.text_to_image_training import world_images

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, kind = snakemake.params, snakemake.wildcards.kind
train = dict(p.train)
frame, _ = coco_split(coco_root(snakemake.input.captions[0]), "train", train["images"])
recipe = TrainRecipe.from_config(
    {"val_images": 256, **train},
    seed=p.seed,
    accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)),
    fingerprint=fingerprint(
        list(snakemake.input.captions), {"train": train, "kind": kind, "image_size": p.image_size, "seed": p.seed}
    ),
)
summary = train_autoencoder(
    world_images(frame["path"].to_list(), p.image_size),
    snakemake.output.model,
    recipe,
    kind=kind,
    model=dict(train["model"]),
    crop=train.get("crop"),
)
write_folder_manifest(snakemake.output.model, snakemake.output.manifest)
log.info("%s autoencoder trained: %s", kind, summary)
