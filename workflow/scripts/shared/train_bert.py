"""Snakemake adapter: train the tiny BERT by masked-language modelling and save_pretrained it."""

import torch

from condeval.core.io import fingerprint, saved_folder, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.core.training import TrainRecipe, accelerator_for_gpus
from condeval.datasets.coco import coco_root
from condeval.encoders.train import train_bert

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
train = dict(p.train)
recipe = TrainRecipe.from_config(
    train,
    seed=p.seed,
    accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)),
    fingerprint=fingerprint(
        list(snakemake.input.captions), {"train": train, "max_length": p.max_length, "seed": p.seed}
    ),
)
summary = train_bert(
    coco_root(snakemake.input.captions[0]),
    saved_folder(snakemake.input.tokenizer),
    snakemake.output.model,
    recipe,
    images=train["images"],
    model={**train["model"], "max_length": p.max_length},
)
write_folder_manifest(snakemake.output.model, snakemake.output.manifest)
log.info("BERT trained: %s", summary)
