"""Snakemake adapter: Appendix L.2's per-step table, L.1's support-shift table and Fig. 4, every generator
scored during generation."""

import polars as pl

from condeval.core.io import atomic_path, read_json, read_parquet
from condeval.core.logs import log_to_file
from condeval.trust.report import during_generation_markdown, plot_during_generation

log = log_to_file(snakemake.log[0])
p, w, i = snakemake.params, snakemake.wildcards, snakemake.input
steps = pl.concat([read_parquet(path).with_columns(variant=pl.lit(v)) for v, path in zip(p.variants, i.steps, strict=True)],
                  how="diagonal_relaxed")  # fmt: skip
signals = {v: read_json(path) for v, path in zip(p.translated, i.signals, strict=True)}
with atomic_path(snakemake.output.table) as tmp:
    tmp.write_text(during_generation_markdown(steps, signals))
with atomic_path(snakemake.output.figure) as tmp:
    plot_during_generation(steps, tmp, f"{w.dataset}, {w.regime.replace('_', '-')} support: trust during generation")
log.info("during generation:\n%s", steps)
