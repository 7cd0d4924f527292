"""Snakemake adapter: calibration time of CReL and of Feldman's grid scheme at one latent dimension (Fig. 8)."""

import platform

import torch

from condeval.core.io import write_json
from condeval.core.logs import log_to_file
from condeval.crel import CReL
from condeval.crel.folds import load_fold
from condeval.crel.scaling import GridSettings, time_crel_calibration, time_grid_calibration

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
crel = CReL.from_checkpoints(snakemake.input.vae, snakemake.input.dqr)
cal = load_fold(snakemake.input.processed, "cal")
crel.latent_scores(cal.X[:64], cal.Y[:64])  # warm-up: torch and BLAS start-up is not calibration time
ours = time_crel_calibration(crel, cal.X, cal.Y, p.alpha)
log.info("CReL: %.3f s on %d points (r=%d)", ours["total_s"], len(cal), ours["latent_dim"])
settings = GridSettings(
    points_per_axis=p.points_per_axis,
    max_output_points=p.max_output_points,
    budget_s=p.budget_s,
    probe_points=p.probe_points,
    max_region_points=p.max_region_points,
    probe_budget_s=p.probe_budget_s,
    seed=p.seed,
)
grid = time_grid_calibration(crel, cal.X, cal.Y, p.alpha, settings, Y_ref=load_fold(snakemake.input.processed, "lgm").Y)
log.info("grid: %.1f s (%s)", grid.total_s, "measured" if grid.feasible else f"extrapolated, {grid.reason}")
write_json(
    {
        "latent_dim": ours["latent_dim"],
        "alpha": p.alpha,
        "crel": ours,
        "grid": grid.to_dict(),
        "machine": {
            "platform": platform.platform(),
            "torch": torch.__version__,
            "torch_threads": torch.get_num_threads(),
        },
    },
    snakemake.output.timing,
)
