"""Snakemake adapter: the AutoencoderKL of a dataset's generators, trained on its train-split images."""

import torch

from condeval.core.io import fingerprint, read_parquet, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.core.training import TrainRecipe, accelerator_for_gpus
from condeval.encoders.patch_features import pixel_values
from condeval.generators.autoencoders import train_autoencoder
from condeval.trust.data import read_images

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, dataset = snakemake.params, snakemake.wildcards.dataset
train = dict(p.train)
table = read_parquet(snakemake.input.table)
rows = table.filter(table["split"] == "train").sample(fraction=1.0, shuffle=True, seed=p.seed)
images = read_images(dataset, p.root, rows.iter_rows(named=True), p.image_size)
model = {**dict(train["model"]), "image_channels": images.shape[1]}
recipe = TrainRecipe.from_config(
    train,
    seed=p.seed,
    accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)),
    fingerprint=fingerprint([snakemake.input.table], {"train": train, "image_size": p.image_size, "seed": p.seed}),
)
summary = train_autoencoder(
    pixel_values(images).numpy(), snakemake.output.model, recipe, kind="kl", model=model, crop=train["crop"]
)
write_folder_manifest(snakemake.output.model, snakemake.output.manifest)
log.info("%s autoencoder on %d train images: %s", dataset, len(images), summary)
