"""Snakemake adapter: train the tiny CLIP on the mini-world's train split and save_pretrained it."""

import torch

from condeval.core.io import fingerprint, saved_folder, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.core.training import TrainRecipe, accelerator_for_gpus
from condeval.datasets.coco import coco_root
from condeval.encoders.train import ClipObjective, train_clip

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
train = dict(p.train)
recipe = TrainRecipe.from_config(
    train,
    seed=p.seed,
    accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)),
    fingerprint=fingerprint(
        list(snakemake.input.captions),
        {"train": train, "image_size": p.image_size, "seed": p.seed, "novel_shapes": list(p.novel_shapes)},
    ),
)
objective = ClipObjective(
    hard_weight=train.get("hard_weight", 1.0),
    foils=train.get("foils", 1),
    max_logit_scale=train.get("max_logit_scale", 100.0),
)
summary = train_clip(
    coco_root(snakemake.input.captions[0]),
    saved_folder(snakemake.input.tokenizer),
    snakemake.output.model,
    recipe,
    images=train["images"],
    model={**train["model"], "image_size": p.image_size},
    objective=objective,
    exclude_shapes=list(p.novel_shapes),
)
write_folder_manifest(snakemake.output.model, snakemake.output.manifest)
log.info("CLIP trained: %s", summary)
