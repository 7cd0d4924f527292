"""Snakemake adapter: train the latent diffusion LGM (Appendix A.2) on the LGM fold, in a trained VAE's latent space."""

import pytorch_lightning as pl
import torch

from condeval.core.io import fingerprint
from condeval.core.logs import log_to_file
from condeval.core.training import TrainSettings, accelerator_for_gpus, fit_to_files
from condeval.crel.folds import load_fold
from condeval.crel.models.diffusion import LatentDDPM
from condeval.crel.models.vae import LatentVAE

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
train = load_fold(snakemake.input.processed, "lgm", val=False)
val = load_fold(snakemake.input.processed, "lgm", val=True)
vae = LatentVAE.load_from_checkpoint(snakemake.input.vae, map_location="cpu", weights_only=True)
pl.seed_everything(p.seed, workers=True)
model = LatentDDPM.from_vae(
    vae,
    cond_dim=train.X.shape[1] if p.conditional else 0,
    hidden_dims=list(p.model["hidden_dims"]),
    time_embed_dim=p.model["time_embed_dim"],
    num_train_timesteps=p.model["num_train_timesteps"],
)  # the DDIM step count T is a loading option (condeval.crel.models.load_lgm), not a training one
best = fit_to_files(
    model,
    train.lgm_batch(p.conditional),
    val.lgm_batch(p.conditional),
    snakemake.output.model,
    snakemake.output.summary,
    settings=TrainSettings(
        p.epochs["max_epochs"],
        p.model["batch_size"],
        p.epochs["patience"],
        accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)),
        lr=p.model["lr"],
    ),
    seed=p.seed,
    fingerprint=fingerprint(
        list(snakemake.input),
        {"model": dict(p.model), "epochs": dict(p.epochs), "conditional": p.conditional, "seed": p.seed},
    ),
)
log.info("best checkpoint %s", best)
