"""Snakemake adapter: Fig. 6, CReL-rho against num_z0 (standard errors; Table 2's num_z0 marked)."""

import polars as pl

from condeval.core.io import atomic_path
from condeval.core.logs import log_to_file
from condeval.crel.reports.image_to_text import plot_num_z0

log = log_to_file(snakemake.log[0])
curve = pl.concat([pl.read_parquet(path) for path in snakemake.input])
with atomic_path(snakemake.output[0]) as tmp:
    plot_num_z0(curve, tmp, num_z0=snakemake.params.num_z0)
log.info("num_z0 curve:\n%s", curve)
