"""Snakemake adapter: features (mean patch tokens or CLIP embeddings) of every real row, as one feature shard,
computed chunk by chunk (a killed job resumes; memory holds one chunk's images)."""

import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import read_parquet, saved_folder
from condeval.core.logs import log_to_file
from condeval.encoders.features import encode_feature_shard, image_feature_encoder
from condeval.trust.data import read_images

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
table = read_parquet(snakemake.input.table).with_row_index("row")
encoder = image_feature_encoder(
    saved_folder(snakemake.input.extractor),
    device=device_for_gpus(snakemake.resources.get("gpu", 0)),
    **dict(p.loading),
)


def encode(items):
    rows = table[items]
    images = read_images(snakemake.wildcards.dataset, p.root, rows.iter_rows(named=True), p.image_size)
    log.info("rows %d..%d of %d", items.start, items.stop - 1, table.height)
    return encoder.encode(images, p.batch_size)


metadata = {
    "encoder": encoder.identity,
    "image_size": p.image_size,
    "feature": encoder.feature,
    "loading": dict(p.loading),
}
features = encode_feature_shard(snakemake.output.features, table["row"].to_numpy(), encode, metadata, p.chunk_size)
log.info("%d x %d features of %s", *features.shape, snakemake.input.extractor)
