"""Snakemake adapter: sample one caption per val image of one image-id shard."""

import polars as pl
import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import saved_folder, write_parquet
from condeval.core.logs import log_to_file
from condeval.datasets.coco import evaluation_pairs, image_dir, load_captions, shard_image_ids
from condeval.generators.captioners import Captioner

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
shard = int(snakemake.wildcards.shard)
pairs = evaluation_pairs(load_captions(snakemake.input.captions, image_dir(snakemake.input.captions)))
rows = pairs.filter(pairs["image_id"].is_in(shard_image_ids(pairs["image_id"].to_numpy(), p.shards, shard)))
captioner = Captioner(saved_folder(snakemake.input.model), device=device_for_gpus(snakemake.resources.get("gpu", 0)))
captions = captioner.generate(
    rows["path"].to_list(), seed=p.seed * 1_000_003 + shard, batch_size=p.batch_size, **dict(p.sampling)
)
write_parquet(pl.DataFrame({"image_id": rows["image_id"], "caption": captions}), snakemake.output[0])
log.info("shard %d: %d captions, e.g. %r", shard, len(captions), captions[:3])
