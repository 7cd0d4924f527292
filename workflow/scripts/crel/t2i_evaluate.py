"""Snakemake adapter: calibrate CReL at alpha and score every test item of one text-to-image model and metric."""

import polars as pl
import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import write_parquet
from condeval.core.logs import log_to_file
from condeval.core.settings import SearchSettings
from condeval.crel import CReL
from condeval.crel.image_to_text import CalibrationFold, evaluate_crel
from condeval.crel.text_to_image import FEATURE_SOURCES, item_arrays

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, i, w = snakemake.params, snakemake.input, snakemake.wildcards
ids, X, Y, GT, folds = item_arrays(
    {name: i[name] for name in FEATURE_SOURCES},
    w.metric,
    p.seed,
    encoders={"clip": i.clip_encoder, "dino": i.dino_encoder},
)
cal, test = folds == "cal", folds == "test"
crel = CReL.from_checkpoints(i.lgm, i.dqr, metric="cosine")
search = SearchSettings(**p.reliability, seed=p.seed)
device = device_for_gpus(snakemake.resources.get("gpu", 0))
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
z_worst = scores.pop("z_worst")
frame = pl.DataFrame({"image_id": ids[test], "model": w.model, "metric": w.metric, **scores}).with_columns(
    pl.Series("z_worst", z_worst.tolist())
)
write_parquet(frame, snakemake.output.scores)
log.info(
    "%s/%s: mean rho %.4f, rho at own code %.4f, CReL-rho %.4f, test coverage %.3f, converged %.3f (num_z0 %d)",
    w.model,
    w.metric,
    frame["rho"].mean(),
    frame["rho_own_code"].mean(),
    frame["crel_rho"].mean(),
    frame["covered"].mean(),
    frame["converged"].mean(),
    search.num_z0,
)
