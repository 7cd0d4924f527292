"""Snakemake adapter: raw synthetic data of CReL Appendix B.1."""

import polars as pl

from condeval.core.io import matrix_columns, write_npz, write_parquet
from condeval.core.logs import log_to_file
from condeval.crel.synthetic import generate

log = log_to_file(snakemake.log[0])
p = snakemake.params
X, Y, params = generate(snakemake.wildcards.dataset, p.n, p.p, p.d, p.sigma, p.seed)
write_parquet(pl.DataFrame({**matrix_columns("x", X), **matrix_columns("y", Y)}), snakemake.output.data)
write_npz(snakemake.output.params, A=params.A, B=params.B, sigma=params.sigma, kind=params.kind)
log.info("generated %s: n=%d p=%d d=%d sigma=%g", params.kind, p.n, p.p, p.d, p.sigma)
