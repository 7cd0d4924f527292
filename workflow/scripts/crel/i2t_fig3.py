"""Snakemake adapter: Fig. 3, violins of rho per model and metric."""

import polars as pl

from condeval.core.io import atomic_path
from condeval.core.logs import log_to_file
from condeval.crel.reports.image_to_text import plot_violins

log = log_to_file(snakemake.log[0])
scores = pl.concat([pl.read_parquet(path).drop("z_worst") for path in snakemake.input.scores])
with atomic_path(snakemake.output[0]) as tmp:
    plot_violins(scores, pl.read_parquet(snakemake.input.table), tmp)
log.info(
    "Fig. 3: violins of %d test scores (%d models x %d metrics) -> %s",
    scores.height,
    scores["model"].n_unique(),
    scores["metric"].n_unique(),
    snakemake.output[0],
)
