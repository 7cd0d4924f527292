"""Snakemake adapter: Fig. 7, per-condition mean trust and KID against the Hamming distance to the support."""

import numpy as np
import polars as pl

from condeval.core.io import atomic_path, read_parquet, write_parquet
from condeval.core.logs import log_to_file
from condeval.trust.data import ATTRIBUTE_NAMES, attributes_of, training_support
from condeval.trust.evaluate import graded_shift
from condeval.trust.report import graded_shift_markdown, plot_graded_shift

log = log_to_file(snakemake.log[0])
p, w = snakemake.params, snakemake.wildcards
names = list(ATTRIBUTE_NAMES[w.dataset])
table = read_parquet(snakemake.input.table)
support_rows = training_support(w.dataset, table, w.regime, dict(p.subset).get("held_out_pairs", 100))
support = np.unique(attributes_of(w.dataset, table)[support_rows], axis=0)
parts = []
for variant, path in zip(p.variants, snakemake.input.conditions, strict=True):
    rows = read_parquet(path).filter(pl.col("kid_all").is_not_null())
    parts.append(graded_shift(rows, support, names).with_columns(pl.lit(variant).alias("variant")))
shift = pl.concat(parts)
write_parquet(shift, snakemake.output.shift)
with atomic_path(snakemake.output.markdown) as tmp:
    tmp.write_text(graded_shift_markdown(shift))
with atomic_path(snakemake.output.figure) as tmp:
    plot_graded_shift(shift, tmp, f"{w.dataset}, {w.regime.replace('_', '-')} support")
log.info("graded shift of %s", p.variants)
