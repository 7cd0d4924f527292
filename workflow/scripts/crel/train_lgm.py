"""Snakemake adapter: train the VAE (or the CVAE of Appendix A.1) on the LGM fold, keeping chosen epoch snapshots."""

import pytorch_lightning as pl
import torch

from condeval.core.io import fingerprint
from condeval.core.logs import log_to_file
from condeval.core.training import TrainSettings, accelerator_for_gpus, fit_to_files
from condeval.crel.folds import load_fold
from condeval.crel.models.vae import LatentVAE

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
train = load_fold(snakemake.input.processed, "lgm", val=False)
val = load_fold(snakemake.input.processed, "lgm", val=True)
pl.seed_everything(p.seed, workers=True)
model = LatentVAE(
    output_dim=train.Y.shape[1],
    latent_dim=p.model["latent_dim"],
    cond_dim=train.X.shape[1] if p.conditional else 0,
    hidden_dims=list(p.model["hidden_dims"]),
    beta=p.model["beta"],
    metric=p.model["metric"],
)
best = fit_to_files(
    model,
    train.lgm_batch(p.conditional),
    val.lgm_batch(p.conditional),
    snakemake.output.model,
    snakemake.output.summary,
    snapshot_paths=snakemake.output.get("snapshots", []),
    save_epochs=p.save_epochs,
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
        {
            "model": dict(p.model),
            "epochs": dict(p.epochs),
            "conditional": p.conditional,
            "seed": p.seed,
            "save_epochs": list(p.save_epochs),
        },
    ),
)
log.info("best checkpoint %s", best)
