"""Snakemake adapter: the alpha sweep of one word benchmark, the selected alpha, the detection signal."""

import polars as pl

from condeval.core.io import write_json, write_parquet
from condeval.core.logs import log_to_file
from condeval.crc.evaluate import (
    detection_signal,
    domain_metrics,
    read_sampled,
    refuse_truncated,
    risk_sweep,
    select_alpha,
)

log = log_to_file(snakemake.log[0])
p, files, name = snakemake.params, snakemake.input, snakemake.wildcards.word_benchmark


table, refused = refuse_truncated(read_sampled(files.captions, files.samples))
calibration, test = table.filter(pl.col("subset") == "calibration"), table.filter(pl.col("subset") == "test")
sweep = risk_sweep(calibration, test, p.alphas, p.delta, p.risk, unit=p.unit).with_columns(
    pl.lit(refused).alias("n_refused_truncated")
)
alpha = select_alpha(sweep)
threshold = sweep.filter(pl.col("alpha") == alpha)["lambda_hat"][0]
selected = [domain_metrics(test, threshold, p.risk).with_columns(pl.lit(name).alias("benchmark"))]
refused_by_benchmark = {name: refused}
if "shift_captions" in files.keys():
    shift, refused_by_benchmark["foil_nocaps"] = refuse_truncated(
        read_sampled(files.shift_captions, files.shift_samples)
    )
    selected.append(domain_metrics(shift, threshold, p.risk).with_columns(pl.lit("foil_nocaps").alias("benchmark")))
selected = pl.concat(selected, how="diagonal_relaxed").with_columns(
    pl.lit(alpha).alias("alpha"),
    pl.lit(threshold).alias("lambda_hat"),
    pl.col("benchmark").replace_strict(refused_by_benchmark).alias("n_refused_truncated"),
)
write_parquet(sweep, snakemake.output.sweep)
write_parquet(selected, snakemake.output.selected)
signal = detection_signal(test)
write_json(signal, snakemake.output.signal)
for benchmark, count in refused_by_benchmark.items():
    # A valid word past the tokenizer's max_length is never masked and never flagged: such captions are left out.
    log.info("%s: %d captions refused (a valid word past the tokenizer's max_length)", benchmark, count)
log.info(
    "%s: %d calibration captions (%d %ss), %d test captions; selected alpha %.2f (best calibration F1), lambda %.4f",
    name,
    len(calibration),
    sweep["n_units"][0],
    p.unit,
    len(test),
    alpha,
    threshold,
)
log.info("detection signal on the test captions: %s", signal)
