"""Snakemake adapter: Figs. 2, 8 and 9, the decile curves of every generator, and their numbers."""

import polars as pl

from condeval.core.io import atomic_path, read_parquet
from condeval.core.logs import log_to_file
from condeval.trust.report import deciles_markdown, plot_deciles

log = log_to_file(snakemake.log[0])
w = snakemake.wildcards
rankings = pl.concat([read_parquet(path) for path in snakemake.input.rankings])
with atomic_path(snakemake.output.markdown) as tmp:
    tmp.write_text(deciles_markdown(rankings))
with atomic_path(snakemake.output.figure) as tmp:
    plot_deciles(rankings, tmp, f"{w.dataset}, {w.regime.replace('_', '-')} support")
log.info("deciles of %s", snakemake.params.variants)
