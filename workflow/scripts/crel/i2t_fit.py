"""Snakemake adapter: train CReL's VAE and latent DQR for one captioner and metric."""

from pathlib import Path

import torch

from condeval.core.logs import log_to_file
from condeval.core.training import accelerator_for_gpus, export_best
from condeval.crel.image_to_text import aligned_features, assign_folds, fit_on_folds, metric_arrays

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, i = snakemake.params, snakemake.input
ids, features = aligned_features(
    {name: i[name] for name in ("image", "reference_bert", "caption_clip", "caption_bert")},
    encoders={"clip": i.clip_encoder, "bert": i.bert_encoder},
)
X, Y, _ = metric_arrays(snakemake.wildcards.metric, **features, condition=p.condition)
folds = assign_folds(ids, p.seed)
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
log.info("fitted on %d VAE and %d DQR images", (folds == "vae").sum(), (folds == "dqr").sum())
