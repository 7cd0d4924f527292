"""Snakemake adapter: Feldman et al. at one alpha — union of balls around the decoded region."""

import torch

from condeval.core.io import read_json, read_parquet, write_json, write_parquet
from condeval.core.logs import log_to_file
from condeval.crel import CReL
from condeval.crel.baselines.feldman import feldman_threshold
from condeval.crel.evaluation import cloud_set_metrics, summarize
from condeval.crel.folds import load_fold
from condeval.crel.grid import OutputGrid

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
alpha = float(snakemake.wildcards.alpha)
cal_scores = read_parquet(snakemake.input.scores, columns=["score"], finite=["score"])["score"].to_numpy()
radius = feldman_threshold(cal_scores, alpha)
crel = CReL.from_checkpoints(snakemake.input.lgm, snakemake.input.dqr, **snakemake.params.lgm_options)
grid = OutputGrid.from_dict(read_json(snakemake.input.grid, required=["lower", "upper", "points_per_axis"]))
test = load_fold(snakemake.input.processed, "test").head(snakemake.params.region_test_points)
clouds = crel.region_clouds(test.X, snakemake.params.latent_points, gamma=0.0)
per_point = cloud_set_metrics(grid, clouds, test.Y, enlarge=radius)
summary = summarize("feldman", alpha, per_point, radius=radius, n_cal=int(cal_scores.size))
write_parquet(per_point, snakemake.output.per_point)
write_json(summary, snakemake.output.summary)
log.info("%s", summary)
