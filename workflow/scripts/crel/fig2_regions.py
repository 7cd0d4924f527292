"""Snakemake adapter: Fig. 2 — CReL regions before/after calibration for fixed x, with baselines in Y."""
import numpy as np

from condeval.crel import CReL
from condeval.crel.folds import load_fold, load_latents
from condeval.crel.grid import OutputGrid
from condeval.core.io import atomic_path, read_json, read_parquet
from condeval.core.logs import log_to_file
from condeval.crel.reports.synthetic import figure_cases, plot_regions

log = log_to_file(snakemake.log[0])
p = snakemake.params
crel_summary = read_json(snakemake.input.crel, required=["gamma_cal", "alpha"])
radius = read_json(snakemake.input.feldman, required=["radius"])["radius"]
level = read_json(snakemake.input.dqr_summary, required=["quantile_level"])["quantile_level"]
dqr_path = dict(zip(map(float, p.levels), snakemake.input.dqr_models))[float(level)]
grid = OutputGrid.from_dict(read_json(snakemake.input.grid))
scores = read_parquet(snakemake.input.scores, columns=["fold", "score"])
test_scores = scores.filter(scores["fold"] == "test")["score"].to_numpy()
rows = figure_cases(test_scores, crel_summary["gamma_cal"], p.n_cases)
log.info("cases (test rows) %s: E+ = %s", rows, test_scores[rows])
test = load_fold(snakemake.input.processed, "test")
X, Y = test.X[rows], test.Y[rows]
Z = load_latents(snakemake.input.latents, test.rows[rows])
crel = CReL.from_checkpoints(snakemake.input.lgm, snakemake.input.dqr, **snakemake.params.lgm_options)
dqr_alone = CReL.from_checkpoints(snakemake.input.lgm, dqr_path, **snakemake.params.lgm_options)
before = list(crel.region_clouds(X, p.latent_points, gamma=0.0))
after = list(crel.region_clouds(X, p.latent_points, gamma=crel_summary["gamma_cal"]))
dqr_clouds = list(dqr_alone.region_clouds(X, p.latent_points, gamma=0.0))


def outline(flat):
    """A Y-grid set as (axes, boolean image) for a contour."""
    mask = np.zeros(grid.size, dtype=bool)
    mask[flat] = True
    return grid.axes(), mask.reshape(grid.points_per_axis, grid.points_per_axis)


panels = [
    {
        "z_before": b.latent, "z_after": a.latent, "y_before": b.decoded, "y_after": a.decoded,
        "z_test": Z[i], "y_test": Y[i],
        "feldman": outline(grid.within(b.decoded, b.radii + radius)),
        "dqr": outline(grid.within(q.decoded, np.maximum(q.radii, grid.half_diagonal))),
    }
    for i, (b, a, q) in enumerate(zip(before, after, dqr_clouds))
]  # fmt: skip
with atomic_path(snakemake.output.png) as tmp:
    plot_regions(panels, crel_summary["alpha"], tmp)
