"""Snakemake adapter: one shard of samples in every space it is scored in (ids: sample_id), read once."""

import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import atomic_directory, saved_folder, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.encoders.features import image_feature_encoder, write_feature_shard
from condeval.trust.samples import read_samples

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
frame, images = read_samples(snakemake.input.samples, snakemake.params.names)
device = device_for_gpus(snakemake.resources.get("gpu", 0))
with atomic_directory(snakemake.output.features) as folder:
    for extractor in snakemake.params.extractors:
        loading = dict(snakemake.params.loading[extractor])
        encoder = image_feature_encoder(saved_folder(snakemake.input[extractor]), device=device, **loading)
        features = encoder.encode(images, snakemake.params.batch_size)
        write_feature_shard(folder / f"{extractor}.safetensors", frame["sample_id"].to_numpy(), features,
                            {"encoder": encoder.identity, "samples": str(snakemake.input.samples),
                             "feature": encoder.feature})  # fmt: skip
        log.info("%s: %d x %d features of %s", extractor, *features.shape, snakemake.input.samples)
write_folder_manifest(snakemake.output.features, snakemake.output.manifest)
