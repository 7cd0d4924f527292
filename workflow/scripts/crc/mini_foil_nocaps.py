"""Snakemake adapter: the mini FOIL-nocaps records and images (in, near and out domains)."""

from pathlib import Path

from condeval.core.logs import log_to_file
from condeval.crc.miniature import write_mini_foil_nocaps

log = log_to_file(snakemake.log[0])
p = snakemake.params
path = write_mini_foil_nocaps(
    Path(snakemake.output.annotations).parent, dict(p.sizes), list(p.novel_shapes), seed=p.seed, side=p.image_size
)
log.info("wrote %s (novel shapes %s)", path, list(p.novel_shapes))
