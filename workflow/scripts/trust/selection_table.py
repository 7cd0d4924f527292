"""Snakemake adapter: the Section 5.1.1 table over datasets, regimes and generators."""

import polars as pl

from condeval.core.io import atomic_path, read_json, read_parquet, write_parquet
from condeval.core.logs import log_to_file
from condeval.trust.evaluate import scorer_markdown, selection_markdown

log = log_to_file(snakemake.log[0])
rows = [dict(key) | read_json(path) for key, path in zip(snakemake.params.runs, snakemake.input.summaries, strict=True)]
write_parquet(pl.DataFrame(rows, infer_schema_length=None), snakemake.output.table)
markdown = selection_markdown(rows)
with atomic_path(snakemake.output.markdown) as tmp:
    tmp.write_text(markdown)
log.info("Section 5.1.1:\n%s", markdown)
ablation = pl.concat(
    [
        read_parquet(path).with_columns(**{key: pl.lit(value) for key, value in run.items()})
        for run, path in zip(snakemake.params.runs, snakemake.input.ablations, strict=True)
    ],
    how="diagonal_relaxed",
)
markdown = scorer_markdown(ablation)
with atomic_path(snakemake.output.ablation) as tmp:
    tmp.write_text(markdown)
log.info("Appendix J:\n%s", markdown)
