"""Snakemake adapter: the Section 5.1.3 table, Fig. 3 and the per-feature tables, every generator."""

import polars as pl

from condeval.core.io import atomic_path, read_json, read_parquet
from condeval.core.logs import log_to_file
from condeval.trust.cellprofiler import segmentation_check
from condeval.trust.report import feature_tables_markdown, morphology_markdown, plot_morphology_deciles

log = log_to_file(snakemake.log[0])
p, w, i = snakemake.params, snakemake.wildcards, snakemake.input


def tagged(paths):
    # diagonal: a generator with no row (no arm to contrast) may have written a frame without columns
    return pl.concat(
        [read_parquet(path).with_columns(variant=pl.lit(v)) for v, path in zip(p.variants, paths, strict=True)],
        how="diagonal_relaxed",
    )


contrast, correlations, deciles = tagged(i.contrasts), tagged(i.correlations), tagged(i.deciles)
counts = read_json(i.summaries[0])
segmentation = segmentation_check(read_parquet(i.real), pl.read_csv(i.drawn[0])) if i.drawn else None
sections = [morphology_markdown(contrast, counts, segmentation, p.variants)]
sections.append(feature_tables_markdown(correlations, p.variants[0]))
with atomic_path(snakemake.output.table) as tmp:
    tmp.write_text("".join(sections))
with atomic_path(snakemake.output.figure) as tmp:
    plot_morphology_deciles(deciles, tmp, f"rxrx1, {w.regime.replace('_', '-')} support: CellProfiler-space trust bins")
log.info("Section 5.1.3:\n%s", contrast)
log.info("segmentation: %s", segmentation)
