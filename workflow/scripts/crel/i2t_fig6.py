"""Snakemake adapter: Fig. 6, CReL-rho against num_z0."""
import polars as pl

from condeval.core.io import atomic_path
from condeval.core.logs import log_to_file
from condeval.crel.reports.image_to_text import plot_num_z0

log = log_to_file(snakemake.log[0])
with atomic_path(snakemake.output[0]) as tmp:
    plot_num_z0(pl.concat([pl.read_parquet(path) for path in snakemake.input]), tmp)
