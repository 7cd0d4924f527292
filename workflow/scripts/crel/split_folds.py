"""Snakemake adapter: deterministic lgm/dqr/cal/test folds plus early-stopping rows."""

import numpy as np
import polars as pl

from condeval.core.io import read_parquet, write_parquet
from condeval.core.logs import log_to_file
from condeval.crel.synthetic import assign_folds

log = log_to_file(snakemake.log[0])
n = read_parquet(snakemake.input.data, columns=["y0"]).height
p = snakemake.params
folds = assign_folds(n, dict(p.fractions), p.seed)
is_val = np.random.default_rng(p.seed + 1).random(n) < p.val_fraction
is_val &= np.isin(folds, ["lgm", "dqr"])
write_parquet(pl.DataFrame({"row": np.arange(n), "fold": folds, "is_val": is_val}), snakemake.output.splits)
log.info("fold sizes: %s", {f: int((folds == f).sum()) for f in np.unique(folds)})
