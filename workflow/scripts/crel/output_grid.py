"""Snakemake adapter: the shared Y-grid for coverage and area."""

from condeval.core.io import write_json
from condeval.core.logs import log_to_file
from condeval.crel.folds import load_fold
from condeval.crel.grid import OutputGrid

log = log_to_file(snakemake.log[0])
p = snakemake.params
grid = OutputGrid.from_samples(load_fold(snakemake.input.processed, "lgm").Y, p.n_points, tuple(p.quantiles), p.pad)
write_json(grid.to_dict(), snakemake.output.grid)
log.info("grid: %d points, spacing %s", grid.size, grid.spacing)
