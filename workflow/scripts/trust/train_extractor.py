"""Snakemake adapter: train a tiny DINOv3 or SigLIP vision tower on renders of the dataset's miniature world."""

import torch

from condeval.core.io import fingerprint, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.core.training import accelerator_for_gpus
from condeval.encoders.patch_features import train_patch_encoder_on_world

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, dataset = snakemake.params, snakemake.wildcards.dataset
train, world = dict(p.train), dict(p.world)
# Instances are drawn from the world's own distribution (its renderer, with the world's siRNA effects).
cells = {"world_seed": world["seed"], "sirna_ids": list(world["sirna_ids"])} if dataset == "rxrx1" else {}
summary = train_patch_encoder_on_world(
    "faces" if dataset == "celeba" else "cells",
    snakemake.output.model,
    kind=snakemake.wildcards.extractor,
    instances=train["instances"],
    side=p.image_size,
    model=dict(train["model"]),
    epochs=train["epochs"],
    batch_size=train["batch_size"],
    lr=train["lr"],
    val_instances=train["val_instances"],
    seed=p.seed,
    temperature=train["temperature"],
    patience=train.get("patience"),
    accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)),
    fingerprint=fingerprint(
        list(snakemake.input), {"train": train, "world": world, "side": p.image_size, "seed": p.seed}
    ),
    **cells,
)
write_folder_manifest(snakemake.output.model, snakemake.output.manifest)
log.info("%s trained on %s renders: %s", snakemake.wildcards.extractor, dataset, summary)
