"""Snakemake adapter: train CReL's VAE and latent DQR for one text-to-image model and metric."""

import torch

from condeval.core.logs import log_to_file
from condeval.core.training import accelerator_for_gpus, export_best
from condeval.crel import CReL
from condeval.crel.text_to_image import FEATURE_SOURCES, item_arrays

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, i = snakemake.params, snakemake.input
_, X, Y, _, folds = item_arrays(
    {name: i[name] for name in FEATURE_SOURCES}, snakemake.wildcards.metric, p.seed,
    encoders={"clip": i.clip_encoder, "dino": i.dino_encoder},
)  # fmt: skip
vae, dqr = dict(p.vae), dict(p.dqr)
crel = CReL.fit(
    X[folds == "vae"], Y[folds == "vae"], X[folds == "dqr"], Y[folds == "dqr"], snakemake.output.run,
    latent_dim=vae["latent_dim"], beta=vae["beta"], metric="cosine", quantile_level=dqr["quantile_level"],
    lgm_epochs=vae["max_epochs"], dqr_epochs=dqr["max_epochs"], seed=p.seed,
    lgm_kwargs={"hidden_dims": list(vae["hidden_dims"]), "dropout": vae["dropout"], "batch_norm": vae["batch_norm"], "lr": vae["lr"]},
    dqr_kwargs={"hidden_dims": list(dqr["hidden_dims"]), "n_directions": dqr["n_directions"], "directions_per_step": dqr["directions_per_step"]},
    accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)),
)  # fmt: skip
export_best(crel.checkpoints_["lgm"], snakemake.output.lgm)
export_best(crel.checkpoints_["dqr"], snakemake.output.dqr)
log.info("fitted on %d VAE and %d DQR items", (folds == "vae").sum(), (folds == "dqr").sum())
