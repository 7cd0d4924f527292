"""Snakemake adapter: features (mean patch tokens or CLIP embeddings) of every real row, as one feature shard."""

import numpy as np
import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import read_parquet, saved_folder
from condeval.core.logs import log_to_file
from condeval.encoders.features import image_feature_encoder, write_feature_shard
from condeval.trust.data import read_images

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
table = read_parquet(snakemake.input.table).with_row_index("row")
encoder = image_feature_encoder(
    saved_folder(snakemake.input.extractor), device=device_for_gpus(snakemake.resources.get("gpu", 0))
)
features = []
for chunk in table.iter_slices(4 * p.batch_size):
    images = read_images(snakemake.wildcards.dataset, p.root, chunk.iter_rows(named=True), p.image_size)
    features.append(encoder.encode(images, p.batch_size))
    log.info("%d of %d rows encoded", int(chunk["row"][-1]) + 1, table.height)
metadata = {"encoder": encoder.identity, "image_size": p.image_size, "feature": encoder.feature}
write_feature_shard(snakemake.output.features, table["row"].to_numpy(), np.concatenate(features), metadata)
log.info("%d x %d features of %s", table.height, encoder.width, snakemake.input.extractor)
