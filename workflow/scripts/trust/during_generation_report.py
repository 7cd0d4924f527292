"""Snakemake adapter: Appendix L.2's per-step table, L.1's support-shift table and Fig. 4, every generator
scored during generation; the translators' check (held-out real images, translated against true features)."""

import numpy as np
import polars as pl

from condeval.core.io import atomic_path, read_json, read_parquet
from condeval.core.logs import log_to_file
from condeval.encoders.shards import read_feature_shards
from condeval.trust.data import ATTRIBUTE_NAMES, attributes_of, calibration_units, training_support
from condeval.trust.evaluate import ScorerOptions, Translations, translation_agreement
from condeval.trust.report import during_generation_markdown, plot_during_generation

log = log_to_file(snakemake.log[0])
p, w, i = snakemake.params, snakemake.wildcards, snakemake.input
steps = pl.concat(
    [read_parquet(path).with_columns(variant=pl.lit(v)) for v, path in zip(p.variants, i.steps, strict=True)],
    how="diagonal_relaxed",
)
names = list(ATTRIBUTE_NAMES[w.dataset])
table = read_parquet(i.table)
support = training_support(w.dataset, table, w.regime, dict(p.subset).get("held_out_pairs", 100))
ids, real_siglip, _ = read_feature_shards([i.real_siglip])
if not np.array_equal(ids, np.arange(table.height)):
    raise ValueError(f"{i.real_siglip}: its ids are not the rows of {i.table}")
attributes = attributes_of(w.dataset, table)
signals = {}
for variant, signal_path, held_out_path in zip(p.translated, i.signals, i.held_out, strict=True):
    held_ids, translated, meta = read_feature_shards([held_out_path], unique_ids=False)  # one block per t
    t_values = meta["t"]
    per_t = held_ids.reshape(len(t_values), -1)  # the checked rows (a seeded sample of those outside the support)
    if not (per_t == per_t[0]).all():
        raise ValueError(f"{held_out_path}: its ids are not the same rows of {i.table} at every t")
    agreement = translation_agreement(
        real_siglip,
        attributes,
        support,
        Translations(translated.reshape(*per_t.shape, -1), t_values, rows=per_t[0]),
        names,
        options=ScorerOptions(**dict(p.scorer), seed=p.seed),
        groups=calibration_units(w.dataset, table),
    )
    signals[variant] = read_json(signal_path)
    for row, scored in zip(signals[variant]["by_t"], agreement, strict=True):
        row["spearman"] = scored["spearman"]
with atomic_path(snakemake.output.table) as tmp:
    tmp.write_text(during_generation_markdown(steps, signals))
with atomic_path(snakemake.output.figure) as tmp:
    plot_during_generation(steps, tmp, f"{w.dataset}, {w.regime.replace('_', '-')} support: trust during generation")
log.info("during generation:\n%s", steps)
