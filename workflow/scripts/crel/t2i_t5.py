"""Snakemake adapter: distil the tiny T5 encoder from the CLIP's text tower and save_pretrained it."""

import torch
from transformers import AutoTokenizer, CLIPModel

from condeval.core.io import fingerprint, saved_folder, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.core.training import TrainRecipe, accelerator_for_gpus
from condeval.datasets.coco import coco_root
from condeval.encoders.train import coco_split
from condeval.generators.text_to_image import pipeline_tokenizer
from condeval.generators.text_to_image_training import train_t5_from_clip

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, i = snakemake.params, snakemake.input
train = dict(p.train)
_, captions = coco_split(coco_root(i.captions[0]), "train", train.get("images"))
tokenizer = pipeline_tokenizer(AutoTokenizer.from_pretrained(str(saved_folder(i.tokenizer))), p.max_length)
recipe = TrainRecipe(
    epochs=train["epochs"],
    batch_size=train["batch_size"],
    lr=train["lr"],
    held_out=200,
    seed=p.seed,
    accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)),
    fingerprint=fingerprint(
        [*i.captions, i.tokenizer, i.clip], {"train": train, "max_length": p.max_length, "seed": p.seed}
    ),
)
summary = train_t5_from_clip(
    captions,
    snakemake.output.model,
    recipe,
    clip=CLIPModel.from_pretrained(str(saved_folder(i.clip))).eval(),
    tokenizer=tokenizer,
    width=train["width"],
    layers=train["layers"],
    max_length=p.max_length,
)
write_folder_manifest(snakemake.output.model, snakemake.output.manifest)
log.info("T5 distilled: %s", summary)
