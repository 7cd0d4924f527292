"""Snakemake adapter: train CReL's VAE and latent DQR for one text-to-image model and metric."""

from pathlib import Path

import torch

from condeval.core.logs import log_to_file
from condeval.core.training import accelerator_for_gpus, export_best
from condeval.crel.image_to_text import fit_on_folds
from condeval.crel.text_to_image import FEATURE_SOURCES, item_arrays

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, i = snakemake.params, snakemake.input
_, X, Y, _, folds = item_arrays(
    {name: i[name] for name in FEATURE_SOURCES},
    snakemake.wildcards.metric,
    p.seed,
    encoders={"clip": i.clip_encoder, "dino": i.dino_encoder},
)
# the run folder is no output, so a failed job's cleanup keeps its last.ckpt (docs/workflow.md, "A killed run")
run = Path(snakemake.output.lgm).with_name("run")
crel = fit_on_folds(
    X,
    Y,
    folds,
    run,
    vae=dict(p.vae),
    dqr=dict(p.dqr),
    seed=p.seed,
    accelerator=accelerator_for_gpus(snakemake.resources.get("gpu", 0)),
)
export_best(crel.checkpoints_["lgm"], snakemake.output.lgm)
export_best(crel.checkpoints_["dqr"], snakemake.output.dqr)
log.info("fitted on %d VAE and %d DQR items", (folds == "vae").sum(), (folds == "dqr").sum())
