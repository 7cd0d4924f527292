"""Snakemake adapter: one shard of real or generated RxRx1 sites written as CellProfiler's input."""

import numpy as np
import polars as pl

from condeval.core.io import atomic_directory, read_parquet, write_folder_manifest
from condeval.core.logs import log_to_file
from condeval.trust.cellprofiler import write_inputs
from condeval.trust.data import ATTRIBUTE_NAMES, read_images
from condeval.trust.morphology import generated_rows, real_rows
from condeval.trust.samples import read_samples

log = log_to_file(snakemake.log[0])
p, w, i = snakemake.params, snakemake.wildcards, snakemake.input
names = list(ATTRIBUTE_NAMES["rxrx1"])
conditions = read_parquet(i.conditions).select(names).to_numpy()
shard, shards = int(w.cp_shard), p.morphology["shards"]
if w.source == "real":
    table = real_rows(read_parquet(i.table), conditions, names, p.morphology.get("real_per_condition"))
    table = table[shard::shards]
    images = read_images("rxrx1", p.root, table.iter_rows(named=True), p.image_size)
    keys = table["site_id"].to_list()
else:
    measured = p.morphology.get("per_condition", p.per_condition)
    ids = np.concatenate([read_parquet(path, columns=["sample_id"])["sample_id"].to_numpy() for path in i.samples])
    mine = np.sort(ids[generated_rows(ids, p.per_condition, measured)])[shard::shards]  # only this shard's pixels
    manifests, images = zip(
        *(read_samples(path, names, keep=lambda s: np.isin(s, mine)) for path in i.samples), strict=True
    )
    manifest, images = pl.concat(manifests), np.concatenate([part for part in images if len(part)])
    keys = [f"{int(s):07d}" for s in manifest["sample_id"].to_numpy()]
with atomic_directory(snakemake.output.images) as folder:
    write_inputs(zip(keys, images, strict=True), folder, p.morphology["input"], p.morphology["side"])
write_folder_manifest(snakemake.output.images, snakemake.output.manifest)
log.info(
    "%s shard %d/%d: %d sites written as %s inputs at %d px",
    w.source,
    shard,
    shards,
    len(keys),
    p.morphology["input"],
    p.morphology["side"],
)
