"""Snakemake adapter: PCP — K CVAE samples per condition; calibration scores and test samples of one run."""

import numpy as np
import polars as pl
import torch

from condeval.core.io import write_npz, write_parquet
from condeval.core.logs import log_to_file
from condeval.crel.baselines.pcp import draw_samples, lgm_sampler, pcp_scores
from condeval.crel.folds import load_fold
from condeval.crel.models.vae import LatentVAE

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
seed = int(snakemake.wildcards.seed)  # run s draws calibration samples with seed 2s, test samples with 2s+1
cvae = LatentVAE.load_from_checkpoint(snakemake.input.cvae, map_location="cpu", weights_only=True).eval()
sampler = lgm_sampler(cvae)
cal = load_fold(snakemake.input.processed, "cal")
scores = pcp_scores(draw_samples(sampler, cal.X, p.n_samples, seed=2 * seed), cal.Y)
write_parquet(pl.DataFrame({"row": cal.rows, "score": scores}), snakemake.output.cal_scores)
test = load_fold(snakemake.input.processed, "test").head(p.region_test_points)
samples = draw_samples(sampler, test.X, p.n_samples, seed=2 * seed + 1)
write_npz(snakemake.output.test_samples, rows=test.rows, samples=samples.astype(np.float32))
log.info("PCP: %d calibration scores, %d x %d test samples", scores.size, *samples.shape[:2])
