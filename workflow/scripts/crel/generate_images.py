"""Snakemake adapter: one image per evaluation caption of one image-id shard of the items."""

import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import saved_folder
from condeval.core.logs import log_to_file
from condeval.datasets.coco import evaluation_pairs, image_dir, load_captions, shard_image_ids
from condeval.generators.images import write_generated_images
from condeval.generators.text_to_image import generate_images, image_seed, load_text_to_image, sampling_call

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, shard = snakemake.params, int(snakemake.wildcards.shard)
pairs = evaluation_pairs(load_captions(snakemake.input.captions, image_dir(snakemake.input.captions))).sort("image_id")
if pairs.height < p.n_items:  # head() would draw fewer items than configured, silently
    raise ValueError(f"config key 'crel.text_to_image.items' asks {p.n_items} items; {snakemake.input.captions} "
                     f"has {pairs.height} images")  # fmt: skip
items = pairs.head(p.n_items)
rows = items.filter(items["image_id"].is_in(shard_image_ids(items["image_id"].to_numpy(), p.shards, shard)))
pipe = load_text_to_image(
    saved_folder(snakemake.input.model), device=device_for_gpus(snakemake.resources.get("gpu", 0)) or "cpu"
)
call = sampling_call(p.family, dict(p.sampling), p.image_size, p.max_length)
ids, prompts = rows["image_id"].to_list(), rows["caption"].to_list()
images = generate_images(pipe, prompts, ids, seed=p.seed, batch_size=p.batch_size, **call)
write_generated_images(
    images, ids, prompts, [image_seed(p.seed, i) for i in ids], snakemake.output.images, snakemake.output.manifest
)
log.info("shard %d: %d images of %s (%s), e.g. %r", shard, len(images), snakemake.wildcards.model, call, prompts[:2])
