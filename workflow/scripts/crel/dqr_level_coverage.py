"""Snakemake adapter: Z-coverage of each uncalibrated DQR level on the calibration fold."""

import numpy as np
import torch

from condeval.core.io import write_json
from condeval.core.logs import log_to_file
from condeval.crel.folds import load_fold, load_latents
from condeval.crel.models.dqr import DirectionalQuantileRegressor
from condeval.crel.regions import in_region

log = log_to_file(snakemake.log[0])
cal = load_fold(snakemake.input.processed, "cal")
z_cal = load_latents(snakemake.input.latents, cal.rows)
coverage = {}
for path in snakemake.input.models:
    dqr = DirectionalQuantileRegressor.load_from_checkpoint(path, map_location="cpu", weights_only=True).eval()
    level = f"{dqr.hparams.quantile_level:g}"  # the checkpoint's own level, whatever order the inputs come in
    with torch.no_grad():
        b = dqr.offsets(torch.as_tensor(cal.X, dtype=torch.float32)).double().numpy()
    coverage[level] = float(np.mean(in_region(dqr.directions.double().numpy(), b, z_cal)))
    log.info("tau=%s: calibration coverage %.4f", level, coverage[level])
write_json(coverage, snakemake.output.coverage)
