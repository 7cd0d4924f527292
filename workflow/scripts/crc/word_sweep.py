"""Snakemake adapter: the alpha sweep of one word benchmark, the selected alpha, the detection signal."""
import polars as pl

from condeval.core.io import write_json, write_parquet
from condeval.core.logs import log_to_file
from condeval.crc.evaluate import detection_signal, domain_metrics, read_sampled, risk_sweep, select_alpha

log = log_to_file(snakemake.log[0])
p, files, name = snakemake.params, snakemake.input, snakemake.wildcards.word_benchmark


table = read_sampled(files.captions, files.samples)
calibration, test = table.filter(pl.col("subset") == "calibration"), table.filter(pl.col("subset") == "test")
sweep = risk_sweep(calibration, test, p.alphas, p.delta, p.risk)
alpha = select_alpha(sweep)
threshold = sweep.filter(pl.col("alpha") == alpha)["lambda_hat"][0]
selected = [domain_metrics(test, threshold, p.risk).with_columns(pl.lit(name).alias("benchmark"))]
if "shift_captions" in files.keys():
    selected.append(domain_metrics(read_sampled(files.shift_captions, files.shift_samples), threshold, p.risk).with_columns(pl.lit("foil_nocaps").alias("benchmark")))
selected = pl.concat(selected, how="diagonal_relaxed").with_columns(pl.lit(alpha).alias("alpha"), pl.lit(threshold).alias("lambda_hat"))
write_parquet(sweep, snakemake.output.sweep)
write_parquet(selected, snakemake.output.selected)
signal = detection_signal(test)
write_json(signal, snakemake.output.signal)
log.info("%s: %d calibration, %d test captions; selected alpha %.2f (best calibration F1), lambda %.4f", name, len(calibration), len(test), alpha, threshold)
log.info("detection signal on the test captions: %s", signal)
