"""Snakemake adapter: the mini RichHF-18K TFRecords, Pick-a-Pic prompts and images."""

from pathlib import Path

from condeval.core.logs import log_to_file
from condeval.crc.miniature import write_mini_rich_hf

log = log_to_file(snakemake.log[0])
p = snakemake.params
out = Path(snakemake.output.calibration).parent
paths = write_mini_rich_hf(out, dict(p.sizes), seed=p.seed, side=p.image_size)
log.info("wrote %s", {split: str(path) for split, path in paths.items()})
