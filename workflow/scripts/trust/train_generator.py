"""Snakemake adapter: one attribute-conditioned generator on a regime's training support (vanilla or REPA)."""

import numpy as np
import polars as pl
import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import fingerprint, read_parquet, saved_folder, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.core.training import TrainRecipe, accelerator_for_gpus, job_deadline
from condeval.encoders.patch_encoder import PatchEncoder
from condeval.generators.attribute_training import FlowSchedule, RepaAlignment, train_attribute_generator
from condeval.generators.channelwise import load_autoencoder
from condeval.trust.data import ReleaseImages, attributes_of, release_validation, training_support

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, w = snakemake.params, snakemake.wildcards
train, repa = dict(p.train), dict(p.repa)
table = read_parquet(snakemake.input.table)
held = dict(p.subset).get("held_out_pairs", 100)
support = table.filter(training_support(w.dataset, table, w.regime, held))
support = support.sample(fraction=1.0, shuffle=True, seed=p.seed)  # the first val_images validate
conditions = np.unique(attributes_of(w.dataset, support), axis=0)
log.info(
    "%s %s %s: %d support images, conditions %s",
    w.dataset,
    w.regime,
    w.variant,
    support.height,
    conditions.tolist() if conditions.shape[1] <= 4 else len(conditions),
)
if train.get("validation", "support") == "release":  # the official code's selection, held-out targets included
    validation = release_validation(table, train["val_images"], p.seed)
    asked = attributes_of(w.dataset, validation)
    outside = ~(asked[:, None, :] == conditions[None]).all(axis=2).any(axis=1)
    log.info(
        "validation: %d rows of the release's held-back split, %d in conditions outside the support",
        validation.height,
        int(outside.sum()),
    )
    support = pl.concat([validation, support])
images = ReleaseImages(w.dataset, p.root, support, p.image_size)  # read a chunk at a time into the row cache
attributes = attributes_of(w.dataset, support)
# Each attribute's table spans the values of the whole release, so any queried condition has rows.
values = attributes_of(w.dataset, table).max(axis=0) + 1
gpus = snakemake.resources.get("gpu", 0)
device = device_for_gpus(gpus) or "cpu"  # the latents and REPA targets are encoded there too
alignment = None
if repa:
    alignment = RepaAlignment(
        PatchEncoder(saved_folder(snakemake.input.extractor), device=device, **dict(p.extractor_loading)),
        coefficient=repa.get("coefficient", 0.5),
        depth=repa.get("depth", 1),
        name=repa.get("extractor", ""),
    )
vae = load_autoencoder(saved_folder(snakemake.input.autoencoder)).to(device)
recipe = TrainRecipe.from_config(
    train,
    seed=p.seed,
    accelerator=accelerator_for_gpus(gpus),
    workers=min(4, snakemake.threads - 1),
    stop_at=job_deadline(snakemake.resources.runtime, snakemake.resources.parts),
    fingerprint=fingerprint(list(snakemake.input), {"train": train, "repa": repa, "regime": w.regime, "seed": p.seed}),
)
schedule = FlowSchedule(
    condition_dropout=train["condition_dropout"],
    steps=train.get("steps"),
    warmup_steps=train.get("warmup_steps"),
    chunk_size=p.chunk_size,
)
summary = train_attribute_generator(
    images,
    attributes,
    snakemake.output.model,
    recipe,
    vae=vae,
    model={**train["transformer"], "values": values.tolist()},
    schedule=schedule,
    repa=alignment,
)
write_folder_manifest(snakemake.output.model, snakemake.output.manifest)
log.info("trained: %s", summary)
