"""Snakemake adapter: Feldman et al. scores — distance of y to the decoded DQR region, calibration fold."""

import polars as pl
import torch

from condeval.core.io import write_parquet
from condeval.core.logs import log_to_file
from condeval.crel import CReL
from condeval.crel.baselines.feldman import feldman_scores
from condeval.crel.folds import load_fold

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
crel = CReL.from_checkpoints(snakemake.input.lgm, snakemake.input.dqr, **snakemake.params.lgm_options)
cal = load_fold(snakemake.input.processed, "cal")
clouds = crel.region_clouds(cal.X, snakemake.params.latent_points, gamma=0.0)
scores = feldman_scores(clouds, cal.Y)
write_parquet(pl.DataFrame({"row": cal.rows, "score": scores}), snakemake.output.scores)
log.info("Feldman scores on %d calibration points", scores.size)
