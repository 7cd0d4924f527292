"""Snakemake adapter: features of one shard of captions (reference or sampled) in every configured
text encoder's space (CLIP-text, and BERT where image-to-text reads it): one job per shard, one file
per encoder."""

import polars as pl
import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import saved_folder
from condeval.core.logs import log_to_file
from condeval.datasets.coco import evaluation_pairs, load_captions, shard_image_ids
from condeval.encoders.features import BertEncoder, ClipEncoder, encode_feature_shard

TEXT_ENCODERS = {"clip": ClipEncoder, "bert": BertEncoder}

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, w = snakemake.params, snakemake.wildcards
device = device_for_gpus(snakemake.resources.get("gpu", 0))
shard = int(w.shard)
if "generated" in snakemake.input.keys():
    rows = pl.read_parquet(snakemake.input.generated)
else:
    pairs = evaluation_pairs(load_captions(snakemake.input.captions))
    rows = pairs.filter(pairs["image_id"].is_in(shard_image_ids(pairs["image_id"].to_numpy(), p.shards, shard)))
captions = rows["caption"].to_list()
for name, folder, output in zip(p.encoders, snakemake.input.encoders, snakemake.output, strict=True):
    # an unset max_length keeps the encoder's own default (BERT: the paper's 50; CLIP: its tokenizer's)
    length = {"max_length": p.max_length[name]} if p.max_length[name] else {}
    encoder = TEXT_ENCODERS[name](saved_folder(folder), device=device, dtype=p.dtypes[name], **length)
    metadata = {
        "encoder": encoder.identity,
        "input": w.source,
        "preprocessing": encoder.preprocessing,
        "shard": [shard, p.shards],
        "dtype": p.dtypes[name],
    }
    features = encode_feature_shard(
        output,
        rows["image_id"].to_numpy(),
        lambda items, encoder=encoder: encoder.text_features(captions[items], p.batch_size),
        metadata,
        p.chunk_size,
    )
    log.info("shard %d of %s: %d %s features of width %d", shard, w.source, features.shape[0], name, features.shape[1])
