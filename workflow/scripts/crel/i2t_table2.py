"""Snakemake adapter: Table 2 (mean rho, CReL-rho, delta and ranks per model and metric)."""

import polars as pl

from condeval.core.io import atomic_path, write_parquet
from condeval.core.logs import log_to_file
from condeval.crel.image_to_text import table2
from condeval.crel.reports.image_to_text import table2_markdown

log = log_to_file(snakemake.log[0])
scores = pl.concat([pl.read_parquet(path).drop("z_worst") for path in snakemake.input])
table = table2(scores)
write_parquet(table, snakemake.output.table)
markdown = table2_markdown(table)
with atomic_path(snakemake.output.markdown) as tmp:
    tmp.write_text(markdown + "\n")
log.info("Table 2:\n%s", markdown)
