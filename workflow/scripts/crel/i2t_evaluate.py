"""Snakemake adapter: calibrate CReL at alpha and score every test image (rho, CReL-rho, coverage)."""
import polars as pl
import torch

from condeval.core.io import write_parquet
from condeval.core.logs import log_to_file
from condeval.core.training import device_for_gpus
from condeval.crel import CReL
from condeval.crel.image_to_text import aligned_features, assign_folds, evaluate_crel, metric_arrays

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, i, w = snakemake.params, snakemake.input, snakemake.wildcards
ids, features = aligned_features({name: i[name] for name in ("image", "reference_bert", "caption_clip", "caption_bert")})
X, Y, GT = metric_arrays(w.metric, **features)
folds = assign_folds(ids, p.seed)
cal, test = folds == "cal", folds == "test"
crel = CReL.from_checkpoints(i.lgm, i.dqr, metric="cosine")
rel = dict(p.reliability)
scores = evaluate_crel(
    crel, X[cal], Y[cal], X[test], Y[test], GT[test], alpha=float(w.alpha),
    num_z0=rel["num_z0"], steps=rel["steps"], lr=rel["lr"], seed=p.seed,
    device=device_for_gpus(snakemake.resources.get("gpu", 0)),
)  # fmt: skip
z_worst = scores.pop("z_worst")
frame = pl.DataFrame({"image_id": ids[test], "model": w.model, "metric": w.metric, **scores}).with_columns(
    pl.Series("z_worst", z_worst.tolist())
)
write_parquet(frame, snakemake.output[0])
log.info("%s/%s: mean rho %.4f, CReL-rho %.4f, test coverage %.3f", w.model, w.metric, frame["rho"].mean(), frame["crel_rho"].mean(), frame["covered"].mean())
