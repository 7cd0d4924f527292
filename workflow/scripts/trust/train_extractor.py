"""Snakemake adapter: train a tiny DINOv3 or SigLIP vision tower on renders of the dataset's miniature world."""

import torch

from condeval.core.io import fingerprint, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.core.training import TrainRecipe, accelerator_for_gpus
from condeval.encoders.patch_features import PatchObjective, WorldSample, train_patch_encoder_on_world

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, dataset = snakemake.params, snakemake.wildcards.dataset
train, world = dict(p.train), dict(p.world)
# Instances are drawn from the world's own distribution (its renderer, with the world's siRNA effects).
cells = {"world_seed": world["seed"], "sirna_ids": list(world["sirna_ids"])} if dataset == "rxrx1" else {}
sample = WorldSample("faces" if dataset == "celeba" else "cells", train["instances"], p.image_size, **cells)
recipe = TrainRecipe.from_config(
    train,
    seed=p.seed,
    held_out_key="val_instances",
    accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)),
    fingerprint=fingerprint(
        list(snakemake.input), {"train": train, "world": world, "side": p.image_size, "seed": p.seed}
    ),
)
summary = train_patch_encoder_on_world(
    sample,
    snakemake.output.model,
    recipe,
    kind=snakemake.wildcards.extractor,
    model=dict(train["model"]),
    objective=PatchObjective(temperature=train["temperature"]),
)
write_folder_manifest(snakemake.output.model, snakemake.output.manifest)
log.info("%s trained on %s renders: %s", snakemake.wildcards.extractor, dataset, summary)
