"""Snakemake adapter: the temperature ablation, one captioner's rho and CReL-rho per sampling temperature."""

import polars as pl

from condeval.core.io import atomic_path
from condeval.core.logs import log_to_file
from condeval.crel.image_to_text import temperature_table
from condeval.crel.reports.image_to_text import temperature_markdown

log = log_to_file(snakemake.log[0])
scores = pl.concat([pl.read_parquet(path).drop("z_worst") for path in snakemake.input])
markdown = temperature_markdown(temperature_table(scores, dict(snakemake.params.temperatures)))
with atomic_path(snakemake.output[0]) as tmp:
    tmp.write_text(markdown + "\n")
log.info("temperature ablation:\n%s", markdown)
