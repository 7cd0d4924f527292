"""Snakemake adapter: coverage of the uncalibrated region R_Z(x) and of its decoded image R_Y(x)."""

import numpy as np
import torch

from condeval.core.io import read_json, read_parquet, write_json
from condeval.core.logs import log_to_file
from condeval.crel import CReL
from condeval.crel.evaluation import cloud_set_metrics
from condeval.crel.folds import load_fold
from condeval.crel.grid import OutputGrid

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
scores = read_parquet(snakemake.input.scores, columns=["fold", "score"], finite=["score"])
test_scores = scores.filter(scores["fold"] == "test")["score"].to_numpy()
crel = CReL.from_checkpoints(snakemake.input.lgm, snakemake.input.dqr, **p.lgm_options)
grid = OutputGrid.from_dict(read_json(snakemake.input.grid, required=["lower", "upper", "points_per_axis"]))
test = load_fold(snakemake.input.processed, "test").head(p.region_test_points)
per_point = cloud_set_metrics(grid, crel.region_clouds(test.X, p.latent_points, gamma=0.0), test.Y)
summary = {
    "coverage_r_z": float(np.mean(test_scores <= 0.0)),
    "coverage_r_y": float(per_point["covered_y"].mean()),
    "area_r_y": float(per_point["area"].mean()),
    "n_test_z": int(test_scores.size),
    "n_test_y": int(per_point.height),
}
write_json(summary, snakemake.output.summary)
log.info("%s", summary)
