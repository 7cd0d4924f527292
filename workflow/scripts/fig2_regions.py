"""Snakemake adapter: Fig. 2 — CReL regions before/after calibration for two fixed x, with baselines in Y."""

from condeval.crel import CReL
from condeval.data.folds import load_fold, load_latents
from condeval.grid import OutputGrid
from condeval.io import atomic_path, read_json
from condeval.logs import log_to_file
from condeval.reports.crel_synthetic import plot_regions

log = log_to_file(snakemake.log[0])
p = snakemake.params
crel_summary = read_json(snakemake.input.crel, required=["gamma_cal", "alpha"])
radius = read_json(snakemake.input.feldman, required=["radius"])["radius"]
level = read_json(snakemake.input.dqr_summary, required=["quantile_level"])["quantile_level"]
dqr_path = dict(zip(map(float, p.levels), snakemake.input.dqr_models))[float(level)]
grid = OutputGrid.from_dict(read_json(snakemake.input.grid))
test = load_fold(snakemake.input.processed, "test")
rows = [c for c in p.conditions if c < len(test)]
X, Y = test.X[rows], test.Y[rows]
Z = load_latents(snakemake.input.latents, test.rows[rows])
crel = CReL.from_checkpoints(snakemake.input.vae, snakemake.input.dqr)
dqr_alone = CReL.from_checkpoints(snakemake.input.vae, dqr_path)
before = list(crel.region_clouds(X, p.latent_points, gamma=0.0))
after = list(crel.region_clouds(X, p.latent_points, gamma=crel_summary["gamma_cal"]))
dqr_clouds = list(dqr_alone.region_clouds(X, p.latent_points, gamma=0.0))
panels = [
    {
        "z_before": b.latent, "z_after": a.latent, "y_before": b.decoded, "y_after": a.decoded,
        "z_test": Z[i], "y_test": Y[i],
        "y_feldman": grid.points(grid.within(b.decoded, b.radii + radius)), "y_dqr": q.decoded,
    }
    for i, (b, a, q) in enumerate(zip(before, after, dqr_clouds))
]
with atomic_path(snakemake.output.png) as tmp:
    plot_regions(panels, crel_summary["alpha"], tmp)
