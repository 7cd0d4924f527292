"""Snakemake adapter: CReL-rho against num_z0 (Fig. 6), Table 2's search; its num_z0 point from Table 2's scores."""

import numpy as np
import polars as pl
import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import read_parquet, write_parquet
from condeval.core.logs import log_to_file
from condeval.core.settings import SearchSettings
from condeval.crel import CReL
from condeval.crel.image_to_text import item_arrays, num_z0_curve

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p, i, w = snakemake.params, snakemake.input, snakemake.wildcards
device = device_for_gpus(snakemake.resources.get("gpu", 0))
ids, X, Y, GT, folds = item_arrays(
    i, w.metric, p.seed, condition=p.condition, encoders={"clip": i.clip_encoder, "bert": i.bert_encoder}
)
cal, test = folds == "cal", folds == "test"
table2 = read_parquet(i.scores, columns=["image_id", "crel_rho", "converged"])
if not np.array_equal(table2["image_id"].to_numpy(), ids[test]):
    raise ValueError(f"{i.scores}: its test images are not those of the features' test fold")
crel = CReL.from_checkpoints(i.lgm, i.dqr, metric="cosine").calibrate(X[cal], Y[cal], float(w.alpha))
search = SearchSettings(**p.reliability, seed=p.seed)
searched = {search.num_z0: {name: table2[name].to_numpy() for name in ("crel_rho", "converged")}}
curve = num_z0_curve(crel, X[test], Y[test], GT[test], p.num_z0s, search=search, device=device, searched=searched)
write_parquet(
    pl.DataFrame(curve).with_columns(pl.lit(w.model).alias("model"), pl.lit(w.metric).alias("metric")),
    snakemake.output.num_z0,
)
log.info("%s/%s num_z0 curve: %s", w.model, w.metric, curve)
