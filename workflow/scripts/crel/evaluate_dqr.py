"""Snakemake adapter: DQR alone at one alpha — the largest level meeting 1-alpha on the calibration fold."""

import torch

from condeval.core.io import read_json, write_json, write_parquet
from condeval.core.logs import log_to_file
from condeval.crel import CReL
from condeval.crel.baselines.dqr import checkpoint_at_level, select_quantile_level
from condeval.crel.evaluation import cloud_set_metrics, summarize
from condeval.crel.folds import load_fold, load_latents
from condeval.crel.grid import OutputGrid
from condeval.crel.regions import in_region

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
alpha = float(snakemake.wildcards.alpha)
cal_coverage = {float(k): v for k, v in read_json(snakemake.input.coverage).items()}
level, target_met = select_quantile_level(cal_coverage, alpha)
model_path = checkpoint_at_level(snakemake.input.models, level)
crel = CReL.from_checkpoints(snakemake.input.lgm, model_path, **snakemake.params.lgm_options)
grid = OutputGrid.from_dict(read_json(snakemake.input.grid, required=["lower", "upper", "points_per_axis"]))
test_all = load_fold(snakemake.input.processed, "test")
z_test = load_latents(snakemake.input.latents, test_all.rows)
covered_z = in_region(crel.directions, crel.offsets(test_all.X), z_test)
test = test_all.head(snakemake.params.region_test_points)
per_point = cloud_set_metrics(grid, crel.region_clouds(test.X, snakemake.params.latent_points, gamma=0.0), test.Y)
summary = summarize("dqr", alpha, per_point, covered_z=covered_z, quantile_level=level, target_met=target_met)
write_parquet(per_point, snakemake.output.per_point)
write_json(summary, snakemake.output.summary)
log.info("%s", summary)
