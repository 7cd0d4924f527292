"""Snakemake adapter: train a tiny DINOv3 or SigLIP vision tower on renders of the dataset's miniature world."""

import torch

from condeval.core.io import fingerprint, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.core.training import accelerator_for_gpus
from condeval.encoders.patch_features import train_world_extractor

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
train, world = dict(p.train), dict(p.world)
settings = {"train": train, "world": world, "image_size": p.image_size, "seed": p.seed}
summary = train_world_extractor(
    snakemake.wildcards.dataset, world, snakemake.output.model, kind=snakemake.wildcards.extractor,
    model=dict(train["model"]), instances=train["instances"], epochs=train["epochs"], batch_size=train["batch_size"],
    lr=train["lr"], val_instances=train["val_instances"], temperature=train["temperature"], side=p.image_size,
    seed=p.seed, accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)),
    fingerprint=fingerprint(list(snakemake.input), settings),
)  # fmt: skip
write_folder_manifest(snakemake.output.model, snakemake.output.manifest)
log.info("%s trained on %s renders: %s", snakemake.wildcards.extractor, snakemake.wildcards.dataset, summary)
