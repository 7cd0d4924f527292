"""Snakemake adapter: train one mini text-to-image generator and save its whole pipeline."""

import torch

from condeval.core.io import fingerprint, saved_folder, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.core.training import accelerator_for_gpus
from condeval.datasets.coco import coco_root
from condeval.generators.text_to_image_training import SavedComponents, train_text_to_image

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, i = snakemake.params, snakemake.input
train = dict(p.train)
family = train.pop("family")
components = SavedComponents(
    tokenizer_dir=saved_folder(i.tokenizer),
    clip_dir=saved_folder(i.clip),
    autoencoder_dir=saved_folder(i.autoencoder),
    t5_dir=saved_folder(i.t5) if "t5" in i.keys() else None,
    image_size=p.image_size,
    clip_image_size=p.clip_image_size,
    max_length=p.max_length,
)
summary = train_text_to_image(
    coco_root(i.captions[0]),
    snakemake.output.model,
    family=family,
    train=train,
    components=components,
    seed=p.seed,
    accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)),
    fingerprint=fingerprint(
        [*i.captions, i.tokenizer, i.clip, i.autoencoder, *([i.t5] if "t5" in i.keys() else [])],
        {"train": dict(p.train), "image_size": p.image_size, "max_length": p.max_length, "seed": p.seed},
    ),
)
write_folder_manifest(snakemake.output.model, snakemake.output.manifest)
log.info("%s (%s) trained: %s", snakemake.wildcards.model, family, summary)
