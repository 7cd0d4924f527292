"""Snakemake adapter: LGM training cost (epochs, wall time, peak memory) beside the paper's Table 11."""

from condeval.core.io import atomic_path, read_json
from condeval.core.logs import log_to_file
from condeval.crel.reports.synthetic import lgm_cost_table

log = log_to_file(snakemake.log[0])
required = ["epochs_run", "best_epoch", "best_val_loss", "wall_time_s", "peak_rss_mib", "peak_cuda_mib"]
table = lgm_cost_table({name: read_json(path, required=required) for name, path in snakemake.input.items()})
with atomic_path(snakemake.output.csv) as tmp:
    table.write_csv(tmp)
log.info("\n%s", table)
