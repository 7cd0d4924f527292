"""Snakemake adapter: calibrate CReL at alpha, score every test image, and sweep num_z0 (Fig. 6)."""
import polars as pl
import torch

from condeval.core.io import write_parquet
from condeval.core.logs import log_to_file
from condeval.core.devices import device_for_gpus
from condeval.crel import CReL
from condeval.crel.image_to_text import evaluate_crel, item_arrays, num_z0_curve

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, i, w = snakemake.params, snakemake.input, snakemake.wildcards
device = device_for_gpus(snakemake.resources.get("gpu", 0))
ids, X, Y, GT, folds = item_arrays(i, w.metric, p.seed)
cal, test = folds == "cal", folds == "test"
crel = CReL.from_checkpoints(i.lgm, i.dqr, metric="cosine")
rel = dict(p.reliability)
scores = evaluate_crel(
    crel, X[cal], Y[cal], X[test], Y[test], GT[test], alpha=float(w.alpha),
    num_z0=rel["num_z0"], steps=rel["steps"], lr=rel["lr"], seed=p.seed, device=device,
)  # fmt: skip
z_worst = scores.pop("z_worst")
frame = pl.DataFrame({"image_id": ids[test], "model": w.model, "metric": w.metric, **scores}).with_columns(
    pl.Series("z_worst", z_worst.tolist())
)
write_parquet(frame, snakemake.output.scores)
log.info("%s/%s: mean rho %.4f, CReL-rho %.4f, test coverage %.3f", w.model, w.metric, frame["rho"].mean(), frame["crel_rho"].mean(), frame["covered"].mean())
curve = num_z0_curve(crel, X[test], GT[test], p.num_z0s, steps=rel["steps"], lr=rel["lr"], seed=p.seed, device=device)
write_parquet(pl.DataFrame({"model": w.model, "metric": w.metric, "num_z0": list(p.num_z0s), "crel_rho": curve}), snakemake.output.num_z0)
log.info("num_z0 curve: %s", dict(zip(p.num_z0s, curve)))
