"""Snakemake adapter: render one split of the miniature COCO world."""

from pathlib import Path

from condeval.core.logs import log_to_file
from condeval.datasets.miniworld import write_split

log = log_to_file(snakemake.log[0])
world = snakemake.params.world
split = snakemake.wildcards.split
n_images = world[f"{split}_images"]
# val ids start after every train id, as COCO's val2014 ids never repeat a train2014 id
first_id = 1 if split == "train" else world["train_images"] + 1
root = Path(snakemake.output.captions).parents[1]
path = write_split(root, split, n_images, seed=world["seed"], side=world["image_size"], first_id=first_id)
log.info("wrote %d %s images and their captions to %s", n_images, split, path)
