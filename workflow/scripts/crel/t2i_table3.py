"""Snakemake adapter: Table 3 (mean rho, CReL-rho, delta and ranks per text-to-image model and metric)."""

import polars as pl

from condeval.core.io import atomic_path, write_parquet
from condeval.core.logs import log_to_file
from condeval.crel import paper
from condeval.crel.reports.image_to_text import table2_markdown
from condeval.crel.text_to_image import table3

log = log_to_file(snakemake.log[0])
scores = pl.concat([pl.read_parquet(path).drop("z_worst") for path in snakemake.input])
table = table3(scores)
write_parquet(table, snakemake.output.table)
markdown = table2_markdown(table, published=paper.table3())
with atomic_path(snakemake.output.markdown) as tmp:
    tmp.write_text(markdown + "\n")
log.info("Table 3:\n%s", markdown)
