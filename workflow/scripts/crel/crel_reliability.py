"""Snakemake adapter: CReL-rho, the worst similarity inside C_Z(x) by projected gradient descent (Eq. 8)."""

import polars as pl
import torch

from condeval.core.devices import device_for_gpus
from condeval.core.io import matrix_columns, read_parquet, write_parquet
from condeval.core.logs import log_to_file
from condeval.core.settings import SearchSettings
from condeval.crel import CReL
from condeval.crel.folds import load_fold

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
p = snakemake.params
scores = read_parquet(snakemake.input.scores, columns=["fold", "score"], finite=["score"])
cal_scores = scores.filter(scores["fold"] == "cal")["score"].to_numpy()
crel = CReL.from_checkpoints(snakemake.input.lgm, snakemake.input.dqr, **snakemake.params.lgm_options)
crel.calibrate_from_scores(cal_scores, float(snakemake.wildcards.alpha))
test = load_fold(snakemake.input.processed, "test").head(p.region_test_points)
worst, z_worst = crel.reliability(
    test.X,
    test.Y,
    search=SearchSettings(**p.reliability, seed=p.seed),
    device=device_for_gpus(snakemake.resources.get("gpu", 0)),
)
write_parquet(
    pl.DataFrame({"row": test.rows, "crel_rho": worst, **matrix_columns("z", z_worst)}), snakemake.output.reliability
)
log.info("CReL-%s mean %.6f over %d test points", crel.metric, float(worst.mean()), worst.size)
