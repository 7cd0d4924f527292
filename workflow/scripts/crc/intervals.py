"""Snakemake adapter: Learn-then-Test calibration of the CLIPScore intervals; Table 5's rows."""

import numpy as np
import polars as pl

from condeval.core.io import write_json, write_parquet
from condeval.core.logs import log_to_file
from condeval.crc.evaluate import interval_metrics, read_sampled_sets

log = log_to_file(snakemake.log[0])
p = snakemake.params
config = dict(p.intervals)
# The inputs list each set's shards in turn; the I×T samples themselves are not needed here.
tables = dict(
    zip(p.names, read_sampled_sets(snakemake.input.captions, snakemake.input.samples, keep_distribution=False))
)
calibration_set = config["calibration"]["dataset"]
calibration = tables[calibration_set].filter(pl.col("subset") == "calibration")
evaluations = {name: table.filter(pl.col("subset") == "test") for name, table in tables.items()}
grid = config["lambdas"]
table, result = interval_metrics(
    calibration,
    evaluations,
    delta=config["delta"],
    lambdas=np.linspace(grid["start"], grid["stop"], grid["num"]),
    method=config["method"],
    truncation_factor=config["truncation_factor"],
    unit=p.unit,
)
n_units = calibration["path"].n_unique() if p.unit == "image" else len(calibration)
write_parquet(table, snakemake.output.table)
if result is None:
    summary = {
        "calibration_set": calibration_set,
        "n_calibration": len(calibration),
        "unit": p.unit,
        "n_units": n_units,
        "lambda_hat": None,
        "n_valid": 0,
    }
    log.warning(
        "Learn-then-Test rejected no lambda on %d %s pairs: Table 5 shows no POS row", len(calibration), calibration_set
    )
else:
    summary = {
        "calibration_set": calibration_set,
        "n_calibration": len(calibration),
        "unit": p.unit,
        "n_units": n_units,
        "alpha": result.alpha,
        "lambda_hat": result.lambda_hat,
        "bounds": list(result.bounds),
        "n_valid": len(result.valid),
        "lambdas": result.lambdas.tolist(),
        "risks": result.risks.tolist(),
        "p_values": result.p_values.tolist(),
    }
    log.info(
        "intervals calibrated on %d %s pairs (n = %d %ss): alpha = R(1) = %.4f, lambda_hat = %g (%d of %d lambdas valid)",
        len(calibration),
        calibration_set,
        n_units,
        p.unit,
        result.alpha,
        result.lambda_hat,
        len(result.valid),
        len(result.lambdas),
    )
write_json(summary, snakemake.output.calibration)
log.info("\n%s", table)
