"""Snakemake adapter: how often each generator draws the requested attributes, seen and unseen conditions."""

import numpy as np
import polars as pl

from condeval.core.io import atomic_path, read_parquet, write_parquet
from condeval.core.logs import log_to_file
from condeval.encoders.shards import read_feature_shards
from condeval.trust.data import ATTRIBUTE_NAMES, attributes_of, training_support
from condeval.trust.samples import sample_feature_files
from condeval.trust.signal import generated_attribute_accuracy, generated_signal_markdown

log = log_to_file(snakemake.log[0])
p, w, i = snakemake.params, snakemake.wildcards, snakemake.input
names = list(ATTRIBUTE_NAMES[w.dataset])
table = read_parquet(i.table)
real_attributes = attributes_of(w.dataset, table)
_, real, _ = read_feature_shards([i.real])
support = training_support(w.dataset, table, w.regime, dict(p.subset).get("held_out_pairs", 100))
seen_conditions = {tuple(r) for r in real_attributes[support].tolist()}
conditions = read_parquet(i.conditions).select(names).to_numpy()
rows = []
shards = sample_feature_files(i.samples, "dinov3")
for k, variant in enumerate(p.variants):
    ids, features, _ = read_feature_shards(shards[k * p.shards : (k + 1) * p.shards])
    requested = conditions[ids // p.per_condition]
    seen = np.array([tuple(r) in seen_conditions for r in requested.tolist()])
    for row in generated_attribute_accuracy(real, real_attributes, features, requested, seen, names, seed=p.seed):
        rows.append({"variant": variant} | row)
signal = pl.DataFrame(rows)
write_parquet(signal, snakemake.output.signal)
markdown = generated_signal_markdown(signal)
with atomic_path(snakemake.output.markdown) as tmp:
    tmp.write_text(markdown)
log.info("requested attributes read by real-fitted probes:\n%s", markdown)
