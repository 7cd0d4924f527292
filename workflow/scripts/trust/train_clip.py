"""Snakemake adapter: train the tiny face CLIP (Appendix J's alignment scorer) on renders of the face world."""

import torch

from condeval.core.io import fingerprint, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.core.training import TrainRecipe, accelerator_for_gpus
from condeval.encoders.face_clip import train_face_clip

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, train = snakemake.params, dict(snakemake.params.train)
recipe = TrainRecipe.from_config(
    train,
    seed=p.seed,
    held_out_key="val_instances",
    accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)),
    fingerprint=fingerprint([], {"train": train, "side": p.image_size, "seed": p.seed}),
)
summary = train_face_clip(
    snakemake.output.model,
    recipe,
    instances=train["instances"],
    model={**train["model"], "image_size": p.image_size},
    hard_weight=train["hard_weight"],
)
write_folder_manifest(snakemake.output.model, snakemake.output.manifest)
log.info("face CLIP trained on %d renders: %s", train["instances"], summary)
