"""Snakemake adapter: Table 1 (CSV, Markdown, PNG) from the per-method summaries."""

from condeval.core.io import atomic_path, read_json
from condeval.core.logs import log_to_file
from condeval.crel.reports.synthetic import render_table_png, table1, table1_markdown

log = log_to_file(snakemake.log[0])
table = table1(
    [read_json(path, required=["method", "alpha", "coverage_y", "area"]) for path in snakemake.input.summaries]
)
with atomic_path(snakemake.output.csv) as tmp:
    table.write_csv(tmp)
with atomic_path(snakemake.output.markdown) as tmp:
    tmp.write_text(table1_markdown(table))
with atomic_path(snakemake.output.png) as tmp:
    render_table_png(table, tmp)
log.info("\n%s", table1_markdown(table))
