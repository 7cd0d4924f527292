"""Snakemake adapter: train the latent DQR f(x, u) at quantile level tau on the DQR fold."""

import pytorch_lightning as pl
import torch

from condeval.core.io import fingerprint
from condeval.core.logs import log_to_file
from condeval.core.training import TrainSettings, accelerator_for_gpus, fit_to_files
from condeval.crel.folds import load_fold, load_latents
from condeval.crel.models.dqr import DirectionalQuantileRegressor

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
train = load_fold(snakemake.input.processed, "dqr", val=False)
val = load_fold(snakemake.input.processed, "dqr", val=True)
z_train = load_latents(snakemake.input.latents, train.rows)
z_val = load_latents(snakemake.input.latents, val.rows)
pl.seed_everything(p.seed, workers=True)
model = DirectionalQuantileRegressor(
    cond_dim=train.X.shape[1],
    latent_dim=z_train.shape[1],
    quantile_level=float(snakemake.wildcards.tau),
    hidden_dims=list(p.model["hidden_dims"]),
    n_directions=p.model["n_directions"],
    directions_per_step=p.model["directions_per_step"],
    direction_seed=p.seed,
    structure=p.model["structure"],
)
best = fit_to_files(
    model,
    (train.X, z_train),
    (val.X, z_val),
    snakemake.output.model,
    snakemake.output.summary,
    settings=TrainSettings(
        p.model["max_epochs"],
        p.model["batch_size"],
        p.model["patience"],
        accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)),
        lr=p.model["lr"],
    ),
    seed=p.seed,
    fingerprint=fingerprint(
        list(snakemake.input), {"model": dict(p.model), "tau": snakemake.wildcards.tau, "seed": p.seed}
    ),
)
log.info("best checkpoint %s", best)
