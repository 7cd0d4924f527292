"""Snakemake adapter: CReL-rho summary per alpha."""

from condeval.core.io import atomic_path, read_parquet
from condeval.core.logs import log_to_file
from condeval.crel.reports.synthetic import reliability_table

log = log_to_file(snakemake.log[0])
per_alpha = {
    float(alpha): read_parquet(path, columns=["crel_rho"])["crel_rho"].to_numpy()
    for alpha, path in zip(snakemake.params.alphas, snakemake.input.reliability)
}
table = reliability_table(per_alpha, snakemake.params.metric)
with atomic_path(snakemake.output.csv) as tmp:
    table.write_csv(tmp)
log.info("\n%s", table)
