"""Snakemake adapter: CReL-rho against num_z0 (curve) and its spread over optimizer seeds."""

from condeval.core.io import atomic_path, read_parquet
from condeval.core.logs import log_to_file
from condeval.crel.reports.ablations import num_z0_table, plot_num_z0, seed_table

log = log_to_file(snakemake.log[0])
p = snakemake.params


def point_rho(path):
    return read_parquet(path, columns=["crel_rho"])["crel_rho"].to_numpy()


curve = num_z0_table(dict(zip(p.num_z0, map(point_rho, snakemake.input.curve))), p.metric, float(p.alpha))
seeds = seed_table(
    [float(point_rho(path).mean()) for path in snakemake.input.seeds], p.seed_num_z0, p.metric, float(p.alpha)
)
with atomic_path(snakemake.output.csv) as tmp:
    curve.write_csv(tmp)
with atomic_path(snakemake.output.seeds_csv) as tmp:
    seeds.write_csv(tmp)
with atomic_path(snakemake.output.png) as tmp:
    plot_num_z0(curve, tmp)
log.info("\n%s\n%s", curve, seeds)
