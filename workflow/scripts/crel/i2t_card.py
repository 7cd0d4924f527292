"""Snakemake adapter: one model's reliability card."""

import polars as pl

from condeval.core.io import atomic_path
from condeval.core.logs import log_to_file
from condeval.crel.reports.image_to_text import plot_card

log = log_to_file(snakemake.log[0])
scores = pl.concat([pl.read_parquet(path).drop("z_worst") for path in snakemake.input.scores])
with atomic_path(snakemake.output[0]) as tmp:
    plot_card(
        snakemake.wildcards.model, pl.read_parquet(snakemake.input.table), scores, float(snakemake.wildcards.alpha), tmp
    )
log.info(
    "reliability card of %s at alpha %s: %d test scores -> %s",
    snakemake.wildcards.model,
    snakemake.wildcards.alpha,
    scores.filter(pl.col("model") == snakemake.wildcards.model).height,
    snakemake.output[0],
)
