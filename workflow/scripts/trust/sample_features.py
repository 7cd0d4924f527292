"""Snakemake adapter: features (mean patch tokens or CLIP embeddings) of one shard of samples (ids: sample_id)."""

import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import saved_folder
from condeval.core.logs import log_to_file
from condeval.encoders.features import image_feature_encoder, write_feature_shard
from condeval.trust.samples import read_samples

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
frame, images = read_samples(snakemake.input.samples, snakemake.params.names)
encoder = image_feature_encoder(
    saved_folder(snakemake.input.extractor), device=device_for_gpus(snakemake.resources.get("gpu", 0))
)
features = encoder.encode(images, snakemake.params.batch_size)
write_feature_shard(snakemake.output.features, frame["sample_id"].to_numpy(), features,
                    {"encoder": encoder.identity, "samples": str(snakemake.input.samples), "feature": encoder.feature})  # fmt: skip
log.info("%d x %d features of %s", *features.shape, snakemake.input.samples)
