"""Snakemake adapter: caption panels coloured by outcome at the selected alpha (cf. the paper's Figs. 4–6)."""
import numpy as np
import polars as pl

from condeval.core.io import atomic_path
from condeval.core.logs import log_to_file
from condeval.crc.evaluate import join_samples
from condeval.crc.report import plot_word_examples

log = log_to_file(snakemake.log[0])
p = snakemake.params
shards = list(snakemake.input.samples)
per_set = len(shards) // len(p.benchmarks)  # the inputs list each benchmark's shards in turn
frames, thresholds = [], []
for number, (name, captions, selected) in enumerate(zip(p.benchmarks, snakemake.input.captions, snakemake.input.selected)):
    samples = pl.concat([pl.read_parquet(s) for s in shards[number * per_set : (number + 1) * per_set]])
    test = join_samples(pl.read_parquet(captions), samples, where=captions).filter((pl.col("subset") == "test") & (pl.col("labels").list.sum() > 0))
    rows = sorted(np.random.default_rng(p.seed).choice(len(test), size=min(p.per_benchmark, len(test)), replace=False).tolist())
    threshold = pl.read_parquet(selected).filter(pl.col("benchmark") == name)["lambda_hat"][0]
    frames.append(test[rows].select("path", "words", "word_scores", "labels").with_columns(pl.lit(threshold).alias("threshold")))
    thresholds.append(f"{name}: λ̂ = {threshold:.3f}")
    log.info("%s: %d examples at lambda %.4f", name, len(rows), threshold)
figure = plot_word_examples(pl.concat(frames), f"Word errors flagged at the selected α ({'; '.join(thresholds)}; numbers: f_v)")
with atomic_path(snakemake.output[0], suffix=".png") as tmp:
    figure.savefig(tmp, dpi=150, bbox_inches="tight")
