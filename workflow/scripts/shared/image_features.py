"""Snakemake adapter: image features of one image-id shard of the val split, or of one shard of
generated images (a registered image source's manifest), in every configured image encoder's space
(CLIP, and DINOv2 where text-to-image reads it): one job per shard, one file per encoder."""

import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import saved_folder
from condeval.core.logs import log_to_file
from condeval.datasets.coco import evaluation_pairs, image_dir, load_captions, shard_image_ids
from condeval.encoders.features import encode_feature_shard, image_encoder
from condeval.generators.images import read_image_manifest

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, w = snakemake.params, snakemake.wildcards
shard = int(w.shard)
if "generated" in snakemake.input.keys():
    ids, paths = read_image_manifest(snakemake.input.generated)
    described = f"generated images ({snakemake.input.generated})"
else:
    pairs = evaluation_pairs(load_captions(snakemake.input.captions, image_dir(snakemake.input.captions)))
    rows = pairs.filter(pairs["image_id"].is_in(shard_image_ids(pairs["image_id"].to_numpy(), p.shards, shard)))
    ids, paths = rows["image_id"].to_numpy(), rows["path"].to_list()
    described = "val images"
device = device_for_gpus(snakemake.resources.get("gpu", 0))
for name, folder, output in zip(p.encoders, snakemake.input.encoders, snakemake.output, strict=True):
    encoder = image_encoder(name, saved_folder(folder), device=device, dtype=p.dtypes[name])
    metadata = {
        "encoder": encoder.identity,
        "input": described,
        "preprocessing": encoder.preprocessing,
        "shard": [shard, p.shards],
        "dtype": p.dtypes[name],
    }
    features = encode_feature_shard(
        output,
        ids,
        lambda items, encoder=encoder: encoder.image_features(paths[items], p.batch_size),
        metadata,
        p.chunk_size,
    )
    log.info("shard %d: %d %s features of width %d (%s)", shard, features.shape[0], name, features.shape[1], described)
