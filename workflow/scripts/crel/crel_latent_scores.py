"""Snakemake adapter: exact E+ = dist(E(y), R_Z(x)) for the calibration and test folds."""

import numpy as np
import polars as pl
import torch

from condeval.core.io import write_parquet
from condeval.core.logs import log_to_file
from condeval.crel import CReL
from condeval.crel.folds import load_fold

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
crel = CReL.from_checkpoints(snakemake.input.lgm, snakemake.input.dqr, **snakemake.params.lgm_options)
parts = []
for fold in ("cal", "test"):
    data = load_fold(snakemake.input.processed, fold)
    scores = crel.latent_scores(data.X, data.Y)
    parts.append(pl.DataFrame({"row": data.rows, "fold": [fold] * len(data), "score": scores}))
    log.info("%s: %d scores, %.3f inside R_Z", fold, len(data), float(np.mean(scores <= 0)))
write_parquet(pl.concat(parts), snakemake.output.scores)
