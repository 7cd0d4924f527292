"""Snakemake adapter: one Appendix C table of CReL (CSV, Markdown) with the paper's numbers beside ours."""

from condeval.core.io import atomic_path, read_json
from condeval.core.logs import log_to_file
from condeval.crel.reports.ablations import ablation_table, table_markdown

log = log_to_file(snakemake.log[0])
inputs = snakemake.input
table = ablation_table(
    snakemake.wildcards.table,
    snakemake.params.settings,
    [read_json(path, required=["coverage_y", "area"]) for path in inputs.summaries],
    uncalibrated=[
        read_json(path, required=["coverage_r_z", "coverage_r_y"]) for path in inputs.get("uncalibrated", [])
    ],
    training=[read_json(path, required=["best_val_loss"]) for path in inputs.get("training", [])],
)
with atomic_path(snakemake.output.csv) as tmp:
    table.write_csv(tmp)
with atomic_path(snakemake.output.markdown) as tmp:
    tmp.write_text(table_markdown(table))
log.info("\n%s", table_markdown(table))
