"""Snakemake adapter: calibrate CReL at alpha, score every test image, check its worst case against
real captions."""

import numpy as np
import polars as pl
import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import write_parquet
from condeval.core.logs import log_to_file
from condeval.core.settings import SearchSettings
from condeval.crel import CReL
from condeval.crel.image_to_text import CalibrationFold, decoded_points, evaluate_crel, item_arrays, manifold_check
from condeval.encoders.shards import read_feature_shards

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, i, w = snakemake.params, snakemake.input, snakemake.wildcards
device = device_for_gpus(snakemake.resources.get("gpu", 0))
ids, X, Y, GT, folds = item_arrays(
    i, w.metric, p.seed, condition=p.condition, encoders={"clip": i.clip_encoder, "bert": i.bert_encoder}
)
cal, test = folds == "cal", folds == "test"
crel = CReL.from_checkpoints(i.lgm, i.dqr, metric="cosine")
search = SearchSettings(**p.reliability, seed=p.seed)
scores = evaluate_crel(
    crel,
    CalibrationFold(X[cal], Y[cal]),
    X[test],
    Y[test],
    GT[test],
    alpha=float(w.alpha),
    search=search,
    device=device,
)
gallery_ids, gallery, _ = read_feature_shards(list(i.gallery))
if not np.array_equal(gallery_ids, ids):
    raise ValueError(f"{i.gallery[0]}...: the real captions' feature shards cover other image ids than the model's")
scores.update(manifold_check(decoded_points(crel, scores["z_worst"], X[test]), Y[test], gallery, np.flatnonzero(test)))
z_worst = scores.pop("z_worst")
frame = pl.DataFrame({"image_id": ids[test], "model": w.model, "metric": w.metric, **scores}).with_columns(
    pl.Series("z_worst", z_worst.tolist())
)
write_parquet(frame, snakemake.output.scores)
log.info(
    "%s/%s: mean rho %.4f, rho at own code %.4f, CReL-rho %.4f, test coverage %.3f, converged %.3f; nearest real caption: worst case %.4f, sampled %.4f, real %.4f (medians)",
    w.model,
    w.metric,
    frame["rho"].mean(),
    frame["rho_own_code"].mean(),
    frame["crel_rho"].mean(),
    frame["covered"].mean(),
    frame["converged"].mean(),
    frame["worst_nn_distance"].median(),
    frame["caption_nn_distance"].median(),
    frame["reference_nn_distance"].median(),
)
