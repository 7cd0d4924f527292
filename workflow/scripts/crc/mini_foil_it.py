"""Snakemake adapter: the mini FOIL-it files from the COCO world's val split."""

from condeval.core.logs import log_to_file
from condeval.crc.miniature import write_mini_foil_it
from condeval.datasets.coco import coco_root

log = log_to_file(snakemake.log[0])
paths = write_mini_foil_it(
    coco_root(snakemake.input.captions),
    snakemake.output.test.rsplit("/", 1)[0],
    seed=snakemake.params.seed,
    images=snakemake.params.images,
)
log.info("wrote %s", {split: str(path) for split, path in paths.items()})
