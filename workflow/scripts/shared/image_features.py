"""Snakemake adapter: CLIP image features of one image-id shard of the val split."""

import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import saved_folder
from condeval.core.logs import log_to_file
from condeval.datasets.coco import evaluation_pairs, image_dir, load_captions, shard_image_ids
from condeval.encoders.features import ClipEncoder, write_feature_shard

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
pairs = evaluation_pairs(load_captions(snakemake.input.captions, image_dir(snakemake.input.captions)))
shard = int(snakemake.wildcards.shard)
rows = pairs.filter(pairs["image_id"].is_in(shard_image_ids(pairs["image_id"].to_numpy(), p.shards, shard)))
encoder = ClipEncoder(saved_folder(snakemake.input.encoder), device=device_for_gpus(snakemake.resources.get("gpu", 0)))
features = encoder.image_features(rows["path"].to_list(), batch_size=p.batch_size)
metadata = {
    "encoder": encoder.identity,
    "input": "val images",
    "preprocessing": encoder.preprocessing,
    "shard": [shard, p.shards],
}
write_feature_shard(snakemake.output[0], rows["image_id"].to_numpy(), features, metadata)
log.info("shard %d: %d image features of width %d", shard, *features.shape)
