"""Snakemake adapter: a source's CellProfiler Image.csv shards merged, each site's attributes joined."""

import polars as pl

from condeval.core.io import read_parquet, write_parquet
from condeval.core.logs import log_to_file
from condeval.trust.cellprofiler import file_column, merge_image_csvs
from condeval.trust.data import ATTRIBUTE_NAMES

log = log_to_file(snakemake.log[0])
p, w, i = snakemake.params, snakemake.wildcards, snakemake.input
names = list(ATTRIBUTE_NAMES["rxrx1"])
measured = merge_image_csvs(i.tables, file_column(p.morphology["input"]))
if w.source == "real":
    sites = read_parquet(i.table).select(pl.col("site_id").alias("name"), *names)
else:
    manifests = pl.concat([read_parquet(path).select("sample_id", *names) for path in i.samples])
    sites = manifests.with_columns(name=pl.col("sample_id").cast(pl.String).str.zfill(7))
table = measured.join(sites, on="name", how="inner", validate="1:1", maintain_order="left")
if table.height != measured.height:
    raise ValueError(f"{measured.height - table.height} measured sites of {w.source} are not in its table or manifests")
write_parquet(table, snakemake.output.table)
log.info(
    "%s: %d sites, %d CellProfiler columns; nuclei per site %.2f (sd %.2f)",
    w.source,
    table.height,
    len(measured.columns),
    table["Count_Nuclei"].mean(),
    table["Count_Nuclei"].std(),
)
