"""Snakemake adapter: train the VAE (or the CVAE of Appendix A.1) on the LGM fold, keeping chosen epoch snapshots."""
from pathlib import Path

import pytorch_lightning as pl
import torch

from condeval.data.folds import load_fold
from condeval.io import fingerprint, write_json
from condeval.logs import log_to_file
from condeval.models.training import export_best, fit, select_accelerator, training_summary
from condeval.models.vae import LatentVAE

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
    lr=p.model["lr"],
)
output = Path(snakemake.output.model)
run_dir = output.with_name(output.stem + "_run")


def batches(fold):
    """A CVAE trains on (y, x) pairs, a VAE on y alone."""
    return (fold.Y, fold.X) if p.conditional else (fold.Y,)


best = fit(
    model,
    batches(train),
    batches(val),
    run_dir,
    max_epochs=p.epochs["max_epochs"],
    patience=p.epochs["patience"],
    batch_size=p.model["batch_size"],
    seed=p.seed,
    accelerator=select_accelerator(p.accelerator),
    save_epochs=p.save_epochs,
    fingerprint=fingerprint(list(snakemake.input), {"model": dict(p.model), "epochs": dict(p.epochs), "conditional": p.conditional, "seed": p.seed, "save_epochs": list(p.save_epochs)}),
)
for epoch, dest in zip(p.save_epochs, snakemake.output.get("snapshots", [])):
    export_best(run_dir / "checkpoints" / f"epoch={epoch:03d}.ckpt", dest)
export_best(best, output)
write_json(training_summary(run_dir), snakemake.output.summary)
log.info("best checkpoint %s", best)
