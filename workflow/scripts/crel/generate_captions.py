"""Snakemake adapter: sample one caption per val image of one image-id shard, chunk by chunk (a killed job
resumes)."""

import polars as pl
import torch

from condeval.core.chunks import ChunkedWork, source_signature
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
ids, paths = rows["image_id"], rows["path"].to_list()
captioner = Captioner(
    saved_folder(snakemake.input.model),
    device=device_for_gpus(snakemake.resources.get("gpu", 0)),
    dtype=p.dtype,
    image_size=p.image_size,
)
seed = p.seed * 1_000_003 + shard
fingerprint = {
    "model": source_signature(snakemake.input.model),
    "paths": paths,
    "seed": seed,
    "dtype": p.dtype,
    "sampling": dict(p.sampling),
    "batch_size": p.batch_size,
    "image_size": p.image_size,
}


def captions_of(items):
    sampled = captioner.generate(
        paths[items], seed=seed, batch_size=p.batch_size, offset=items.start or 0, **dict(p.sampling)
    )
    return pl.DataFrame(
        {"image_id": ids[items], "caption": sampled}, schema={"image_id": ids.dtype, "caption": pl.String}
    )


work = ChunkedWork(snakemake.output[0], fingerprint, len(paths), p.chunk_size)
captions = work.run_tables(captions_of)
write_parquet(captions, snakemake.output[0])
work.clear()
log.info("shard %d: %d captions, e.g. %r", shard, captions.height, captions["caption"].head(3).to_list())
