"""Snakemake adapter: Fig. 2 — CReL regions before/after calibration for fixed x, with baselines in Y."""

from condeval.core.io import atomic_path, read_json, read_parquet
from condeval.core.logs import log_to_file
from condeval.crel import CReL
from condeval.crel.baselines.dqr import checkpoint_at_level
from condeval.crel.folds import load_fold, load_latents
from condeval.crel.grid import OutputGrid
from condeval.crel.reports.synthetic import figure_cases, plot_regions, region_panels

log = log_to_file(snakemake.log[0])
p, i = snakemake.params, snakemake.input
crel_summary = read_json(i.crel, required=["gamma_cal", "alpha"])
radius = read_json(i.feldman, required=["radius"])["radius"]
level = read_json(i.dqr_summary, required=["quantile_level"])["quantile_level"]
grid = OutputGrid.from_dict(read_json(i.grid))
scores = read_parquet(i.scores, columns=["fold", "score"])
test_scores = scores.filter(scores["fold"] == "test")["score"].to_numpy()
rows = figure_cases(test_scores, crel_summary["gamma_cal"], p.n_cases)
log.info("cases (test rows) %s: E+ = %s", rows, test_scores[rows])
test = load_fold(i.processed, "test")
crel = CReL.from_checkpoints(i.lgm, i.dqr, **p.lgm_options)
dqr_alone = CReL.from_checkpoints(i.lgm, checkpoint_at_level(i.dqr_models, level), **p.lgm_options)
X = test.X[rows]
panels = region_panels(
    before=list(crel.region_clouds(X, p.latent_points, gamma=0.0)),
    after=list(crel.region_clouds(X, p.latent_points, gamma=crel_summary["gamma_cal"])),
    dqr_alone=list(dqr_alone.region_clouds(X, p.latent_points, gamma=0.0)),
    Z=load_latents(i.latents, test.rows[rows]),
    Y=test.Y[rows],
    grid=grid,
    feldman_radius=radius,
)
with atomic_path(snakemake.output.png) as tmp:
    plot_regions(panels, crel_summary["alpha"], tmp)
