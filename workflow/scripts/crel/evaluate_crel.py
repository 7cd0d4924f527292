"""Snakemake adapter: CReL at one alpha — gamma_cal, coverage in Z and Y, area in Y (Table 1)."""

import numpy as np
import torch

from condeval.core.io import read_json, read_parquet, write_json, write_parquet
from condeval.core.logs import log_to_file
from condeval.crel import CReL
from condeval.crel.evaluation import cloud_set_metrics, summarize
from condeval.crel.folds import load_fold
from condeval.crel.grid import OutputGrid

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
alpha = float(snakemake.wildcards.alpha)
scores = read_parquet(snakemake.input.scores, columns=["fold", "score"], finite=["score"])
cal_scores = scores.filter(scores["fold"] == "cal")["score"].to_numpy()
test_scores = scores.filter(scores["fold"] == "test")["score"].to_numpy()
crel = CReL.from_checkpoints(
    snakemake.input.lgm, snakemake.input.dqr, **snakemake.params.lgm_options
).calibrate_from_scores(cal_scores, alpha)
grid = OutputGrid.from_dict(read_json(snakemake.input.grid, required=["lower", "upper", "points_per_axis"]))
test = load_fold(snakemake.input.processed, "test").head(snakemake.params.region_test_points)
clouds = crel.region_clouds(test.X, snakemake.params.latent_points)
per_point = cloud_set_metrics(grid, clouds, test.Y)
summary = summarize(
    "crel",
    alpha,
    per_point,
    covered_z=test_scores <= crel.gamma_cal_,
    coverage_r_z=float(np.mean(test_scores <= 0.0)),
    gamma_cal=crel.gamma_cal_,
    gamma_init=crel.gamma_init_,
    n_cal=int(cal_scores.size),
    n_test_z=int(test_scores.size),
)
write_parquet(per_point, snakemake.output.per_point)
write_json(summary, snakemake.output.summary)
log.info("%s", summary)
