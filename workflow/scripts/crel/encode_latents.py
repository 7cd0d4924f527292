"""Snakemake adapter: latent codes E(y[, x]) of the DQR, calibration and test rows with a trained LGM."""

import polars as pl
import torch

from condeval.core.io import matrix_columns, read_matrix, read_parquet, write_parquet
from condeval.core.logs import log_to_file
from condeval.crel.models.lgm import load_lgm

log = log_to_file(snakemake.log[0])
torch.set_num_threads(snakemake.threads)
lgm = load_lgm(snakemake.input.lgm, **snakemake.params.lgm_options)
# The LGM fold trained the LGM; only the DQR, calibration and test folds need codes.
keep = read_parquet(snakemake.input.processed, columns=["fold"])["fold"].to_numpy() != "lgm"
rows = read_parquet(snakemake.input.processed, columns=["row"])["row"].to_numpy()[keep]
Y = torch.as_tensor(read_matrix(snakemake.input.processed, "y")[keep], dtype=torch.float32)
X = (
    torch.as_tensor(read_matrix(snakemake.input.processed, "x")[keep], dtype=torch.float32)
    if lgm.is_conditional
    else None
)
with torch.no_grad():
    Z = torch.cat(
        [lgm.encode(y, None if X is None else X[i : i + len(y)]) for i, y in zip(range(0, len(Y), 8192), Y.split(8192))]
    )
write_parquet(pl.DataFrame({"row": rows, **matrix_columns("z", Z.double().numpy())}), snakemake.output.latents)
log.info("encoded %d rows into r=%d", Z.shape[0], Z.shape[1])
