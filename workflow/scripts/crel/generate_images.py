"""Snakemake adapter: one image per evaluation caption of one image-id shard of the items, written chunk by
chunk (a killed job resumes)."""

import torch

from condeval.core.chunks import source_signature
from condeval.core.devices import device_for_gpus
from condeval.core.io import saved_folder
from condeval.core.logs import log_to_file
from condeval.datasets.coco import evaluation_pairs, image_dir, load_captions, shard_image_ids
from condeval.generators.images import generate_image_shard
from condeval.generators.text_to_image import generate_images, image_seed, load_text_to_image, sampling_call

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, i, shard = snakemake.params, snakemake.input, int(snakemake.wildcards.shard)
pairs = evaluation_pairs(load_captions(i.captions, image_dir(i.captions))).sort("image_id")
if pairs.height < p.n_items:  # head() would draw fewer items than configured, silently
    raise ValueError(
        f"config key 'crel.text_to_image.items' asks {p.n_items} items; {i.captions} has {pairs.height} images"
    )
items = pairs.head(p.n_items)
rows = items.filter(items["image_id"].is_in(shard_image_ids(items["image_id"].to_numpy(), p.shards, shard)))
device = device_for_gpus(snakemake.resources.get("gpu", 0)) or "cpu"
pipe = load_text_to_image(saved_folder(i.model), device=device, prior=i.get("prior"), dtype=p.dtype)
call = sampling_call(p.family, dict(p.sampling), p.image_size, p.max_length)
ids, prompts = rows["image_id"].to_list(), rows["caption"].to_list()


def draw(chunk):
    return generate_images(pipe, prompts[chunk], ids[chunk], seed=p.seed, batch_size=p.batch_size, **call)


generate_image_shard(
    draw,
    ids,
    prompts,
    [image_seed(p.seed, image_id) for image_id in ids],
    snakemake.output.images,
    snakemake.output.manifest,
    chunk_size=p.chunk_size,
    fingerprint={
        "model": source_signature(i.model),
        "prior": i.get("prior") and source_signature(i.prior),
        "call": call,
        "seed": p.seed,
        "dtype": p.dtype,
    },
)
log.info("shard %d: %d images of %s (%s), e.g. %r", shard, len(ids), snakemake.wildcards.model, call, prompts[:2])
