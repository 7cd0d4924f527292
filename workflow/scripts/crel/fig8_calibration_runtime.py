"""Snakemake adapter: Fig. 8 (calibration time against r) and its table, beside the paper's numbers."""

from condeval.core.io import atomic_path, read_json
from condeval.core.logs import log_to_file
from condeval.crel.reports.scaling import plot_calibration_runtime, runtime_table

log = log_to_file(snakemake.log[0])
table = runtime_table([read_json(path, required=["latent_dim", "crel", "grid"]) for path in snakemake.input.timings])
with atomic_path(snakemake.output.csv) as tmp:
    table.write_csv(tmp)
for key in ("png", "svg"):
    with atomic_path(snakemake.output[key]) as tmp:
        plot_calibration_runtime(table, tmp)
log.info("\n%s", table)
