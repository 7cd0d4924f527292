"""Snakemake adapter: the mini Flickr8k-Expert and Polaris files from the COCO world's val split."""

from pathlib import Path

from condeval.core.logs import log_to_file
from condeval.crc.miniature import write_mini_judgments
from condeval.datasets.coco import coco_root

log = log_to_file(snakemake.log[0])
out = Path(snakemake.output[0]).parent
paths = write_mini_judgments(
    coco_root(snakemake.input.captions), out, n_images=snakemake.params.n_images, seed=snakemake.params.seed
)
log.info("wrote %s", {name: str(path) for name, path in paths.items()})
