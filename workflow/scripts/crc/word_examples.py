"""Snakemake adapter: caption panels coloured by outcome at the selected alpha (cf. the paper's Figs. 4–6)."""

import numpy as np
import polars as pl

from condeval.core.io import atomic_path
from condeval.core.logs import log_to_file
from condeval.crc.evaluate import read_sampled_sets
from condeval.crc.report import plot_word_examples

log = log_to_file(snakemake.log[0])
p = snakemake.params
frames, thresholds = [], []
tables = read_sampled_sets(snakemake.input.captions, snakemake.input.samples)  # each benchmark's shards in turn
for name, table, selected in zip(p.benchmarks, tables, snakemake.input.selected):
    test = table.filter((pl.col("subset") == "test") & (pl.col("labels").list.sum() > 0))
    rows = sorted(
        np.random.default_rng(p.seed).choice(len(test), size=min(p.per_benchmark, len(test)), replace=False).tolist()
    )
    threshold = pl.read_parquet(selected).filter(pl.col("benchmark") == name)["lambda_hat"][0]
    frames.append(
        test[rows].select("path", "words", "word_scores", "labels").with_columns(pl.lit(threshold).alias("threshold"))
    )
    thresholds.append(f"{name}: λ̂ = {threshold:.3f}")
    log.info("%s: %d examples at lambda %.4f", name, len(rows), threshold)
figure = plot_word_examples(
    pl.concat(frames), f"Word errors flagged at the selected α ({'; '.join(thresholds)}; numbers: f_v)"
)
with atomic_path(snakemake.output[0], suffix=".png") as tmp:
    figure.savefig(tmp, dpi=150, bbox_inches="tight")
