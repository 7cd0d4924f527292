"""Snakemake adapter: mean CReL-rho of one model and metric for each number of PGD starts (Fig. 6)."""
import polars as pl
import torch

from condeval.core.io import write_parquet
from condeval.core.logs import log_to_file
from condeval.core.training import device_for_gpus
from condeval.crel import CReL
from condeval.crel.image_to_text import item_arrays, num_z0_curve

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, i, w = snakemake.params, snakemake.input, snakemake.wildcards
ids, X, Y, GT, folds = item_arrays(i, w.metric, p.seed)
cal, test = folds == "cal", folds == "test"
crel = CReL.from_checkpoints(i.lgm, i.dqr, metric="cosine").calibrate(X[cal], Y[cal], float(w.alpha))
rel = dict(p.reliability)
curve = num_z0_curve(crel, X[test], GT[test], p.num_z0s, steps=rel["steps"], lr=rel["lr"], seed=p.seed, device=device_for_gpus(snakemake.resources.get("gpu", 0)))
write_parquet(pl.DataFrame({"model": w.model, "metric": w.metric, "num_z0": list(p.num_z0s), "crel_rho": curve}), snakemake.output[0])
log.info("%s/%s: %s", w.model, w.metric, dict(zip(p.num_z0s, curve)))
