"""Snakemake adapter: L2-normalize conditions, then standardize conditions and outputs on the LGM fold."""

import polars as pl

from condeval.core.io import matrix_columns, read_matrix, read_parquet, write_json, write_parquet
from condeval.core.logs import log_to_file
from condeval.crel.synthetic import Preprocessor

log = log_to_file(snakemake.log[0])
X = read_matrix(snakemake.input.data, "x", width=snakemake.params.p)
Y = read_matrix(snakemake.input.data, "y", width=snakemake.params.d)
splits = read_parquet(snakemake.input.splits, columns=["row", "fold", "is_val"])
lgm = (splits["fold"] == "lgm").to_numpy()
pre = Preprocessor().fit(X[lgm], Y[lgm])
table = splits.with_columns(
    **{k: pl.Series(v) for k, v in matrix_columns("x", pre.transform_x(X)).items()},
    **{k: pl.Series(v) for k, v in matrix_columns("y", pre.transform_y(Y)).items()},
)
write_parquet(table, snakemake.output.processed)
write_json(pre.to_dict(), snakemake.output.scaler)
log.info("processed %d rows", table.height)
